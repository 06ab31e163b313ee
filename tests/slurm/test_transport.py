"""A misconfigured Slurm cluster is a configuration error at once, not "temporary: try again"
after Slurm's own 60 s of retries (issue 26). Real processes; the messages are the ones
Slurm 22.05 and OpenSSH print (seen on this project's real Slurm: a missing slurm.conf, an
unknown SlurmctldHost, an unknown ssh host)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dispatch.adapters.slurm.transport import LocalTransport, ProcessRunner
from dispatch.model import ConfigError, SchedulerUnavailable


def fails_with(stderr: str) -> list[str]:
    return ["sh", "-c", 'printf "%s\\n" "$0" >&2; exit 1', stderr]


@pytest.mark.parametrize(
    "stderr",
    [
        "sinfo: error: s_p_parse_file: cannot stat file /etc/slurm/slurm.conf: No such file "
        "or directory, retrying in 1sec up to 60sec",
        "sinfo: fatal: Unable to process configuration file",
        "squeue: error: get_addr_info: getaddrinfo() failed: Name or service not known: "
        "Inappropriate ioctl for device, attempt number -4",
        "ssh: Could not resolve hostname login-1: Name or service not known",
    ],
)
def test_configuration_errors_are_named_as_such(stderr: str) -> None:
    runner = ProcessRunner(LocalTransport())
    with pytest.raises(ConfigError, match="misconfigured, not busy"):
        asyncio.run(runner.run(fails_with(stderr)))


def test_a_controller_that_is_down_stays_temporary() -> None:
    runner = ProcessRunner(LocalTransport())
    stderr = "squeue: error: Unable to contact slurm controller (connect failure)"
    result = asyncio.run(runner.run(fails_with(stderr)))
    assert not result.ok  # the caller treats it as SchedulerUnavailable, to retry


def test_a_slurm_conf_that_is_not_there_is_refused_before_running(tmp_path: Path) -> None:
    runner = ProcessRunner(LocalTransport(), env={"SLURM_CONF": str(tmp_path / "no.conf")})
    ran = tmp_path / "ran"
    with pytest.raises(ConfigError, match="is not a file here"):
        asyncio.run(runner.run(["touch", str(ran)]))
    assert not ran.exists()  # nothing ran (Slurm itself would retry for 60 s)


def test_slurm_commands_not_installed_is_a_configuration_error() -> None:
    runner = ProcessRunner(LocalTransport())
    with pytest.raises(ConfigError, match="not installed here"):
        asyncio.run(runner.run(["no-such-sbatch-zz"]))
    assert not issubclass(ConfigError, SchedulerUnavailable)

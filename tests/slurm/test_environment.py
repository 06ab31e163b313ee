"""On a real Slurm: the tasks' environment is the job's captured base and inheritEnv, its
env and its secrets, not the supervisor's; secret values reach sbatch only through its own
environment (``--export`` names them), never the batch script."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.secrets import SecretStore
from dispatch.adapters.slurm import SlurmAdapter
from dispatch.adapters.slurm.transport import CommandResult, SshTransport, Transport
from dispatch.config import ClusterConfig
from dispatch.model import Job, parse_spec
from tests.slurm.conftest import run
from tests.slurm.test_real_slurm import output_of, watch_to_end

RECORDED = Path(__file__).parent / "recorded"


def test_tasks_get_the_captured_environment_and_secrets_only(
    slurm: SlurmAdapter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text("file-secret-41\n")
    spec = parse_spec(
        {
            "name": "envs",
            "cluster": "testslurm",
            "command": ["sh", "-c", "env | sort"],
            "env": {"EPOCHS": "3"},
            "inheritEnv": ["FOO"],
            "secretEnv": {"TOKEN": {"fromFile": str(token)}, "KEPT": {"fromEnv": "MINE"}},
        }
    )
    captured = {"PATH": os.environ["PATH"], "HOME": "/captured/home", "FOO": "bar"}
    job = Job(id="envs-x1", spec=spec, created_at=1_800_000_000.0, environment=captured)
    SecretStore(tmp_path / "state" / "secrets").keep(job.id, {"KEPT": "env-secret-42"})
    monkeypatch.setenv("BAR", "only-the-supervisor-has-it")
    monkeypatch.setenv("HOME", "/supervisor/home")

    async def scenario() -> dict[str, str]:
        handle = await slurm.start(job, 1)
        seen = await watch_to_end(slurm, handle)
        assert seen[-1].outcome.cause is None, seen[-1].outcome.summary
        return await output_of(slurm, handle, 0)

    env = run(scenario())
    assert (env["FOO"], env["EPOCHS"], env["HOME"]) == ("bar", "3", "/captured/home")
    assert (env["TOKEN"], env["KEPT"]) == ("file-secret-41", "env-secret-42")
    assert "BAR" not in env
    assert env["DISPATCH_JOB"] == job.id and env["PET_NNODES"] == "1"

    plan = run(slurm.plan(job, 1))
    script, _, sbatch = plan.artifacts
    assert "secret-4" not in str(script.content) and "secret-4" not in str(sbatch.content)
    assert sbatch.content["argv"][-1] == "--export=FOO,HOME,KEPT,PATH,TOKEN"
    assert sbatch.content["secretEnv"] == {"TOKEN": "(secret)", "KEPT": "(secret)"}


class ProbeAnswers:
    """Answers the four probe commands from recorded output (our own seam)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        files = {
            "--version": "sinfo-version-22.05.txt",
            "config": "scontrol-show-config-22.05.txt",
            "partition": "scontrol-show-partition-22.05.txt",
            "node": "scontrol-show-node-22.05.txt",
        }
        name = next(f for key, f in files.items() if key in argv)
        return CommandResult(tuple(argv), 0, (RECORDED / name).read_text(), "")


def test_secret_env_over_ssh_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    settings = {"transport": "ssh", "host": "login.example", "outputDir": "/shared/out"}
    cluster = ClusterConfig("hpc", "slurm", settings)
    context = AdapterContext(state_dir=tmp_path / "state")
    transport = SshTransport(host="login.example")
    adapter = SlurmAdapter(cluster, context, runner=ProbeAnswers(transport))
    secret = parse_spec(
        {"name": "s", "cluster": "hpc", "command": ["x"], "secretEnv": {"T": {"fromEnv": "T"}}}
    )
    plain = secret.model_copy(update={"secret_env": {}})
    refused = run(adapter.capabilities(secret)).refusals
    assert [r.rule for r in refused] == ["slurm-secret-transport"]
    assert run(adapter.capabilities(plain)).refusals == ()

"""A runner that cannot write its facts (a full disk) ends the attempt ``unknown`` with the
error as evidence, not ``node_lost``. The disk is made full for ``status.json`` only: the
real runner runs in its own process with its ``write_json`` replaced by one raising ENOSPC
(no hook in the runner itself)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil

from dispatch.adapters.local.causes import derive_outcome
from dispatch.adapters.local.files import AttemptPaths, private_dirs, write_json
from dispatch.adapters.local.launch import build_launch
from dispatch.adapters.local.launchfile import TAG_ENV
from dispatch.model import Cause, State
from tests.local.conftest import Harness

#: the runner's own main, with every status write after the first failing as on a full disk
FULL_DISK_RUNNER = """
import errno, sys
from dispatch.adapters.local import runner
real = runner.write_json
def full(path, value):
    if path.name == "status.json" and value.get("phase") != "starting":
        raise OSError(errno.ENOSPC, "No space left on device")
    real(path, value)
runner.write_json = full
sys.exit(runner.main(sys.argv))
"""


def test_a_runner_that_cannot_write_its_status_ends_the_attempt_unknown(
    harness: Harness,
) -> None:
    job = harness.job(env={"SLEEP": "60"})
    paths = AttemptPaths.of(harness.state, job.id, 1)
    private_dirs(paths.root)
    launch = build_launch(
        job,
        1,
        working_dir=str(harness.root),
        master_port=29400,
        inherited={"PATH": "/usr/bin:/bin"},
        python_dir=str(Path(sys.executable).parent),
        kill_grace=2.0,
    )
    write_json(paths.launch, launch.to_json())
    runner = subprocess.run(
        [sys.executable, "-c", FULL_DISK_RUNNER, str(paths.root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert runner.returncode == 0, runner.stderr
    assert "No space left on device" in runner.stderr

    observation = harness.observe(harness.adapter.handle(job.id, 1))
    outcome = observation.outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.UNKNOWN)
    assert "No space left on device" in outcome.summary
    assert "status.json" in outcome.summary
    faults = [e for e in outcome.evidence if e.key == "runner-fault"]
    assert faults and "No space left on device" in faults[0].summary
    assert any(e.key == "runner-fault" for e in observation.evidence)
    # the ranks it started but could not supervise were stopped, not left running
    started = [p["pid"] for p in json.loads(paths.status.read_text())["processes"]]
    assert started == [None, None]  # the last status it could write: before the start
    assert not tagged(launch.tag)


def tagged(tag: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["environ"]):
        try:
            if (process.info["environ"] or {}).get(TAG_ENV) == tag:
                found.append(process.pid)
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
    return found


def test_what_the_runner_could_not_record_wins_over_a_lost_runner() -> None:
    status = {"phase": "running", "runnerPid": 7, "processes": [], "events": []}
    fault = {"at": 5.0, "error": "cannot write status.json: No space left on device"}
    outcome = derive_outcome(status, None, runner_alive=False, now=9.0, fault=fault)
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.UNKNOWN)
    assert [e.key for e in outcome.evidence] == ["runner-fault"]
    # without it, the same facts are a lost runner, as before
    lost = derive_outcome(status, None, runner_alive=False, now=9.0)
    assert lost.cause is Cause.NODE_LOST

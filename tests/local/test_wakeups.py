"""Event-driven waits: ``watch`` wakes on the runners' change marker, ``start`` on the claim."""

from __future__ import annotations

import ast
import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from dispatch.adapters.local.changes import Changes
from dispatch.adapters.local.files import READY_FD_ENV, take_lock, touch
from dispatch.clock import ManualClock, SystemClock
from dispatch.model import OutcomeUnknown, State
from tests.local.conftest import Harness


def test_changes_wake_on_a_touched_marker_long_before_the_timeout(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    changes = Changes(jobs, SystemClock(), fallback=0.05)

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, touch, jobs / ".changed")
        began = time.monotonic()
        await asyncio.wait_for(changes.wait(60.0), 20.0)
        return time.monotonic() - began

    try:
        assert asyncio.run(scenario()) < 20.0
    finally:
        changes.close()


def test_changes_wait_the_injected_clock_when_nothing_changes(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    clock = ManualClock()
    start = clock.now()
    changes = Changes(jobs, clock, fallback=0.05)
    try:
        asyncio.run(changes.wait(3.0))
    finally:
        changes.close()
    assert clock.now() - start == pytest.approx(3.0)


def test_changes_poll_without_a_jobs_folder(tmp_path: Path) -> None:
    clock = ManualClock()
    start = clock.now()
    changes = Changes(tmp_path / "missing", clock, fallback=0.05)
    asyncio.run(changes.wait(3.0))
    assert clock.now() - start == pytest.approx(0.05)


def test_ranks_inherit_neither_the_claim_pipe_nor_its_variable(harness: Harness) -> None:
    report = harness.out / "inherited"
    script = (
        "import os, sys\n"
        "fds = [f for f in os.listdir('/proc/self/fd') if int(f) > 2]\n"
        f"open(sys.argv[1], 'w').write(repr((os.environ.get({READY_FD_ENV!r}), len(fds))))\n"
    )
    job = harness.job(procsPerNode=1, command=[sys.executable, "-c", script, str(report)])
    handle = harness.start(job)
    assert harness.wait_end(handle).outcome.state is State.SUCCEEDED
    variable, open_fds = ast.literal_eval(report.read_text())
    assert variable is None
    assert open_fds == 1  # only the one listdir itself opened


def test_start_hears_a_runner_that_ends_without_claiming(harness: Harness) -> None:
    job = harness.job(env={"SLEEP": "0"})
    paths = harness.adapter.paths(job.id, 1)
    paths.root.mkdir(parents=True)
    held = take_lock(paths.runner_lock, block=True)  # as if another runner owned the attempt
    try:
        with pytest.raises(OutcomeUnknown, match="ended before claiming"):
            harness.start(job)
    finally:
        assert held is not None
        os.close(held)
    assert not paths.claim.exists()
    assert not (harness.out / "starts").exists()  # nothing ran

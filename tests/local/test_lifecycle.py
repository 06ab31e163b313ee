"""Attempts outlive the process that started them, are observed from anywhere, start once,
and leave no process behind when the runner or the starter is killed."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import textwrap

import psutil

from dispatch.model import Cause, State
from tests.local.conftest import (
    Harness,
    alive,
    no_process_left,
    rank_info,
    rank_pids,
    wait_until,
)


def test_a_fresh_adapter_observes_the_same_outcome(harness: Harness) -> None:
    handle = harness.start(harness.job(env={"FAIL_RANK": "0", "SLEEP": "60"}))
    first = harness.wait_end(handle)
    again = harness.observe(handle, harness.new_adapter())
    assert again.outcome.to_json() == first.outcome.to_json()
    assert [e.key for e in again.evidence] == [e.key for e in first.evidence]


def test_second_start_adopts_and_never_runs_twice(harness: Harness) -> None:
    job = harness.job(env={"SLEEP": "1"})
    first = harness.start(job)
    second = harness.start(job)
    assert first == second
    harness.wait_end(first)

    async def both() -> None:  # concurrent starts from two "processes"
        other = harness.new_adapter()
        await asyncio.gather(harness.adapter.start(job, 2), other.start(job, 2))

    harness.run(both())
    assert harness.wait_end(harness.adapter.handle(job.id, 2)).outcome.state is State.SUCCEEDED
    assert sorted((harness.out / "starts").read_text().split()) == ["0", "0", "1", "1"]


def test_watch_yields_each_attempt_then_its_changes(harness: Harness) -> None:
    handles = [harness.start(harness.job(f"job-{i}", env={"SLEEP": "0.5"})) for i in (1, 2)]

    async def follow() -> dict[str, list[tuple[State, tuple[str, ...]]]]:
        seen: dict[str, list[tuple[State, tuple[str, ...]]]] = {h.job_id: [] for h in handles}
        async for observation in harness.adapter.watch(handles):
            keys = tuple(e.key for e in observation.evidence)
            seen[observation.handle.job_id].append((observation.state, keys))
            if all(s and s[-1][0].is_terminal for s in seen.values()):
                return seen
        raise AssertionError("watch ended")

    seen = harness.run(asyncio.wait_for(follow(), 30))
    for changes in seen.values():
        assert changes[-1][0] is State.SUCCEEDED
        # yielded on change only: never the same observation twice in a row
        assert all(a != b for a, b in itertools.pairwise(changes))
        assert len(changes) <= 6


def test_no_orphans_after_sigkill_of_the_runner(harness: Harness) -> None:
    job = harness.job(nodes=2, procsPerNode=1, env={"SLEEP": "120", "GRANDCHILD": "1"})
    handle = harness.start(job)
    harness.wait_files(["pid-0", "pid-1", "grandchild-0", "grandchild-1"])
    pids = list(rank_pids(harness.out).values())
    pids += [int((harness.out / f"grandchild-{r}").read_text()) for r in ("0", "1")]
    runner = rank_info(harness.out, "0")[2]
    assert "dispatch.adapters.local.runner" in psutil.Process(runner).cmdline()
    os.kill(runner, signal.SIGKILL)
    assert no_process_left(pids), [p for p in pids if alive(p)]
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.NODE_LOST)
    assert wait_until(lambda: any(e.kind == "runner" for e in harness.observe(handle).evidence), 10)


STARTER = """
import asyncio, sys
from pathlib import Path
from dispatch.adapters.base import AdapterContext
from dispatch.adapters.local import LocalAdapter
from dispatch.config import ClusterConfig
from dispatch.model import Job, parse_spec

spec = parse_spec({"name": "t", "nodes": 2, "procsPerNode": 1, "command": ["python", "rank.py"],
                   "workingDir": sys.argv[2], "env": {"OUT": sys.argv[3], "SLEEP": "120"}})
adapter = LocalAdapter(ClusterConfig("local", "local"), AdapterContext(Path(sys.argv[1])))
asyncio.run(adapter.start(Job("job-1", spec, 0.0), 1))
print("started", flush=True)
sys.stdin.read()
"""


def test_the_attempt_outlives_a_killed_starter_and_stays_under_control(harness: Harness) -> None:
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(STARTER),
            str(harness.state),
            str(harness.root),
            str(harness.out),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    assert starter.stdout.readline().strip() == "started"
    harness.wait_files(["pid-0", "pid-1"])
    starter.kill()
    starter.wait()
    pids = list(rank_pids(harness.out).values())
    handle = harness.adapter.handle("job-1", 1)
    # the ranks keep running under their runner, not as orphans of the dead starter
    assert harness.observe(handle).outcome.state is State.RUNNING
    runner = rank_info(harness.out, "0")[2]
    assert alive(runner) and all(psutil.Process(p).ppid() == runner for p in pids)
    harness.run(harness.new_adapter().cancel(handle, "test", "starter died"))
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert no_process_left([*pids, runner])

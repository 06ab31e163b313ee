"""Many jobs through mixed scenarios with API faults, dropped watch streams and supervisors
killed at random points: every job ends with the right cause, none lost, none duplicated.

``DISPATCH_E2E_JOBS`` sets the number of jobs (default 16, to keep the default suite short).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.model import Cause, State
from dispatch.testing.k8s import FaultRule

from .harness import World, kueue

JOBS = int(os.environ.get("DISPATCH_E2E_JOBS", "16"))
#: name -> (pod scenario, spec overrides, expected state, expected cause, expected rank)
MIX = {
    "ok": ({"default": {"runFor": 5}}, {}, State.SUCCEEDED, None, None),
    "app": ({"pods": [{"index": 1, "runFor": 4, "exitCode": 2}], "default": {"runFor": 60}},
            {}, State.FAILED, Cause.APP_ERROR, 1),
    "oom": ({"pods": [{"index": 0, "runFor": 4, "oomKilled": True}], "default": {"runFor": 60}},
            {}, State.FAILED, Cause.OUT_OF_MEMORY, 0),
    "late": ({"default": {"runFor": 600}}, {"timeLimit": "15s"}, State.FAILED, Cause.TIMEOUT,
             None),
}  # fmt: skip


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path, kueue_config=kueue(), nodes=tuple(f"node-{i}" for i in range(1, 9)))
    made.emulator.faults.add(FaultRule(probability=0.05, status=500, message="injected"))
    made.emulator.faults.add(FaultRule(verb="watch", drop_after_seconds=3.0))
    try:
        yield made
    finally:
        made.close()


async def _supervise_with_kills(world: World, rng: random.Random, deadline: float) -> int:
    """Run supervisors one after the other, killing each after a random while; returns kills."""
    kills = 0
    while world.records.list_jobs(open_only=True):
        if time.monotonic() > deadline:
            raise AssertionError("jobs did not all end in time")
        supervisor = world.supervisor(owner=f"s{kills}")
        task = asyncio.ensure_future(supervisor.run(asyncio.Event(), until_idle=True))
        done, _ = await asyncio.wait({task}, timeout=rng.uniform(0.3, 2.0))
        if not done:
            task.cancel()  # the supervisor dies wherever it was
            kills += 1
        else:
            task.result()
        for adapter in world.adapters_made:
            await adapter.aclose()  # type: ignore[attr-defined]
        world.adapters_made.clear()
    return kills


def _submit_mix(world: World, count: int = JOBS) -> dict[str, str]:
    kinds = list(MIX)
    jobs = {}
    for i in range(count):
        kind = kinds[i % len(kinds)]
        pods, spec, *_ = MIX[kind]
        jobs[world.submit(f"{kind}{i}", pods, **spec)] = kind
    return jobs


def _check(world: World, jobs: dict[str, str]) -> list[tuple[str, object, str]]:
    """Every job ended after exactly one attempt (none lost, none duplicated); returns those
    whose (state, cause, first rank) differ from the scenario's."""
    wrong = []
    for job, kind in jobs.items():
        _, _, state, cause, rank = MIX[kind]
        attempts = world.records.attempts(job)
        record = world.records.get_job(job)
        assert record.state.is_terminal and len(attempts) == 1, (job, record, attempts)
        first = attempts[0].outcome.first_failure if attempts[0].outcome else None
        got = (record.state, record.cause, first.rank if first else None)
        if got != (state, cause, rank):
            wrong.append((job, got, record.summary))
    names = [o["metadata"]["name"] for o in world.objects("TrainJob")]
    assert len(names) == len(set(names)) and all(n.endswith("-1") for n in names)
    return wrong


@pytest.mark.timeout(600)
def test_mixed_jobs_with_api_faults_and_dropped_streams(faulty: World) -> None:
    jobs = _submit_mix(faulty)
    started = time.monotonic()
    asyncio.run(faulty.supervise(timeout=60 + 3 * JOBS))
    print(f"{JOBS} jobs with faults: {time.monotonic() - started:.1f}s")
    assert _check(faulty, jobs) == []


@pytest.mark.timeout(600)
def test_mixed_jobs_with_faults_and_supervisors_killed(faulty: World) -> None:
    """Killing supervisors loses no job, duplicates nothing and loses no cause: the proofs of
    this mix stay on the cluster until recorded (failed pods and the TrainJob's conditions
    are not deleted by the cluster, and dispatch deletes a TrainJob only after reading it
    again, so never one that Trainer already ended)."""
    jobs = _submit_mix(faulty)
    started = time.monotonic()
    kills = asyncio.run(_supervise_with_kills(faulty, random.Random(7), started + 60 + 3 * JOBS))
    print(f"{len(jobs)} jobs, {kills} supervisor kills: {time.monotonic() - started:.1f}s")
    assert _check(faulty, jobs) == []

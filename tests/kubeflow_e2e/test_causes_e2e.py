"""Scenario tests: each cause through the adapter's watch and the supervisor, on the emulator."""

from __future__ import annotations

import asyncio

from dispatch.model import Cause, State

from .harness import World


def test_success_and_app_error_with_evidence_recorded(world: World) -> None:
    ok = world.submit("ok", {"default": {"runFor": 5}})
    bad = world.submit("bad", {"pods": [{"index": 1, "runFor": 3, "exitCode": 3}],
                               "default": {"runFor": 30}})  # fmt: skip
    asyncio.run(world.supervise())
    assert world.records.get_job(ok).state is State.SUCCEEDED
    job = world.records.get_job(bad)
    assert (job.state, job.cause) == (State.FAILED, Cause.APP_ERROR)
    [attempt] = world.records.attempts(bad)
    assert attempt.outcome is not None and attempt.outcome.first_failure is not None
    assert attempt.outcome.first_failure.rank == 1
    assert attempt.outcome.first_failure.exit_code == 3
    kinds = {e.kind for e in world.records.evidence(bad, 1)}
    assert {"trainjob", "pod", "jobset", "job"} <= kinds

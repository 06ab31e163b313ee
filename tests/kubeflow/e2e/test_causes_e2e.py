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


def _attempt(world: World, job: str) -> tuple[State, Cause | None, int | None]:
    [attempt] = world.records.attempts(job)
    assert attempt.outcome is not None
    first = attempt.outcome.first_failure
    return attempt.outcome.state, attempt.outcome.cause, first.rank if first else None


def _recorded(world: World, job: str) -> set[str]:
    """Kinds of whole objects recorded for attempt 1 (not proof excerpts)."""
    return {e.key.split("/")[0] for e in world.records.evidence(job, 1) if "@" in e.key}


def test_oom_image_pull_deadline_and_quota(world: World) -> None:
    oom = world.submit("oom", {"pods": [{"index": 0, "runFor": 3, "oomKilled": True}],
                               "default": {"runFor": 60}})  # fmt: skip
    pull = world.submit("pull", {"pods": [{"index": 1, "imagePullError": True}]})
    late = world.submit("late", {"default": {"runFor": 600}}, timeLimit="20s")
    huge = world.submit("huge", {}, queue="team-a", resources={"cpu": "6"})
    asyncio.run(world.supervise(timeout=120))
    assert _attempt(world, oom) == (State.FAILED, Cause.OUT_OF_MEMORY, 0)
    assert _attempt(world, pull)[:2] == (State.FAILED, Cause.START_FAILURE)
    assert _attempt(world, pull)[2] == 1
    assert _attempt(world, late)[:2] == (State.FAILED, Cause.TIMEOUT)
    assert _attempt(world, huge)[:2] == (State.FAILED, Cause.NO_CAPACITY)
    recorded = [e.key for e in world.records.evidence(oom, 1)]
    assert {"Pod", "Job", "JobSet", "TrainJob"} <= _recorded(world, oom), recorded
    assert "Pod" in _recorded(world, pull)
    assert "Workload" in _recorded(world, huge)
    # attempts dispatch ended itself (image pull, quota) leave no TrainJob that could run on
    live = {o["metadata"]["name"] for o in world.objects("TrainJob")}
    for job in (pull, huge):
        [attempt] = world.records.attempts(job)
        assert attempt.handle is not None and attempt.handle.native not in live


def test_cancel_names_who(world: World) -> None:
    job = world.submit("stop", {"default": {"runFor": 600}})

    async def scenario() -> None:
        task = asyncio.ensure_future(world.supervise(timeout=120))
        while not any(
            p.get("status", {}).get("phase") == "Running" for p in world.objects("Pod", "v1")
        ):
            await asyncio.sleep(0.02)
        world.records.request_cancel(job, "alice", "wrong data")
        await task

    asyncio.run(scenario())
    record = world.records.get_job(job)
    assert (record.state, record.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert "alice" in record.summary
    assert "Pod" in _recorded(world, job)

"""Coarse observation from the TrainJob, the label-selected watch, and cancel."""

from __future__ import annotations

import asyncio
from typing import Any

from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.model import AttemptHandle, Cause, Observation, State
from dispatch.testing.k8s import Emulator

from .conftest import AdapterFactory, example_spec, job_of, patch, run, stored

COMPLETE = {"type": "Complete", "status": "True", "reason": "AllJobsCompleted", "message": "done"}
FAILED = {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "jobset failed"}
NOW = "2026-01-01T00:00:00Z"


def set_status(emu: Emulator, name: str, status: dict[str, Any]) -> None:
    patch(emu, "TrainJob", name, {"status": status}, subresource="status")


def condition(base: dict[str, str]) -> dict[str, str]:
    return {**base, "lastTransitionTime": NOW}


def test_observe_derives_the_coarse_state(emulator: Emulator, make_adapter: AdapterFactory) -> None:
    adapter = make_adapter()
    handle = run(adapter.start(job_of(example_spec("torch")), 1))
    assert run(adapter.observe(handle)).state is State.QUEUED
    set_status(emulator, handle.native, {"jobsStatus": [{"name": "node", "active": 1}]})
    # an active Job is not a started rank: running needs a started container (design 0006)
    assert run(adapter.observe(handle)).state is State.QUEUED
    set_status(emulator, handle.native, {"conditions": [condition(FAILED)]})
    seen = run(adapter.observe(handle))
    assert (seen.state, seen.outcome.cause) == (State.FAILED, Cause.UNKNOWN)
    assert "FailedJobs" in seen.outcome.summary
    [evidence] = seen.outcome.evidence  # the proof: the TrainJob's Failed condition
    assert evidence.data["value"]["reason"] == "FailedJobs"
    # the TrainJob is gone afterwards: the ended outcome is kept, marked gone
    cluster = emulator.cluster
    rtype = cluster.rtype("trainer.kubeflow.org/v1alpha1", "TrainJob")
    emulator.call(lambda: cluster.store.delete(rtype, "ml-team", handle.native))
    gone = run(adapter.observe(handle))
    assert gone.gone and gone.state is State.FAILED


def test_an_unknown_trainjob_is_gone(make_adapter: AdapterFactory) -> None:
    handle = AttemptHandle("nope-x7k2p", 1, "kf", "nope-x7k2p-1", {"namespace": "ml-team"})
    seen = run(make_adapter().observe(handle))
    assert seen.gone and (seen.state, seen.outcome.cause) == (State.FAILED, Cause.UNKNOWN)


def test_a_queued_job_waits_in_kueue(emulator: Emulator, make_adapter: AdapterFactory) -> None:
    adapter = make_adapter()
    handle = run(adapter.start(job_of(example_spec("torch", queue="team-a")), 1))
    patch(emulator, "TrainJob", handle.native, {"spec": {"suspend": True}})  # as Kueue does
    seen = run(adapter.observe(handle))
    assert seen.state is State.QUEUED


def test_cancel_records_who_and_deletes_the_trainjob_and_its_copy(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter = make_adapter()
    handle = run(adapter.start(job_of(example_spec("torch")), 1))
    run(adapter.cancel(handle, "alice", "wrong data"))
    assert stored(emulator, "TrainJob") == stored(emulator, "TrainingRuntime") == []
    seen = run(adapter.observe(handle))
    assert (seen.state, seen.outcome.cause, seen.gone) == (State.CANCELLED, Cause.CANCELLED, True)
    assert "alice" in seen.outcome.summary and "wrong data" in seen.outcome.summary
    assert emulator.requests().count("patch", "trainjobs") == 1  # the annotation, first
    run(adapter.cancel(handle, "alice", "again"))  # idempotent


def test_cancel_leaves_an_ended_attempt_alone(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter = make_adapter()
    handle = run(adapter.start(job_of(example_spec("torch")), 1))
    set_status(emulator, handle.native, {"conditions": [condition(COMPLETE)]})
    run(adapter.cancel(handle, "alice", "too late"))
    assert len(stored(emulator, "TrainJob")) == 1
    assert run(adapter.observe(handle)).state is State.SUCCEEDED


async def _collect(
    adapter: KubeflowAdapter, handles: list[AttemptHandle], emu: Emulator
) -> list[Observation]:
    seen: list[Observation] = []
    stream = adapter.watch(handles)
    async for observation in stream:
        seen.append(observation)
        if len(seen) == len(handles):  # every first observation, promptly
            await asyncio.to_thread(
                set_status, emu, handles[0].native, {"conditions": [condition(COMPLETE)]}
            )
            await asyncio.to_thread(
                set_status, emu, handles[1].native, {"jobsStatus": [{"name": "node", "ready": 1}]}
            )
            await asyncio.to_thread(
                set_status, emu, handles[1].native, {"conditions": [condition(FAILED)]}
            )
    return seen


def test_watch_follows_many_attempts_with_one_stream(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter = make_adapter()
    handles = [
        run(adapter.start(job_of(example_spec("torch", name=name)), 1)) for name in ("one", "two")
    ]
    before = emulator.requests()
    seen = run(_collect(adapter, handles, emulator))
    by_job: dict[str, list[State]] = {}
    for observation in seen:  # an observation also comes with new evidence: same state twice
        states = by_job.setdefault(observation.handle.native, [])
        if not states or states[-1] is not observation.state:
            states.append(observation.state)
    assert by_job[handles[0].native] == [State.QUEUED, State.SUCCEEDED]
    assert by_job[handles[1].native][0] is State.QUEUED
    assert by_job[handles[1].native][-1] is State.FAILED
    counts = emulator.requests()
    assert counts.count("watch", "trainjobs") - before.count("watch", "trainjobs") == 1
    assert counts.count("get", "trainjobs") == before.count("get", "trainjobs")  # no polling

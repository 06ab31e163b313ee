"""Coarse observation from the TrainJob, the label-selected watch, and cancel."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.aio import stop
from dispatch.model import AttemptHandle, Cause, Observation, State
from dispatch.testing.k8s import Emulator, FaultRule
from tests.kubeflow.causes import objects
from tests.kubeflow.helpers import until

from .conftest import NAMESPACE, AdapterFactory, example_spec, job_of, patch, run, stored

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


def _create(emu: Emulator, obj: dict[str, Any]) -> str:
    """Create a dump-shaped object as its controller would (new identity, no owner here: the
    garbage collector would delete it)."""
    for field in ("resourceVersion", "uid", "creationTimestamp", "ownerReferences"):
        obj["metadata"].pop(field, None)
    return str(emu.create(obj, NAMESPACE)["metadata"]["name"])


def _create_pod(emu: Emulator, trainjob: str, index: int) -> str:
    made = objects.pod(
        index,
        suffix=f"p{index}",
        node="node-1",
        phase="Running",
        containers=[objects.container_status(objects.running(5), name="node")],
        conditions=objects.running_conditions(4, 6),
        trainjob_name=trainjob,
    )
    return _create(emu, made)


def _running_ranks(emu: Emulator, trainjob: str) -> list[str]:
    """The TrainJob's JobSet, active, and its two ranks' pods, running; the pods' names."""
    jobset = objects.jobset(name=trainjob, rjs={"active": 1})
    pod_template = {"spec": {"containers": [{"name": "node", "image": objects.IMAGE}]}}
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"] = pod_template
    _create(emu, jobset)
    return [_create_pod(emu, trainjob, i) for i in (0, 1)]


def _rank_fails_and_jobset_fails(emu: Emulator, trainjob: str, pod: str) -> None:
    """Rank 1 exits 2, then the JobSet fails and says so in an Event (as JobSet does)."""
    cluster = emu.cluster
    pods = cluster.rtype("v1", "Pod")
    ended = objects.terminated(2, 5, 20)
    status = {
        "phase": "Failed",
        "containerStatuses": [objects.container_status(ended, name="node", ready=False)],
        "conditions": objects.ended_conditions(4, 6, 20),
    }
    emu.call(
        lambda: cluster.store.patch(
            pods, NAMESPACE, pod, "application/merge-patch+json", {"status": status},
            subresource="status",
        )
    )  # fmt: skip
    message = f"applying FailJobSet failure policy action (first failed job: {trainjob}-node-0)"
    _create(emu, objects.event("JobSet", trainjob, "FailJobSetFailurePolicyAction", message, 21))


def test_observe_reads_again_what_explains_an_end_that_came_between_its_reads(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    """The pods are read while every rank runs; rank 1 fails and the JobSet's failure Event
    appears before the Events are read. One such snapshot shows an end with nothing to explain
    it (``unknown``); the second read shows the exit."""
    adapter = make_adapter()
    handle = run(adapter.start(job_of(example_spec("torch")), 1))
    pods = _running_ranks(emulator, handle.native)
    emulator.faults.add(FaultRule(verb="list", resource="events", latency=1.0, times=1))
    asked = emulator.requests().count("list", "events")

    def fail_once_events_are_asked() -> None:
        deadline = time.monotonic() + 30
        while emulator.requests().count("list", "events") == asked:
            assert time.monotonic() < deadline, "observe never listed the Events"
            time.sleep(0.005)
        _rank_fails_and_jobset_fails(emulator, handle.native, pods[1])

    failer = threading.Thread(target=fail_once_events_are_asked)
    failer.start()
    seen = run(adapter.observe(handle))
    failer.join()
    assert (seen.state, seen.outcome.cause) == (State.FAILED, Cause.APP_ERROR)
    first = seen.outcome.first_failure
    assert first is not None and (first.rank, first.exit_code) == (1, 2)
    assert any(r.kind == "pod" and r.data["status"]["phase"] == "Failed" for r in seen.evidence)


def test_a_trainjob_read_outside_the_streams_moves_its_position(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    """A TrainJob read once (its stream had not shown it yet) may be newer than everything the
    streams delivered: a terminal outcome over it must wait for the streams to reach it."""

    async def scenario() -> tuple[int | None, int | None, int | None]:
        capture = make_adapter().capture()
        capture.cover([NAMESPACE])
        await capture.synced.wait()
        streams = capture.position()
        assert streams is not None
        later = str(streams + 100)
        read_once = {"kind": "TrainJob", "apiVersion": "trainer.kubeflow.org/v1alpha1",
                     "metadata": {"name": "tj", "namespace": NAMESPACE, "uid": "u1",
                                  "resourceVersion": later}}  # fmt: skip
        capture.seen(read_once)
        try:
            return streams, capture.position(), capture.position((NAMESPACE, "tj"))
        finally:
            await capture.close()

    streams, overall, own = run(scenario())
    assert overall == streams and own == streams + 100  # type: ignore[operator]


def test_a_slow_read_of_a_trainjob_not_shown_yet_holds_back_no_other_attempt(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    """A TrainJob the streams have not shown is read once (``lookup``) beside the rounds:
    while that read waits on the API server, the other attempts' observations and ends go
    out; the read's own attempt is judged once it answered."""
    adapter = make_adapter()
    handle = run(adapter.start(job_of(example_spec("torch", name="shown")), 1))
    missing = AttemptHandle("late-x1", 1, handle.cluster, "late-x1-1", dict(handle.data))

    async def body() -> list[tuple[str, State]]:
        answer = asyncio.Event()
        real = adapter._lookup

        async def slow(ref: tuple[str, str]) -> list[Any]:
            if ref[1] == missing.native:
                await answer.wait()
            return await real(ref)

        adapter._lookup = slow  # type: ignore[method-assign]
        seen: list[tuple[str, State]] = []
        async for observation in adapter.watch([handle, missing]):
            seen.append((observation.handle.native, observation.state))
            if seen == [(handle.native, State.QUEUED)]:
                await asyncio.to_thread(
                    set_status, emulator, handle.native, {"conditions": [condition(COMPLETE)]}
                )
            if (handle.native, State.SUCCEEDED) in seen and not answer.is_set():
                answer.set()  # the other attempt ended while the read still waited
            if any(native == missing.native for native, _ in seen):
                break
        return seen

    seen = run(asyncio.wait_for(body(), 30))
    assert seen.index((handle.native, State.SUCCEEDED)) < len(seen) - 1
    assert seen[-1] == (missing.native, State.FAILED)  # it does not exist: ended unknown


def test_a_watch_made_again_does_not_read_a_delivered_ends_last_output_again(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    """A restarted watch repeats the end of an attempt the supervisor has not recorded yet;
    the failed rank's output went out with that end the first time and is not read again."""
    adapter = make_adapter()
    handle = run(adapter.start(job_of(example_spec("torch")), 1))
    pods = _running_ranks(emulator, handle.native)
    emulator.append_log(NAMESPACE, pods[1], "node", "RuntimeError: boom\n")
    _rank_fails_and_jobset_fails(emulator, handle.native, pods[1])

    async def watched() -> list[Observation]:
        """The observations until the end, and the next one asked for (the end was taken)."""
        seen: list[Observation] = []

        async def consume() -> None:
            async for observation in adapter.watch([handle]):
                seen.append(observation)

        task = asyncio.ensure_future(consume())
        await until(lambda: any(o.outcome.is_terminal for o in seen), 30)
        await asyncio.sleep(0.1)
        await stop(task)
        return seen

    first = run(watched())
    assert first[-1].state is State.FAILED
    assert [e.data["pod"] for o in first for e in o.evidence if e.kind == "log"] == [pods[1]]
    reads = emulator.requests().count("get", "pods/log")
    again = run(watched())
    assert again[-1].state is State.FAILED
    assert not [e for o in again for e in o.evidence if e.kind == "log"]
    assert emulator.requests().count("get", "pods/log") == reads


def test_a_trainjob_just_created_is_judged_without_being_read_again(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    """The creation's answer is the TrainJob as stored: filed with the streams, it spares the
    watch of the new attempt the read (several requests) of a TrainJob its stream has not
    delivered yet. The TrainJob watch is held back here, so that it has not."""
    adapter = make_adapter()
    looked_up: list[tuple[str, str]] = []
    real = adapter._lookup

    async def lookup(ref: tuple[str, str]) -> list[Any]:
        looked_up.append(ref)
        return await real(ref)

    adapter._lookup = lookup  # type: ignore[method-assign]

    async def body() -> tuple[AttemptHandle, Observation]:
        emulator.faults.add(FaultRule(verb="watch", resource="trainjobs", latency=3.0))
        adapter.capture().cover([NAMESPACE])
        await adapter.capture().synced.wait()  # listed; the TrainJob watch opens 3 s later
        handle = await adapter.start(job_of(example_spec("torch", name="fresh")), 1)
        before = emulator.requests()
        async for observation in adapter.watch([handle]):
            after = emulator.requests()
            assert after.count("get", "trainjobs") == before.count("get", "trainjobs")
            return handle, observation
        raise AssertionError("no observation")

    handle, first = run(body())
    assert first.state is State.QUEUED and first.handle == handle
    assert not looked_up

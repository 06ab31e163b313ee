"""The cluster-side guard end to end on the emulator: Kueue preempts attempt 1 after its ranks
started, dispatch marks it ended (``dispatch.dev/ended``) but cannot delete it yet (the API
answers 503 to its DELETEs), the preemptor goes away, and Kueue admits attempt 1's Workload
again and tries to resume the TrainJob.

* without a guard (the control): Kueue resumes it and attempt 1's ranks run a second time
  under ``DISPATCH_ATTEMPT=1``: the violation the guard exists for;
* with ``dispatch admission serve`` registered as a validating webhook, or with the
  ValidatingAdmissionPolicy ``dispatch admission manifests --policy`` prints: the resume is
  refused, no rank of attempt 1 ever runs again, the refusal is in attempt 1's evidence, its
  outcome stays ``preempted``, and attempt 2 runs once the deletion goes through.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio")

from dispatch.adapters.kubeflow.causes.coarse import (
    ANNOTATION_ENDED,
    ANNOTATION_RETIRED,
    ANNOTATION_STARTED,
    EVENT_RESUME_REFUSED,
)
from dispatch.adapters.kubeflow.live.refusals import RESUME_REFUSED
from dispatch.model import Cause, State
from dispatch.testing.k8s.faults import FaultRule
from dispatch.testing.k8s.watch import Change
from tests.admission import guarded
from tests.kubeflow.e2e.harness import (
    NAMESPACE,
    QUEUE,
    SUPERVISOR,
    TRAINER,
    World,
    as_supervisor_account,
    high_priority,
    kueue,
)

#: who dispatch's supervisor writes as (deploy/'s service account, in the test namespace)
DISPATCH_USER = f"system:serviceaccount:{NAMESPACE}:{SUPERVISOR}"

#: the scenario of every attempt's pods: start after 20 s, run 200 s (emulated)
PODS = {"default": {"startAfter": 20, "runFor": 200}}


@dataclass
class PodLog:
    """Every pod the emulator ever created, with its attempt label and emulated creation time;
    and when attempt 1's TrainJob was suspended by Kueue."""

    created: list[tuple[str, str, float]] = field(default_factory=list)
    suspended_at: list[float] = field(default_factory=list)
    #: the annotations of attempt 1's TrainJob when it was first seen marked ended
    marked: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, change: Change) -> None:
        obj = change.obj
        if change.type == "ADDED" and obj.get("kind") == "Pod":
            labels = obj["metadata"].get("labels") or {}
            if "dispatch.dev/attempt" in labels:
                with self.lock:
                    self.created.append(
                        (obj["metadata"]["name"], labels["dispatch.dev/attempt"], change.time)
                    )
        annotations = obj["metadata"].get("annotations") or {}
        if obj.get("kind") == "TrainJob" and ANNOTATION_ENDED in annotations and not self.marked:
            with self.lock:
                self.marked = dict(annotations)
        if obj.get("kind") == "TrainJob" and change.type == "MODIFIED" and change.old is not None:
            before = (change.old.get("spec") or {}).get("suspend")
            if before is not True and (obj.get("spec") or {}).get("suspend") is True:
                with self.lock:
                    self.suspended_at.append(change.time)

    def of_attempt(self, attempt: str) -> list[tuple[str, float]]:
        with self.lock:
            return [(name, at) for name, a, at in self.created if a == attempt]


def _wait(what: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what.__name__}")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path, kueue_config=kueue())
    try:
        # dispatch's supervisor writes as deploy/'s service account: the guard's identity
        made.settings["kubeconfig"] = str(
            as_supervisor_account(made.emulator, tmp_path / "supervisor-kubeconfig")
        )
        yield made
    finally:
        made.close()


def _attempt_1(world: World, job: str) -> dict[str, Any] | None:
    return next(
        (
            t
            for t in world.objects("TrainJob")
            if (t["metadata"].get("labels") or {}).get("dispatch.dev/job") == job
            and t["metadata"]["labels"].get("dispatch.dev/attempt") == "1"
        ),
        None,
    )


def _run_scenario(
    world: World, *, refused: Callable[[str], bool] | None, timeout: float = 150.0
) -> tuple[str, PodLog]:
    """Preempt attempt 1 once its ranks run, hold its deletion with 503s until it is marked
    ended, then remove the preemptor; ``refused(job)`` (None: no guard) says when the resume
    was refused, and the deletions are let through."""
    log = PodLog()
    world.emulator.call(lambda: world.emulator.cluster.store.on_change(log))
    job = world.submit("low", PODS, resources={"cpu": "2"}, queue=QUEUE)
    hold = FaultRule(verb="delete", resource="trainjobs", namespace=NAMESPACE, status=503)

    def drive() -> None:
        _wait(lambda: world.running(job))
        world.emulator.faults.add(hold)
        world.emulator.create(high_priority("urgent", run_for=100000))

        def marked() -> bool:
            trainjob = _attempt_1(world, job)
            annotations = (trainjob or {}).get("metadata", {}).get("annotations") or {}
            return ANNOTATION_ENDED in annotations

        _wait(marked)
        world.emulator.call(
            lambda: world.emulator.cluster.store.delete(
                world.emulator.cluster.rtype(TRAINER, "TrainJob"), NAMESPACE, "urgent"
            )
        )
        if refused is None:  # the control: Kueue resumes attempt 1 and its ranks run again
            _wait(lambda: len(log.of_attempt("1")) > 2)
        else:
            _wait(lambda: refused(job))
        world.emulator.faults.remove(hold)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    asyncio.run(world.supervise(timeout=timeout))
    driver.join(timeout=5)
    return job, log


def test_without_a_guard_kueue_resumes_an_ended_attempt_and_its_ranks_run_twice(
    world: World,
) -> None:
    """The control: what dispatch alone cannot prevent while it cannot delete the TrainJob."""
    job, log = _run_scenario(world, refused=None)
    first = world.records.attempts(job)[0]
    assert first.outcome is not None and first.outcome.cause is Cause.PREEMPTED
    evicted = min(log.suspended_at)
    again = [name for name, at in log.of_attempt("1") if at > evicted]
    assert again, "Kueue resumed attempt 1: its ranks were created again after the eviction"
    # dispatch marked it ended, with the retirement note, before deleting it
    assert log.marked.get(ANNOTATION_ENDED) == "preempted"
    assert "its attempt ended (preempted)" in log.marked[ANNOTATION_RETIRED]


def _assert_guarded(world: World, job: str, log: PodLog, source: str) -> None:
    record = world.records.get_job(job)
    assert record.state is State.SUCCEEDED, record.summary
    first, second = world.records.attempts(job)
    assert first.outcome is not None and first.outcome.cause is Cause.PREEMPTED
    assert second.outcome is not None and second.outcome.state is State.SUCCEEDED
    evicted = min(log.suspended_at)
    ran = log.of_attempt("1")
    assert len(ran) == 2 and all(at < evicted for _, at in ran), ran
    assert len(log.of_attempt("2")) == 2
    refusals = [
        e
        for e in world.records.evidence(job, 1)
        if e.kind == "guard" and e.data.get("guard") == RESUME_REFUSED
    ]
    assert refusals, "the refused resume is in attempt 1's evidence"
    assert {e.data["source"] for e in refusals} == {source}
    # and `dispatch status` shows it under attempt 1
    shown = subprocess.run(
        [sys.executable, "-m", "dispatch", "status", job],
        env={**os.environ, "DISPATCH_STATE_DIR": str(world.records_dir)},
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    first = next(
        i for i, line in enumerate(shown) if line.startswith("attempt 1 failed (preempted)")
    )
    assert shown[first + 1].startswith("          guard: ") and "refused" in shown[first + 1]


def _check(world: World) -> None:
    """Label the runtime the jobs use ``dispatch.dev/checked``: its copies keep the label, and
    submitting must not wait for the runtimes webhook."""
    rtype = world.emulator.cluster.rtype(TRAINER, "ClusterTrainingRuntime")
    label = {"metadata": {"labels": {"dispatch.dev/checked": ""}}}
    store = world.emulator.cluster.store
    world.emulator.call(
        lambda: store.patch(rtype, None, "torch-dispatch", "application/merge-patch+json", label)
    )


def _refusal_events(world: World, job: str) -> list[dict[str, Any]]:
    first = f"{job}-1"
    return [
        e
        for e in world.objects("Event", "v1")
        if e.get("reason") == EVENT_RESUME_REFUSED and e["involvedObject"]["name"] == first
    ]


def test_the_webhook_refuses_kueue_resuming_an_ended_attempt(world: World, tmp_path: Path) -> None:
    _check(world)
    with guarded.webhook(world.emulator, tmp_path, (DISPATCH_USER,)) as hook:
        job, log = _run_scenario(world, refused=lambda job: _refusal_events(world, job))
    judged = {(d["resource"], d["operation"]) for d in hook.decisions()}
    assert ("trainjobs", "UPDATE") in judged
    # runtime copies keep the checked label, but their creation is not sent to the runtimes
    # webhook (only the owner reference added later, an update, to the identity webhook)
    assert ("trainingruntimes", "CREATE") not in judged
    _assert_guarded(world, job, log, "event")
    [event] = _refusal_events(world, job)[:1]
    assert (
        "resuming refused: its attempt has ended (dispatch.dev/ended=preempted)" in event["message"]
    )
    assert event["message"].endswith(
        "asked by system:serviceaccount:kueue-system:kueue-controller-manager"
    )
    refusal = next(
        e for e in world.records.evidence(job, 1) if e.data.get("guard") == RESUME_REFUSED
    )
    assert (
        "refused to resume" in refusal.summary and "dispatch.dev/ended=preempted" in refusal.summary
    )


def _readmitted_and_held(world: World, job: str) -> bool:
    """Kueue admitted attempt 1's Workload again, and its TrainJob is still suspended."""
    trainjob = _attempt_1(world, job)
    if trainjob is None or trainjob["spec"].get("suspend") is not True:
        return False
    uid = trainjob["metadata"]["uid"]
    for workload in world.objects("Workload", "kueue.x-k8s.io/v1beta2"):
        if (workload["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") != uid:
            continue
        conditions = (workload.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions):
            time.sleep(1.0)  # 100 emulated seconds: past the grace, several judgements
            return True
    return False


def test_the_policy_refuses_kueue_resuming_an_ended_attempt(world: World) -> None:
    guarded.policy(world.emulator, (DISPATCH_USER,))
    job, log = _run_scenario(world, refused=lambda job: _readmitted_and_held(world, job))
    _assert_guarded(world, job, log, "inference")


def _started_mark(world: World, job: str) -> bool:
    trainjob = _attempt_1(world, job)
    return ANNOTATION_STARTED in ((trainjob or {}).get("metadata", {}).get("annotations") or {})


@pytest.mark.parametrize("guard", ["webhook", "policy"])
def test_the_guard_refuses_the_resume_while_no_supervisor_runs(
    world: World, tmp_path: Path, guard: str
) -> None:
    """dispatch marked attempt 1 ``dispatch.dev/started`` when it saw a rank run, then its
    supervisor stopped. Kueue preempts the attempt and admits it again: the guard refuses the
    resume on the mark alone. The next supervisor finds attempt 1 preempted, with the refusal
    as evidence, and runs attempt 2."""
    with contextlib.ExitStack() as stack:
        if guard == "webhook":
            stack.enter_context(guarded.webhook(world.emulator, tmp_path, (DISPATCH_USER,)))
        else:
            guarded.policy(world.emulator, (DISPATCH_USER,))
        log = PodLog()
        world.emulator.call(lambda: world.emulator.cluster.store.on_change(log))
        job = world.submit("low", PODS, resources={"cpu": "2"}, queue=QUEUE)

        async def until_started() -> None:
            stop = asyncio.Event()
            supervising = asyncio.ensure_future(world.supervisor("s1").run(stop))
            while not _started_mark(world, job):
                await asyncio.sleep(0.02)
            stop.set()
            await asyncio.wait_for(supervising, 30)

        asyncio.run(asyncio.wait_for(until_started(), 60))
        # no supervisor from here: Kueue preempts attempt 1, then admits it again
        world.emulator.create(high_priority("urgent", run_for=100000))
        _wait(lambda: log.suspended_at)
        world.emulator.call(
            lambda: world.emulator.cluster.store.delete(
                world.emulator.cluster.rtype(TRAINER, "TrainJob"), NAMESPACE, "urgent"
            )
        )
        if guard == "webhook":
            _wait(lambda: _refusal_events(world, job))
        else:
            _wait(lambda: _readmitted_and_held(world, job))
        assert len(log.of_attempt("1")) == 2  # nothing of attempt 1 ran again meanwhile
        asyncio.run(world.supervise("s2", timeout=120))
    _assert_guarded(world, job, log, "event" if guard == "webhook" else "inference")
    refusal = next(
        e for e in world.records.evidence(job, 1) if e.data.get("guard") == RESUME_REFUSED
    )
    assert (
        "then suspended" in refusal.summary
        or "suspended after its ranks started" in refusal.summary
    )

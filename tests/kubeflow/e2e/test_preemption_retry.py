"""Kueue preempts attempt 1 after its ranks started; the policy retries; attempt 2 succeeds
with DISPATCH_ATTEMPT=2 and the TrainJob of attempt 1 never runs again."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from dispatch.adapters.kubeflow.objects import parse_time
from dispatch.model import Cause, State

from .harness import QUEUE, World, high_priority


def _pod_env(pod: dict[str, Any]) -> dict[str, str]:
    containers = pod.get("spec", {}).get("containers") or []
    node = next(c for c in containers if c["name"] == "node")
    return {e["name"]: e.get("value", "") for e in node.get("env") or []}


def test_preempted_attempt_is_retired_and_attempt_2_succeeds(world: World) -> None:
    job = world.submit(
        "low", {"default": {"startAfter": 20, "runFor": 200}}, resources={"cpu": "2"}, queue=QUEUE
    )

    def preempt_when_running() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pods = world.objects("Pod", "v1")
            if sum(1 for p in pods if p.get("status", {}).get("phase") == "Running") >= 2:
                world.emulator.create(high_priority("urgent"))
                return
            time.sleep(0.02)

    helper = threading.Thread(target=preempt_when_running, daemon=True)
    helper.start()
    asyncio.run(world.supervise(timeout=120))
    helper.join()

    record = world.records.get_job(job)
    assert record.state is State.SUCCEEDED, record.summary
    first, second = world.records.attempts(job)
    assert first.outcome is not None and first.outcome.cause is Cause.PREEMPTED
    assert second.outcome is not None and second.outcome.state is State.SUCCEEDED
    # the ranks of attempt 2 saw DISPATCH_ATTEMPT=2 (pods as recorded)
    pods2 = [
        e.data for e in world.records.evidence(job, 2) if e.key.startswith("Pod/") and "@" in e.key
    ]
    assert pods2 and all(_pod_env(p)["DISPATCH_ATTEMPT"] == "2" for p in pods2)
    # attempt 1's TrainJob was deleted (retired) and none of its pods started after the eviction
    names = [o["metadata"]["name"] for o in world.objects("TrainJob")]
    assert first.handle is not None and first.handle.native not in names
    evidence1 = world.records.evidence(job, 1)
    evicted = [
        parse_time(c.get("lastTransitionTime"))
        for e in evidence1 if e.key.startswith("Workload/") and "@" in e.key
        for c in e.data.get("status", {}).get("conditions") or []
        if c["type"] == "Evicted" and c["status"] == "True"
    ] + [
        parse_time(e.data.get("firstTimestamp") or e.data.get("eventTime"))
        for e in evidence1 if e.key.startswith("Event/") and e.data.get("reason") == "Stopped"
    ]  # fmt: skip
    assert [at for at in evicted if at is not None], "the eviction was recorded"
    evicted = [at for at in evicted if at is not None]
    created = {
        e.data["metadata"]["name"]: parse_time(e.data["metadata"]["creationTimestamp"])
        for e in evidence1 if e.key.startswith("Pod/") and "@" in e.key
    }  # fmt: skip
    assert created and all(at is not None and at < min(evicted) for at in created.values())
    assert any(e.kind == "workload" for e in evidence1)  # the Kueue evidence was recorded

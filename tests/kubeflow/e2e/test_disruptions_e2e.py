"""Disruptions of a running attempt, end to end: the real supervisor and Kubeflow adapter
against the emulator. Scheduler preemption, eviction by drain, spot reclaim (graceful node
shutdown), a node going NotReady until taint-based eviction, and a deleted node. Each test
disrupts the node or pod of rank 1 once both ranks run, then checks the attempt's state,
cause and first failing rank, the proof in the outcome, and that the objects proving it were
recorded in the store (the cluster deletes them).

Each rank asks 5 cpus of an 8-cpu node, so every rank has a node of its own.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from dispatch.model import Cause, State

from .harness import World, attempt_outcome, proof_keys

FAIL_ALWAYS = {"rules": [], "unmatched": "fail"}
LONG = {"default": {"runFor": 600}}


def _submit(world: World, name: str) -> str:
    return world.submit(name, LONG, resources={"cpu": "5"}, recovery=FAIL_ALWAYS)


def _rank(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])


def _disrupt_rank_1(world: World, job: str, action: str, target: str) -> dict[str, str]:
    """Run the supervisor; once both ranks run, ``action`` on rank 1's pod or node.
    Returns rank 1's pod and node names."""
    hit: dict[str, str] = {}

    def disrupt(pods: list[dict[str, Any]]) -> None:
        pod = next(p for p in pods if _rank(p) == 1)
        hit.update(pod=pod["metadata"]["name"], node=pod["spec"]["nodeName"])
        world.disrupt(action, **{target: hit[target]})

    helper = world.when(lambda: world.running(job), disrupt)
    asyncio.run(world.supervise(timeout=120))
    helper.join()
    assert hit, "the ranks never ran"
    return hit


def _proved_by_condition(world: World, job: str, pod: str) -> bool:
    return f"Pod/{pod}#status.conditions[DisruptionTarget]" in proof_keys(world, job)


def _recorded(world: World, job: str, pod: str) -> list[dict[str, Any]]:
    """Every state of ``pod`` the store recorded for attempt 1."""
    return [
        e.data
        for e in world.records.evidence(job, 1)
        if e.key.startswith("Pod/") and f"/{pod}@" in e.key
    ]


def _conditions(pods: list[dict[str, Any]], ctype: str) -> set[str]:
    return {
        c.get("reason", "")
        for p in pods
        for c in (p.get("status") or {}).get("conditions") or []
        if c.get("type") == ctype and c.get("status") == "True"
    }


def _gone(world: World, pod: str) -> bool:
    return all(p["metadata"]["name"] != pod for p in world.objects("Pod", "v1"))


def test_scheduler_preemption(world: World) -> None:
    job = _submit(world, "sched")
    hit = _disrupt_rank_1(world, job, "preemptPod", "pod")
    assert attempt_outcome(world, job) == (State.FAILED, Cause.PREEMPTED, 1, None)
    assert _proved_by_condition(world, job, hit["pod"])
    assert "PreemptionByScheduler" in _conditions(
        _recorded(world, job, hit["pod"]), "DisruptionTarget"
    )
    assert _gone(world, hit["pod"])  # the proof survives only in the store


def test_drain_evicts_through_the_eviction_api(world: World) -> None:
    job = _submit(world, "drain")
    hit = _disrupt_rank_1(world, job, "drainNode", "node")
    assert attempt_outcome(world, job) == (State.FAILED, Cause.PREEMPTED, 1, None)
    record = world.records.get_job(job)
    assert "Eviction API" in record.summary
    assert _proved_by_condition(world, job, hit["pod"])
    assert "EvictionByEvictionAPI" in _conditions(
        _recorded(world, job, hit["pod"]), "DisruptionTarget"
    )
    assert _gone(world, hit["pod"])


def test_spot_reclaim_by_graceful_node_shutdown(world: World) -> None:
    job = _submit(world, "spot")
    hit = _disrupt_rank_1(world, job, "shutdownNode", "node")
    assert attempt_outcome(world, job) == (State.FAILED, Cause.PREEMPTED, 1, None)
    pods = _recorded(world, job, hit["pod"])
    assert "TerminationByKubelet" in _conditions(pods, "DisruptionTarget")
    assert any((p.get("status") or {}).get("reason") == "Terminated" for p in pods)
    assert "shutdown" in world.records.get_job(job).summary
    assert _proved_by_condition(world, job, hit["pod"])


def test_node_not_ready_then_taint_eviction(world: World) -> None:
    job = _submit(world, "notready")
    hit = _disrupt_rank_1(world, job, "nodeNotReady", "node")
    assert attempt_outcome(world, job) == (State.FAILED, Cause.NODE_LOST, 1, None)
    assert any(f"Node/{hit['node']}" in k for k in proof_keys(world, job))
    kinds = {e.key.split("/")[0] for e in world.records.evidence(job, 1) if "@" in e.key}
    assert "Node" in kinds


def test_node_deleted_pod_gc(world: World) -> None:
    """PodGC collects a deleted node's pods only after its 40 s quarantine (a pass every
    20 s), so, as on a real cluster, the Node's deletion is what proves the loss; the pod
    (Terminating, its kubelet gone) is force-deleted 40 to 60 emulated seconds later."""
    job = _submit(world, "nodegone")
    hit = _disrupt_rank_1(world, job, "deleteNode", "node")
    assert attempt_outcome(world, job) == (State.FAILED, Cause.NODE_LOST, 1, None)
    assert f"Node/{hit['node']}#metadata" in proof_keys(world, job)
    deadline = time.monotonic() + 10.0  # real seconds; 60 emulated ones are 0.6 at scale 100
    while not _gone(world, hit["pod"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(world, hit["pod"])

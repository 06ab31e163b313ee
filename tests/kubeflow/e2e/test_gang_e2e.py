"""Gang scheduling end to end: a job on a runtime with ``podGroupPolicy.coscheduling``,
submitted through dispatch to the emulated cluster (Trainer makes the PodGroup, the scheduler
binds the gang's pods all together or none).

Each node offers 8 CPUs and each rank asks 6, so a node takes one rank. With room for three
ranks a four-rank gang never forms: its pods wait unbound and, once the PodGroup's
``scheduleTimeoutSeconds`` has passed, the attempt ends ``no_capacity`` with the PodGroup as
evidence. With room for four, the four pods are bound together, none before the group fits.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatch.model import Cause, State
from dispatch.testing.k8s.watch import Change

from .harness import RUNTIME, World, attempt_outcome, proof_keys

GANG_RUNTIME = "torch-gang"
TIMEOUT_SECONDS = 10
FAIL_ALWAYS = {"rules": [], "unmatched": "fail"}
PODGROUP_API = "scheduling.x-k8s.io/v1alpha1"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def gang_runtime() -> dict[str, Any]:
    """The example torch runtime, renamed, with coscheduling gangs of a short timeout."""
    runtime: dict[str, Any] = copy.deepcopy(yaml.safe_load(RUNTIME.read_text()))
    runtime["metadata"]["name"] = GANG_RUNTIME
    runtime["spec"]["podGroupPolicy"] = {
        "coscheduling": {"scheduleTimeoutSeconds": TIMEOUT_SECONDS}
    }
    return runtime


def cluster_of(tmp_path: Path, nodes: int) -> World:
    made = World(tmp_path, nodes=tuple(f"node-{i}" for i in range(1, nodes + 1)))
    made.emulator.create(gang_runtime())
    return made


@pytest.fixture
def three_nodes(tmp_path: Path) -> Iterator[World]:
    made = cluster_of(tmp_path, 3)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def four_nodes(tmp_path: Path) -> Iterator[World]:
    made = cluster_of(tmp_path, 4)
    try:
        yield made
    finally:
        made.close()


def submit_gang(world: World, name: str) -> str:
    return world.submit(
        name,
        {"default": {"runFor": 5}},
        nodes=4,
        resources={"cpu": "6"},
        runtime={"kind": "ClusterTrainingRuntime", "name": GANG_RUNTIME},
        recovery=FAIL_ALWAYS,
    )


def watch_binds(world: World, job: str) -> list[tuple[str, int]]:
    """Each bind of one of ``job``'s pods: (pod, how many of the job's pods existed then)."""
    cluster = world.emulator.cluster
    pod_type = cluster.rtype("v1", "Pod")
    bound: set[str] = set()
    binds: list[tuple[str, int]] = []

    def mine(pod: dict[str, Any]) -> bool:
        return (pod["metadata"].get("labels") or {}).get("dispatch.dev/job") == job

    def hook(change: Change) -> None:
        obj = change.obj
        if change.rtype.kind != "Pod" or not mine(obj) or not obj["spec"].get("nodeName"):
            return
        name = obj["metadata"]["name"]
        if name not in bound:
            bound.add(name)
            siblings = [p for p in cluster.store.objects(pod_type) if mine(p)]
            binds.append((name, len(siblings)))

    world.emulator.call(lambda: cluster.store.on_change(hook))
    return binds


def test_a_gang_that_does_not_fit_waits_times_out_and_ends_no_capacity(
    three_nodes: World,
) -> None:
    world = three_nodes
    job = submit_gang(world, "gang-wait")
    binds = watch_binds(world, job)
    asyncio.run(world.supervise())
    state, cause, _rank, code = attempt_outcome(world, job)
    assert (state, cause, code) == (State.FAILED, Cause.NO_CAPACITY, None)
    assert binds == []  # not one rank was placed: three could have been, alone
    summary = world.records.get_job(job).summary
    assert "never formed" in summary and "scheduleTimeoutSeconds" in summary, summary
    assert any(
        k.startswith("PodGroup/") and k.endswith("#status.phase") for k in proof_keys(world, job)
    )
    assert "podgroup" in {e.kind for e in world.records.evidence(job, 1)}


def test_the_podgroup_waits_scheduling_and_the_pods_say_why(three_nodes: World) -> None:
    world = three_nodes
    job = submit_gang(world, "gang-why")

    def waiting() -> list[dict[str, Any]] | None:
        pods = [p for p in world.objects("Pod", "v1") if GROUP_LABEL in p["metadata"]["labels"]]
        said = [
            c.get("message", "")
            for p in pods
            for c in (p.get("status") or {}).get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        ]
        return pods if len(said) == 4 else None

    seen: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
    watcher = world.when(
        waiting, lambda pods: seen.append((pods, world.objects("PodGroup", PODGROUP_API)))
    )
    asyncio.run(world.supervise())
    watcher.join()
    assert attempt_outcome(world, job)[:2] == (State.FAILED, Cause.NO_CAPACITY)
    assert seen, "the gang's four pods never all waited"
    pods, [group] = seen[0]
    assert group["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "24"},
        "scheduleTimeoutSeconds": TIMEOUT_SECONDS,
    }
    assert group["status"]["phase"] == "Scheduling"
    messages = {
        c["message"] for p in pods for c in p["status"]["conditions"] if c["type"] == "PodScheduled"
    }
    assert any("is unschedulable even after PostFilter" in m for m in messages), messages
    assert "optimistic rejection in PostFilter" in messages
    assert not any(p["spec"].get("nodeName") for p in pods)


def test_a_gang_that_fits_is_bound_all_together(four_nodes: World) -> None:
    world = four_nodes
    job = submit_gang(world, "gang-fits")
    binds = watch_binds(world, job)
    asyncio.run(world.supervise())
    assert world.records.get_job(job).state is State.SUCCEEDED
    assert len(binds) == 4
    # every pod was bound only once all four existed (the gang fitted as a whole)
    assert {count for _, count in binds} == {4}
    [group] = world.objects("PodGroup", PODGROUP_API)
    assert group["status"]["phase"] in ("Running", "Finished")

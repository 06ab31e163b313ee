"""Gang scheduling in the emulator: scheduler-plugins' coscheduling and Volcano PodGroups,
made by Trainer from a runtime's ``podGroupPolicy``, and the scheduler binding a gang's pods
all together or none. Nodes offer 8 CPUs (the default); each rank asks ``cpu`` of them."""

from __future__ import annotations

import copy
from typing import Any

from dispatch.testing.k8s.runtimes import torch_distributed

from .scenario_helpers import cluster, events, find, pods, trainjob, wait_for

SP = "scheduling.x-k8s.io/v1alpha1"
VOLCANO = "scheduling.volcano.sh/v1beta1"


def gang_runtime(name: str, policy: dict[str, Any], **pod_spec: Any) -> dict[str, Any]:
    runtime = torch_distributed()
    runtime["metadata"]["name"] = name
    runtime["spec"]["podGroupPolicy"] = policy
    [node] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    node["template"]["spec"]["template"]["spec"].update(copy.deepcopy(pod_spec))
    return runtime


def ranks(nodes: int, cpu: str) -> dict[str, Any]:
    return {"numNodes": nodes, "resourcesPerNode": {"requests": {"cpu": cpu}}}


def scheduled_messages(emu: Any, name: str) -> set[str]:
    return {
        c.get("message", "")
        for p in pods(emu, name)
        for c in (p.get("status") or {}).get("conditions") or []
        if c["type"] == "PodScheduled" and c["status"] == "False"
    }


def unbound_waiting(emu: Any, name: str, count: int) -> list[dict[str, Any]] | None:
    found = pods(emu, name)
    waiting = [
        p
        for p in found
        if not p["spec"].get("nodeName")
        and any(c["type"] == "PodScheduled" for c in (p.get("status") or {}).get("conditions", []))
    ]
    return found if len(waiting) == count == len(found) else None


COSCHEDULING = gang_runtime("torch-gang", {"coscheduling": {"scheduleTimeoutSeconds": 5}})
VOLCANO_RUNTIME = gang_runtime("torch-volcano", {"volcano": {}}, schedulerName="volcano")


def test_coscheduling_gang_of_four_on_three_nodes_is_rejected_after_postfilter() -> None:
    nodes = ("node-1", "node-2", "node-3")
    with cluster(runtimes=(COSCHEDULING,), nodes=nodes) as emu:
        emu.create(trainjob("gang", "torch-gang", trainer=ranks(4, "6")))
        wait_for("four pods waiting", lambda: unbound_waiting(emu, "gang", 4))
        messages = wait_for("PostFilter", lambda: scheduled_messages(emu, "gang") or None)
        assert (
            "0/3 nodes are available: 3 Insufficient cpu. PodGroup default/gang gets rejected "
            "due to Pod gang-node-0-3-" in " ".join(messages)
        )
        assert "optimistic rejection in PostFilter" in messages
        group = wait_for(
            "the PodGroup Scheduling",
            lambda: (g := find(emu, SP, "PodGroup", "gang")) and g.get("status", {}).get("phase") == "Scheduling" and g,
        )  # fmt: skip
        assert group["spec"]["minMember"] == 4
        assert group["spec"]["minResources"] == {"cpu": "24"}
        assert any(e["reason"] == "FailedScheduling" for p in pods(emu, "gang")
                   for e in events(emu, p["metadata"]["name"]))  # fmt: skip


def test_coscheduling_gang_larger_than_the_cluster_is_a_resource_gap() -> None:
    nodes = ("node-1", "node-2", "node-3")
    with cluster(runtimes=(COSCHEDULING,), nodes=nodes) as emu:
        emu.create(trainjob("big", "torch-gang", trainer=ranks(4, "7")))
        wait_for("four pods waiting", lambda: unbound_waiting(emu, "big", 4))
        messages = wait_for("a resource gap", lambda: scheduled_messages(emu, "big") or None)
        assert messages == {"0/3 nodes are available: resource gap: map[cpu:4]."}


def test_coscheduling_gang_that_fits_runs_and_its_podgroup_finishes() -> None:
    nodes = ("node-1", "node-2", "node-3", "node-4")
    with cluster(runtimes=(COSCHEDULING,), nodes=nodes) as emu:
        emu.create(trainjob("fits", "torch-gang", trainer=ranks(4, "6")))
        group = wait_for(
            "the PodGroup Finished",
            lambda: (g := find(emu, SP, "PodGroup", "fits")) and g.get("status", {}).get("phase") == "Finished" and g,
        )  # fmt: skip
        assert group["status"]["succeeded"] == 4
        assert len({p["spec"]["nodeName"] for p in pods(emu, "fits")}) == 4


def test_volcano_gang_that_cannot_be_placed_is_unschedulable() -> None:
    nodes = ("node-1", "node-2", "node-3")
    with cluster(runtimes=(VOLCANO_RUNTIME,), nodes=nodes) as emu:
        emu.create(trainjob("vc", "torch-volcano", trainer=ranks(4, "6")))
        group = wait_for(
            "the PodGroup Unschedulable",
            lambda: (g := find(emu, VOLCANO, "PodGroup", "vc"))
            and any(c["type"] == "Unschedulable" for c in g.get("status", {}).get("conditions", []))
            and g,
        )  # fmt: skip
        assert group["status"]["phase"] == "Inqueue"  # 24 CPUs fit 3 x 8 x 1.2: enqueued
        [unschedulable] = group["status"]["conditions"][-1:]
        assert (unschedulable["status"], unschedulable["reason"]) == ("True", "NotEnoughResources")
        assert unschedulable["message"].startswith(
            "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
            "Pending: 1 Unschedulable, 3 Schedulable. Origin reason is vc-node-0-3-"
        )
        assert any(e["reason"] == "Unschedulable" for e in events(emu, "vc"))
        assert not any(p["spec"].get("nodeName") for p in pods(emu, "vc"))


def test_volcano_gang_beyond_overcommit_stays_pending() -> None:
    with cluster(runtimes=(VOLCANO_RUNTIME,), nodes=("node-1", "node-2")) as emu:
        emu.create(trainjob("vc", "torch-volcano", trainer=ranks(4, "6")))
        wait_for("the overused event", lambda: [
            e for e in events(emu, "vc")
            if e["message"] == "resource in cluster is overused: overused cpu"
        ])  # fmt: skip
        group = find(emu, VOLCANO, "PodGroup", "vc")
        assert group is not None and group["status"]["phase"] == "Pending"


def test_volcano_gang_that_fits_runs() -> None:
    nodes = ("node-1", "node-2", "node-3", "node-4")
    with cluster(runtimes=(VOLCANO_RUNTIME,), nodes=nodes) as emu:
        emu.create(trainjob("vcfit", "torch-volcano", trainer=ranks(4, "6")))
        wait_for(
            "the PodGroup Completed",
            lambda: (g := find(emu, VOLCANO, "PodGroup", "vcfit")) and g.get("status", {}).get("phase") == "Completed",
        )  # fmt: skip
        bound = [e for p in pods(emu, "vcfit") for e in events(emu, p["metadata"]["name"])
                 if e["reason"] == "Scheduled"]  # fmt: skip
        assert {e["source"]["component"] for e in bound} == {"volcano"}


def test_a_pod_with_the_volcano_annotation_but_the_default_scheduler_is_not_a_gang() -> None:
    runtime = gang_runtime("torch-annotated", {"volcano": {}})  # no schedulerName: volcano
    with cluster(runtimes=(runtime,), nodes=("node-1",)) as emu:
        emu.create(trainjob("solo", "torch-annotated", trainer=ranks(2, "6")))
        bound = wait_for(
            "one pod bound", lambda: [p for p in pods(emu, "solo") if p["spec"].get("nodeName")]
        )
        assert len(bound) == 1  # scheduled alone, as the default scheduler does

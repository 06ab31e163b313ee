"""Kueue as kubernetes-sigs/kueue v0.17 behaves (issue 27, item 7): the queue objects are what
the controller reads, a ClusterQueue preempts only as its ``withinClusterQueue`` says (Kueue's
default: ``Never``), ``PodsReady`` only with ``waitForPodsReady``, the preemption message
with its paths, and the status Kueue writes on ClusterQueues and LocalQueues."""

from __future__ import annotations

from typing import Any

from dispatch.testing.k8s import Emulator
from dispatch.testing.k8s.controllers import ClusterQueue, KueueConfig
from dispatch.testing.k8s.controllers.kueue_admission import (
    Entry,
    PodSetNeed,
    Preempt,
    assign,
    preemption_targets,
    schedule,
)
from dispatch.testing.k8s.controllers.kueue_model import quantity_text, read_cluster_queue
from dispatch.testing.k8s.scenario import PodBehaviour, Scenario

from .scenario_helpers import TRAINER, cluster, find, objects, pods, trainjob, wait_for

KUEUE = "kueue.x-k8s.io/v1beta2"
CPU2 = {"requests": {"cpu": "2"}}
RUNS = Scenario(default=PodBehaviour(run_for=None))


def queued(name: str, queue: str = "team-a", nodes: int = 1, **labels: str) -> dict[str, Any]:
    return trainjob(
        name,
        trainer={"numNodes": nodes, "resourcesPerNode": CPU2},
        labels={"kueue.x-k8s.io/queue-name": queue, **labels},
    )


def create(emu: Emulator, kind: str, name: str, namespace: str | None = None, **body: Any) -> None:
    """A Kueue object created as any client would (admission and defaults included)."""
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    obj = {"apiVersion": KUEUE, "kind": kind, "metadata": meta, **body}
    rtype = emu.cluster.rtype(KUEUE, kind)
    emu.call(lambda: emu.cluster.store.create(rtype, namespace, obj))


def cluster_queue_spec(quota: str = "4", flavor: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": quota}]}
                ],
            }
        ],
        **spec,
    }


def workload(emu: Emulator, tj_name: str) -> dict[str, Any] | None:
    tj = find(emu, TRAINER, "TrainJob", tj_name)
    if tj is None:
        return None
    found = objects(emu, KUEUE, "Workload", **{"kueue.x-k8s.io/job-uid": tj["metadata"]["uid"]})
    return found[0] if found else None


def condition_of(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == ctype), None)


def wl_condition(emu: Emulator, tj_name: str, ctype: str, status: str = "True") -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        found = condition_of(workload(emu, tj_name), ctype)
        return found if found is not None and found["status"] == status else None

    return wait_for(f"{tj_name}'s Workload {ctype}={status}", probe)  # type: ignore[no-any-return]


def running(emu: Emulator, name: str, count: int = 1) -> None:
    wait_for(
        f"{name} running",
        lambda: len([p for p in pods(emu, name) if p["status"].get("phase") == "Running"]) == count,
    )


# ---------------------------------------------------------------- the objects are read


def test_queues_created_through_the_api_admit_and_carry_kueues_status() -> None:
    """No queue in Python: a ResourceFlavor, a ClusterQueue and a LocalQueue created as
    objects admit a TrainJob, and both queues show what Kueue writes."""
    with cluster(RUNS, KueueConfig(), time_scale=100) as emu:
        create(emu, "ResourceFlavor", "default")
        create(emu, "ClusterQueue", "cq", spec=cluster_queue_spec("4", namespaceSelector={}))
        create(emu, "LocalQueue", "team-a", "default", spec={"clusterQueue": "cq"})
        emu.create(queued("one"))
        wl_condition(emu, "one", "Admitted")
        running(emu, "one")

        def cq_status() -> dict[str, Any] | None:
            obj = find(emu, KUEUE, "ClusterQueue", "cq", namespace=None)
            status = (obj or {}).get("status") or {}
            return status if status.get("admittedWorkloads") == 1 else None

        status = wait_for("the ClusterQueue's status", cq_status)
        active = condition_of({"status": status}, "Active") or {}
        assert (active.get("status"), active.get("reason"), active.get("message")) == (
            "True",
            "Ready",
            "Can admit new workloads",
        )
        assert (status["pendingWorkloads"], status["reservingWorkloads"]) == (0, 1)
        assert status["flavorsUsage"] == [
            {"name": "default", "resources": [{"name": "cpu", "total": "2", "borrowed": "0"}]}
        ]
        local = find(emu, KUEUE, "LocalQueue", "team-a")
        assert local is not None
        lq_active = condition_of(local, "Active") or {}
        assert (lq_active.get("reason"), lq_active.get("message")) == (
            "Ready",
            "Can submit new workloads to localQueue",
        )
        assert local["status"]["admittedWorkloads"] == 1
        assert local["status"]["flavorsUsage"] == [
            {"name": "default", "resources": [{"name": "cpu", "total": "2"}]}
        ]
        admission = (workload(emu, "one") or {})["status"]["admission"]
        assert admission["podSetAssignments"][0]["flavors"] == {"cpu": "default"}
        assert admission["podSetAssignments"][0]["resourceUsage"] == {"cpu": "2"}


def test_the_python_configuration_is_created_as_objects_with_kueues_defaults() -> None:
    config = KueueConfig((ClusterQueue("cq", {"cpu": "4"}, local_queues=("team-a",)),), {"high": 7})
    with cluster(RUNS, config) as emu:
        cq = find(emu, KUEUE, "ClusterQueue", "cq", namespace=None)
        assert cq is not None
        assert cq["spec"]["preemption"] == {
            "withinClusterQueue": "Never",
            "reclaimWithinCohort": "Never",
            "borrowWithinCohort": {"policy": "Never"},
        }
        assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO"
        assert find(emu, KUEUE, "LocalQueue", "team-a") is not None
        assert find(emu, KUEUE, "ResourceFlavor", "default", namespace=None) is not None
        wpc = find(emu, KUEUE, "WorkloadPriorityClass", "high", namespace=None)
        assert wpc is not None and wpc["value"] == 7


def test_a_workload_naming_a_missing_local_queue_stays_pending_and_then_is_admitted() -> None:
    config = KueueConfig((ClusterQueue("cq", {"cpu": "4"}, local_queues=("team-a",)),))
    with cluster(RUNS, config, time_scale=100) as emu:
        emu.create(queued("lost", queue="nope"))
        pending = wl_condition(emu, "lost", "QuotaReserved", "False")
        assert (pending["reason"], pending["message"]) == (
            "Inadmissible",
            "LocalQueue nope doesn't exist",
        )
        tj = find(emu, TRAINER, "TrainJob", "lost")
        assert tj is not None and tj["spec"]["suspend"] is True
        create(emu, "LocalQueue", "nope", "default", spec={"clusterQueue": "cq"})
        wl_condition(emu, "lost", "Admitted")


def test_a_local_queue_pointing_at_a_missing_cluster_queue() -> None:
    with cluster(RUNS, KueueConfig(), time_scale=100) as emu:
        create(emu, "LocalQueue", "team-a", "default", spec={"clusterQueue": "ghost"})
        emu.create(queued("orphan"))
        pending = wl_condition(emu, "orphan", "QuotaReserved", "False")
        assert (pending["reason"], pending["message"]) == (
            "Inadmissible",
            "ClusterQueue ghost doesn't exist",
        )
        local = wait_for(
            "LocalQueue status",
            lambda: condition_of(find(emu, KUEUE, "LocalQueue", "team-a"), "Active"),
        )
        assert (local["status"], local["reason"], local["message"]) == (
            "False",
            "ClusterQueueDoesNotExist",
            "Can't submit new workloads to clusterQueue",
        )


def test_a_missing_resource_flavor_makes_the_cluster_queue_inactive_until_created() -> None:
    with cluster(RUNS, KueueConfig(), time_scale=100) as emu:
        create(emu, "ClusterQueue", "cq", spec=cluster_queue_spec("4", "big", namespaceSelector={}))
        create(emu, "LocalQueue", "team-a", "default", spec={"clusterQueue": "cq"})
        emu.create(queued("waits"))
        pending = wl_condition(emu, "waits", "QuotaReserved", "False")
        assert (pending["reason"], pending["message"]) == (
            "Inadmissible",
            "ClusterQueue cq is inactive",
        )
        active = condition_of(find(emu, KUEUE, "ClusterQueue", "cq", namespace=None), "Active")
        assert active is not None
        assert (active["status"], active["reason"], active["message"]) == (
            "False",
            "FlavorNotFound",
            "Can't admit new workloads: references missing ResourceFlavor(s): big.",
        )
        create(emu, "ResourceFlavor", "big")
        wl_condition(emu, "waits", "Admitted")


def test_the_namespace_selector_decides_who_may_submit() -> None:
    """No ``namespaceSelector`` selects no namespace (v1beta2); a selector that does not match
    the namespace's labels neither."""
    with cluster(RUNS, KueueConfig(), time_scale=100) as emu:
        create(emu, "ResourceFlavor", "default")
        create(emu, "ClusterQueue", "cq", spec=cluster_queue_spec("4"))
        create(emu, "LocalQueue", "team-a", "default", spec={"clusterQueue": "cq"})
        emu.create(queued("nobody"))
        pending = wl_condition(emu, "nobody", "QuotaReserved", "False")
        assert (pending["reason"], pending["message"]) == (
            "Pending",
            "Workload namespace doesn't match ClusterQueue selector",
        )
        rtype = emu.cluster.rtype(KUEUE, "ClusterQueue")
        selector = {"spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}}}}  # fmt: skip
        emu.call(
            lambda: emu.cluster.store.patch(
                rtype, None, "cq", "application/merge-patch+json", selector
            )
        )
        ns_type = emu.cluster.rtype("v1", "Namespace")
        labels = {"metadata": {"labels": {"kubernetes.io/metadata.name": "default"}}}
        emu.call(
            lambda: emu.cluster.store.patch(
                ns_type, None, "default", "application/merge-patch+json", labels
            )
        )
        wl_condition(emu, "nobody", "Admitted")


def test_the_priority_comes_from_the_workload_priority_class_object() -> None:
    config = KueueConfig((ClusterQueue("cq", {"cpu": "4"}, local_queues=("team-a",)),))
    with cluster(RUNS, config, time_scale=100) as emu:
        emu.create(queued("early", **{"kueue.x-k8s.io/priority-class": "urgent"}))
        emu.create(queued("marker"))  # reconciled no earlier than "early"
        wait_for("the marker's Workload", lambda: workload(emu, "marker"))
        assert workload(emu, "early") is None  # the class it names does not exist yet
        create(emu, "WorkloadPriorityClass", "urgent", value=500)
        wl = wait_for("the Workload", lambda: workload(emu, "early"))
        assert wl["spec"]["priority"] == 500
        assert wl["spec"]["priorityClassRef"] == {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": "urgent",
        }


# ---------------------------------------------------------------- preemption


def test_a_higher_priority_does_not_preempt_by_default() -> None:
    config = KueueConfig(
        (ClusterQueue("cq", {"cpu": "2"}, local_queues=("team-a",)),), {"high": 1000}
    )
    with cluster(RUNS, config, time_scale=100) as emu:
        emu.create(queued("low"))
        wl_condition(emu, "low", "Admitted")
        emu.create(queued("high", **{"kueue.x-k8s.io/priority-class": "high"}))
        pending = wl_condition(emu, "high", "QuotaReserved", "False")
        assert (pending["reason"], pending["message"]) == (
            "Pending",
            "couldn't assign flavors to pod set node: insufficient unused quota for cpu in "
            "flavor default, 2 more needed",
        )
        assert condition_of(workload(emu, "low"), "Evicted") is None
        running(emu, "low")


def test_lower_priority_preemption_names_its_preemptor_and_the_paths() -> None:
    config = KueueConfig(
        (
            ClusterQueue(
                "cq", {"cpu": "2"}, local_queues=("team-a",), within_cluster_queue="LowerPriority"
            ),
        ),
        {"high": 1000},
    )
    with cluster(RUNS, config, time_scale=100) as emu:
        emu.create(queued("low"))
        wl_condition(emu, "low", "Admitted")
        emu.create(queued("high", **{"kueue.x-k8s.io/priority-class": "high"}))
        evicted = wl_condition(emu, "low", "Evicted")
        high_wl, high_tj = workload(emu, "high"), find(emu, TRAINER, "TrainJob", "high")
        assert high_wl is not None and high_tj is not None
        expected = (
            f"Preempted to accommodate a workload (UID: {high_wl['metadata']['uid']}, "
            f"JobUID: {high_tj['metadata']['uid']}) due to prioritization in the ClusterQueue; "
            "preemptor path: /cq; preemptee path: /cq"
        )
        assert (evicted["reason"], evicted["message"]) == ("Preempted", expected)
        preempted = condition_of(workload(emu, "low"), "Preempted") or {}
        assert (preempted.get("reason"), preempted.get("message")) == ("InClusterQueue", expected)
        wl_condition(emu, "high", "Admitted")


# ---------------------------------------------------------------- PodsReady


def test_pods_ready_is_written_only_with_wait_for_pods_ready() -> None:
    queue = (ClusterQueue("cq", {"cpu": "4"}, local_queues=("team-a",)),)
    with cluster(RUNS, KueueConfig(queue), time_scale=100) as emu:
        emu.create(queued("plain"))
        running(emu, "plain")
        wait_for("the Workload admitted", lambda: condition_of(workload(emu, "plain"), "Admitted"))
        # the job controller's and Kueue's writes have settled once the TrainJob is running
        assert condition_of(workload(emu, "plain"), "PodsReady") is None
    with cluster(RUNS, KueueConfig(queue, wait_for_pods_ready=True), time_scale=100) as emu:
        emu.create(queued("watched"))
        ready = wl_condition(emu, "watched", "PodsReady")
        assert (ready["reason"], ready["message"]) == (
            "Started",
            "All pods reached readiness and the workload is running",
        )


# ---------------------------------------------------------------- the pure scheduler


def queue_spec(policy: str = "Never", strategy: str = "BestEffortFIFO", quota: str = "4") -> Any:
    obj = {
        "metadata": {"name": "cq"},
        "spec": cluster_queue_spec(
            quota,
            namespaceSelector={},
            queueingStrategy=strategy,
            preemption={"withinClusterQueue": policy},
        ),
    }
    return read_cluster_queue(obj, {"default"})


def entry(name: str, cpu: int, priority: int = 0, created: str = "", **admitted: Any) -> Entry:
    usage = {("default", "cpu"): cpu * 1000} if admitted.get("reserved_at") else {}
    return Entry(
        namespace="default",
        name=name,
        uid=f"uid-{name}",
        job_uid=f"job-{name}",
        priority=priority,
        created=created or "2026-01-01T00:00:00Z",
        pod_sets=(PodSetNeed("node", 1, {"cpu": cpu * 1000}),),
        usage=usage,
        **admitted,
    )


def test_preemption_takes_the_fewest_lowest_most_recent_workloads() -> None:
    queue = queue_spec("LowerPriority")
    old = entry("old", 1, 0, reserved_at="2026-01-01T00:00:01Z")
    new = entry("new", 1, 0, reserved_at="2026-01-01T00:00:05Z")
    big = entry("big", 2, 0, reserved_at="2026-01-01T00:00:03Z")
    same = entry("same", 0, 10, reserved_at="2026-01-01T00:00:04Z")
    used = {("default", "cpu"): 4000}
    preemptor = entry("p", 2, 10)
    found = assign(queue, preemptor, used)
    # candidates newest first (new, big, old): new then big are removed, new is added back
    assert [e.name for e in preemption_targets(queue, preemptor, found, [old, new, big, same], used)] == ["big"]  # fmt: skip
    assert preemption_targets(queue_spec("Never"), preemptor, found, [old, new, big], used) == []


def test_lower_or_newer_equal_priority_preempts_a_newer_equal() -> None:
    queue = queue_spec("LowerOrNewerEqualPriority", quota="2")
    running_ = entry("run", 2, 5, created="2026-01-01T00:00:09Z", reserved_at="2026-01-01T00:00:09Z")  # fmt: skip
    older = entry("older", 2, 5, created="2026-01-01T00:00:01Z")
    decisions = schedule(queue, [older], [running_])
    assert [type(d).__name__ for d in decisions] == ["Preempt", "Pend"]
    assert isinstance(decisions[0], Preempt) and decisions[0].victim.name == "run"
    assert decisions[1].message.endswith(". Pending the preemption of 1 workload(s)")  # type: ignore[union-attr]
    assert schedule(queue_spec("LowerPriority", quota="2"), [older], [running_])[0].__class__.__name__ == "Pend"  # fmt: skip


def test_strict_fifo_blocks_behind_the_head_and_best_effort_does_not() -> None:
    head = entry("head", 4, 5, created="2026-01-01T00:00:01Z")
    small = entry("small", 1, 0, created="2026-01-01T00:00:02Z")
    holder = entry("holder", 2, 9, reserved_at="2026-01-01T00:00:00Z")
    strict = schedule(queue_spec(strategy="StrictFIFO"), [head, small], [holder])
    assert [(type(d).__name__, d.entry.name) for d in strict] == [("Pend", "head")]  # type: ignore[union-attr]
    best = schedule(queue_spec(), [head, small], [holder])
    assert [(type(d).__name__, d.entry.name) for d in best] == [
        ("Pend", "head"),
        ("Admit", "small"),
    ]  # type: ignore[union-attr]


def test_flavor_assignment_messages() -> None:
    queue = queue_spec(quota="4")
    over = assign(queue, entry("x", 6), {})
    assert over.message == (
        "couldn't assign flavors to pod set node: insufficient quota for cpu in flavor default, "
        "previously considered podsets requests (0) + current podset request (6) > maximum "
        "capacity (4)"
    )
    memory = Entry("default", "m", "u", "j", 0, "", (PodSetNeed("node", 1, {"memory": 1}),))
    assert assign(queue, memory, {}).message == (
        "couldn't assign flavors to pod set node: resource memory unavailable in ClusterQueue"
    )


def test_quantities_print_as_kueue_prints_them() -> None:
    assert [quantity_text("cpu", v) for v in (0, 4000, 1500)] == ["0", "4", "1500m"]
    assert quantity_text("memory", 32 * 2**30) == "32Gi"
    assert quantity_text("memory", 100000) == "100k"
    assert quantity_text("nvidia.com/gpu", 8) == "8"

"""Kueue scenarios (reference D): admission against quota, preemption of a running TrainJob,
pending reasons, and a runtimePatch naming a container that is not an init container."""

from __future__ import annotations

from dispatch.testing.k8s.controllers import ClusterQueue, KueueConfig
from dispatch.testing.k8s.scenario import PodBehaviour, Scenario

from .scenario_helpers import (
    TRAINER,
    cluster,
    cond,
    events,
    find,
    objects,
    pods,
    trainjob,
    trainjob_condition,
    wait_for,
)

QUEUE = {"kueue.x-k8s.io/queue-name": "team-a"}
CPU2 = {"requests": {"cpu": "2"}}
KUEUE = KueueConfig(
    # a higher priority preempts only where the ClusterQueue says so (Kueue's default: Never)
    cluster_queues=(
        ClusterQueue(
            "cq", {"cpu": "4"}, local_queues=("team-a",), within_cluster_queue="LowerPriority"
        ),
    ),
    priority_classes={"high": 1000},
)


def workload(emu: object, tj_name: str) -> dict[str, object] | None:
    tj = find(emu, TRAINER, "TrainJob", tj_name)  # type: ignore[arg-type]
    if tj is None:
        return None
    found = objects(
        emu,
        "kueue.x-k8s.io/v1beta2",
        "Workload",
        **{"kueue.x-k8s.io/job-uid": tj["metadata"]["uid"]},
    )  # type: ignore[arg-type]
    return found[0] if found else None


def test_admission_preemption_and_readmission() -> None:
    """A low-priority TrainJob runs; a high-priority one needs its quota: the low one is
    evicted (Evicted/Preempted InClusterQueue), suspended, its pods go; when the high one
    finishes it is readmitted (Evicted False "Previously: ...") and completes."""
    scenario = Scenario(default=PodBehaviour(run_for=60))
    with cluster(scenario, KUEUE, time_scale=100) as emu:
        emu.create(
            trainjob("low", trainer={"numNodes": 2, "resourcesPerNode": CPU2}, labels=dict(QUEUE))
        )
        created = find(emu, TRAINER, "TrainJob", "low")
        assert created is not None  # created suspended by Kueue's webhook, then started by Kueue:
        wait_for("Started", lambda: [e for e in events(emu, "low") if e["reason"] == "Started"])
        assert any(
            p["manager"] == "kueue.x-k8s.io/manager" for p in created["spec"]["runtimePatches"]
        )
        wait_for(
            "low running",
            lambda: (
                len([p for p in pods(emu, "low") if p["status"].get("phase") == "Running"]) == 2
            ),
        )
        wl = workload(emu, "low")
        assert wl is not None and wl["metadata"]["name"].startswith("trainjob-low-")  # type: ignore[index]
        admitted = cond(wl, "QuotaReserved")  # type: ignore[arg-type]
        assert admitted is not None and admitted["message"] == "Quota reserved in ClusterQueue cq"
        running = pods(emu, "low")
        assert running[0]["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "node"
        emu.create(trainjob("high", trainer={"numNodes": 2, "resourcesPerNode": CPU2},
                            labels={**QUEUE, "kueue.x-k8s.io/priority-class": "high"}))  # fmt: skip
        evicted = wait_for("low evicted", lambda: cond(workload(emu, "low"), "Evicted"))  # type: ignore[arg-type]
        assert evicted["reason"] == "Preempted"
        preempted = cond(workload(emu, "low"), "Preempted")  # type: ignore[arg-type]
        assert preempted is not None and preempted["reason"] == "InClusterQueue"
        trainjob_condition(emu, "low", "Suspended")
        wait_for("low pods gone", lambda: not pods(emu, "low"))
        assert any(e["reason"] == "Stopped" for e in events(emu, "low"))
        trainjob_condition(emu, "high", "Complete")
        wait_for("low readmitted", lambda: cond(workload(emu, "low"), "Admitted"), timeout=60)  # type: ignore[arg-type]
        wl = workload(emu, "low")
        evicted_now = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")  # type: ignore[index]
        assert evicted_now["status"] == "False" and evicted_now["message"].startswith(
            "Previously: "
        )
        assert wl["status"]["schedulingStats"]["evictions"] == [  # type: ignore[index]
            {"reason": "Preempted", "underlyingCause": "InClusterQueue", "count": 1}
        ]
        trainjob_condition(emu, "low", "Complete")
        finished = wait_for("Finished", lambda: cond(workload(emu, "low"), "Finished"))  # type: ignore[arg-type]
        assert finished["reason"] == "Succeeded"


def test_exceeds_max_quota_and_waiting_for_quota() -> None:
    scenario = Scenario(default=PodBehaviour(run_for=None))
    with cluster(scenario, KUEUE, time_scale=100) as emu:
        emu.create(
            trainjob("huge", trainer={"numNodes": 3, "resourcesPerNode": CPU2}, labels=dict(QUEUE))
        )
        pending = wait_for(
            "pending",
            lambda: (
                (w := workload(emu, "huge"))
                and [
                    c
                    for c in w.get("status", {}).get("conditions", [])
                    if c["type"] == "QuotaReserved"
                ]
            ),
        )  # type: ignore[index]
        assert (pending[0]["status"], pending[0]["reason"]) == ("False", "Pending")
        assert "> maximum capacity (4)" in pending[0]["message"]
        emu.create(
            trainjob("fits", trainer={"numNodes": 2, "resourcesPerNode": CPU2}, labels=dict(QUEUE))
        )
        emu.create(
            trainjob("waits", trainer={"numNodes": 1, "resourcesPerNode": CPU2}, labels=dict(QUEUE))
        )
        wait_for("fits admitted", lambda: cond(workload(emu, "fits"), "Admitted"))  # type: ignore[arg-type]
        waiting = wait_for(
            "waits pending",
            lambda: (
                (w := workload(emu, "waits"))
                and [
                    c
                    for c in w.get("status", {}).get("conditions", [])
                    if c["type"] == "QuotaReserved"
                ]
            ),
        )  # type: ignore[union-attr]
        assert waiting[0]["reason"] == "Pending"
        assert waiting[0]["message"] == (
            "couldn't assign flavors to pod set node: insufficient unused quota for cpu in "
            "flavor default, 2 more needed"
        )
        tj = find(emu, TRAINER, "TrainJob", "waits")
        assert tj is not None and tj["spec"]["suspend"] is True


def test_patch_naming_a_container_as_init_container_holds_quota_with_no_pods() -> None:
    """Trainer's webhook checks a patch's initContainers against every container name of the
    job, so an init container named like the main container is accepted; the merged pod then
    has an init container without image, the pod cannot be created (422), and under Kueue
    the admitted workload holds quota with no pods."""
    patch = {"manager": "dispatch.dev/adapter", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {
            "initContainers": [{"name": "node", "env": [{"name": "DISPATCH_JOB", "value": "j"}]}]}}}}}]}}}}  # fmt: skip
    with cluster(Scenario(default=PodBehaviour(run_for=None)), KUEUE, time_scale=100) as emu:
        emu.create(
            trainjob(
                "noinit",
                trainer={"numNodes": 1, "resourcesPerNode": CPU2},
                labels=dict(QUEUE),
                runtimePatches=[patch],
            )
        )
        wait_for("admitted", lambda: cond(workload(emu, "noinit"), "Admitted"))  # type: ignore[arg-type]
        wait_for(
            "unsuspended",
            lambda: (
                (tj := find(emu, TRAINER, "TrainJob", "noinit")) and tj["spec"]["suspend"] is False
            ),
        )
        failed = wait_for(
            "FailedCreate",
            lambda: [e for e in events(emu, "noinit-node-0") if e["reason"] == "FailedCreate"],
        )
        assert "initContainers[0].image: Required value" in failed[0]["message"]
        assert not pods(emu, "noinit")
        assert cond(workload(emu, "noinit"), "QuotaReserved") is not None  # type: ignore[arg-type]

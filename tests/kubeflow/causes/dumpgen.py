"""Writes the dumps in ``tests/dumps/``: ``python -m tests.kubeflow.causes.dumpgen``.

Each scenario is what ``kubectl get trainjob,jobset,job,pod,event,workload,node -o yaml``
would print for one TrainJob at the moment the dump was taken, following the sequences in
the platform reference. Review the diff of the YAML files after changing a scenario.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.kubeflow.causes.objects import (
    TRAINJOB,
    cond,
    container_status,
    ended_conditions,
    event,
    job,
    jobs_status,
    jobset,
    kind_list,
    new_event,
    node,
    pod,
    running,
    running_conditions,
    terminated,
    trainjob,
    waiting,
    workload,
)

DUMPS = Path(__file__).resolve().parents[2] / "dumps"
JOB0 = f"{TRAINJOB}-node-0"
FAILED_JOBS = f"jobset failed due to one or more job failures (first failed job: {JOB0})"
Scenario = Callable[[], list[dict[str, Any]]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(func: Scenario) -> Scenario:
    SCENARIOS[func.__name__.replace("_", "-")] = func
    return func


def _failed_chain(
    at: float,
    reason: str = "BackoffLimitExceeded",
    message: str = "Job has reached the specified backoff limit",
) -> list[dict[str, Any]]:
    """The Job, JobSet and TrainJob failing one after the other (A.9, B.2)."""
    return [
        trainjob(
            [cond("Failed", "True", at + 2, "FailedJobs", FAILED_JOBS)],
            jobs_status=jobs_status(failed=1),
        ),
        jobset([cond("Failed", "True", at + 1, "FailedJobs", FAILED_JOBS)], rjs={"failed": 1}),
        job(
            [
                cond("FailureTarget", "True", at, reason, message),
                cond("Failed", "True", at + 1, reason, message),
            ],
            failed=2,
        ),
    ]


def _killed(
    index: int, suffix: str, node_name: str, at: float, started: float = 40
) -> dict[str, Any]:
    """A rank terminated because its pod was deleted at ``at`` (SIGTERM, exit 143)."""
    return pod(
        index,
        suffix=suffix,
        node=node_name,
        phase="Failed",
        deletion=at,
        containers=[container_status(terminated(143, started, at + 1))],
        conditions=ended_conditions(6, started + 5, at + 1),
    )


@scenario
def kueue_preemption() -> list[dict[str, Any]]:
    message = (
        "Preempted to accommodate a workload (UID: 3f1c2a9e-6b7d-4e21-9c55-0d8e2f7a1b34, JobUID: "
        "a20d0a6a-64a3-46ce-9b95-8cfb3bf6e675) due to prioritization in the ClusterQueue; "
        "preemptor path: /cq-team-a; preemptee path: /cq-team-a"
    )
    wl = workload(
        [
            cond(
                "QuotaReserved",
                "False",
                600,
                "Pending",
                "The workload is evicted: " + message.split(";")[0],
            ),
            cond("Admitted", "False", 600, "NoReservation", "The workload has no reservation"),
            cond("Evicted", "True", 600, "Preempted", message),
            cond("Preempted", "True", 600, "InClusterQueue", message),
            cond("Requeued", "True", 600, "Preempted", message),
            cond("PodsReady", "False", 600, "WaitForStart", "Not all pods are ready or succeeded"),
        ],
        admitted_cq=None,
        evictions=[{"count": 1, "reason": "Preempted", "underlyingCause": "InClusterQueue"}],
    )
    return [
        trainjob(
            [cond("Suspended", "True", 601, "Suspended", "TrainJob is suspended")],
            suspend=True,
            queue="team-a",
            jobs_status=jobs_status(),
        ),
        jobset([cond("Suspended", "True", 601, "SuspendedJobs", "jobset is suspended")]),
        wl,
        _killed(0, "k2x9p", "gpu-node-1", 601),
        _killed(1, "q7w4m", "gpu-node-2", 601),
        event(
            "TrainJob",
            TRAINJOB,
            "CreatedWorkload",
            f"Created Workload: ml-team/{wl['metadata']['name']}",
            1,
            component="trainjob-kueue-controller",
        ),
        event(
            "TrainJob",
            TRAINJOB,
            "Started",
            "Admitted by clusterQueue cq-team-a",
            3,
            component="trainjob-kueue-controller",
        ),
        event(
            "Workload",
            wl["metadata"]["name"],
            "EvictedDueToPreempted",
            message,
            600,
            component="kueue-admission",
            api_version="kueue.x-k8s.io/v1beta2",
        ),
        event(
            "TrainJob",
            TRAINJOB,
            "Stopped",
            message.split(";")[0],
            600,
            component="trainjob-kueue-controller",
        ),
        event(
            "Pod",
            f"{JOB0}-0-k2x9p",
            "Killing",
            "Stopping container node",
            601,
            component="kubelet",
            host="gpu-node-1",
        ),
    ]


@scenario
def scheduler_preemption() -> list[dict[str, Any]]:
    return [
        *_failed_chain(903),
        pod(
            0,
            suffix="h8d2s",
            node="gpu-node-1",
            phase="Failed",
            containers=[
                container_status(
                    terminated(
                        1,
                        40,
                        930,
                        message="torch.distributed.DistBackendError: NCCL error: remote process exited or there was a network error",
                    )
                )
            ],
            conditions=ended_conditions(6, 45, 930),
        ),
        pod(
            1,
            suffix="m3k8v",
            node="gpu-node-2",
            phase="Failed",
            deletion=900,
            containers=[container_status(terminated(143, 40, 902))],
            conditions=[
                cond(
                    "DisruptionTarget",
                    "True",
                    900,
                    "PreemptionByScheduler",
                    "default-scheduler: preempting to accommodate a higher priority pod",
                ),
                *ended_conditions(6, 45, 902),
            ],
        ),
        event(
            "Pod",
            f"{JOB0}-1-m3k8v",
            "Preempted",
            "Preempted by pod 8a6f0c1e-2b4d-4f7a-9e3c-5d1b7a9c0e2f on node gpu-node-2",
            900,
            component="default-scheduler",
        ),
        event(
            "Pod",
            f"{JOB0}-1-m3k8v",
            "Killing",
            "Stopping container node",
            900,
            component="kubelet",
            host="gpu-node-2",
        ),
        event(
            "Job",
            JOB0,
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            903,
            type_="Warning",
            component="job-controller",
            api_version="batch/v1",
        ),
    ]


def _disrupted(
    reason: str, message: str, status_reason: str | None = None, status_message: str | None = None
) -> list[dict[str, Any]]:
    return [
        *_failed_chain(1202),
        pod(
            0,
            suffix="c4n7r",
            node="gpu-node-1",
            phase="Failed",
            containers=[container_status(terminated(143, 40, 1201))],
            deletion=1201,
            conditions=ended_conditions(6, 45, 1201),
        ),
        pod(
            1,
            suffix="z9t5b",
            node="gpu-node-5",
            phase="Failed",
            deletion=None if status_reason else 1200,
            containers=[container_status(terminated(137 if status_reason else 143, 40, 1230))],
            conditions=[
                cond("DisruptionTarget", "True", 1200, reason, message),
                *ended_conditions(6, 45, 1230),
            ],
            reason=status_reason,
            message=status_message,
        ),
    ]


@scenario
def drain_eviction() -> list[dict[str, Any]]:
    return _disrupted("EvictionByEvictionAPI", "Eviction API: evicting")


@scenario
def spot_shutdown() -> list[dict[str, Any]]:
    text = "Pod was terminated in response to imminent node shutdown."
    return [
        *_disrupted("TerminationByKubelet", text, "Terminated", text),
        event(
            "Node",
            "gpu-node-5",
            "Shutdown",
            "Shutdown manager detected shutdown event",
            1195,
            component="kubelet",
            host="gpu-node-5",
        ),
    ]


@scenario
def node_pressure() -> list[dict[str, Any]]:
    text = (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92160Ki. "
        "Container node was using 31457280Ki, request is 16Gi, has larger consumption of memory. "
    )
    return [
        *_disrupted("TerminationByKubelet", text, "Evicted", text),
        event(
            "Pod",
            f"{JOB0}-1-z9t5b",
            "Evicted",
            text,
            1200,
            type_="Warning",
            component="kubelet",
            host="gpu-node-5",
        ),
        event(
            "Node",
            "gpu-node-5",
            "EvictionThresholdMet",
            "Attempting to reclaim memory",
            1199,
            type_="Warning",
            component="kubelet",
            host="gpu-node-5",
        ),
    ]


@scenario
def node_notready_taint() -> list[dict[str, Any]]:
    unreachable = [
        {
            "effect": "NoSchedule",
            "key": "node.kubernetes.io/unreachable",
            "timeAdded": "2026-08-27T10:16:40Z",
        },
        {
            "effect": "NoExecute",
            "key": "node.kubernetes.io/unreachable",
            "timeAdded": "2026-08-27T10:16:45Z",
        },
    ]
    return [
        *_failed_chain(1805),
        node(
            "gpu-node-2",
            cond(
                "Ready",
                "Unknown",
                1000,
                "NodeStatusUnknown",
                "Kubelet stopped posting node status.",
                lastHeartbeatTime="2026-08-27T10:15:55Z",
            ),
            taints=unreachable,
        ),
        node(
            "gpu-node-1",
            cond(
                "Ready",
                "True",
                -86000,
                "KubeletReady",
                "kubelet is posting ready status",
                lastHeartbeatTime="2026-08-27T10:29:00Z",
            ),
        ),
        pod(
            0,
            suffix="p2l6x",
            node="gpu-node-1",
            phase="Failed",
            containers=[
                container_status(
                    terminated(
                        1,
                        40,
                        1803,
                        message="torch.distributed.DistBackendError: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48211, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
                    )
                )
            ],
            conditions=ended_conditions(6, 45, 1803),
        ),
        pod(
            1,
            suffix="w5e1d",
            node="gpu-node-2",
            phase="Running",
            deletion=1300,
            containers=[container_status(running(40), ready=True)],
            conditions=[
                cond(
                    "DisruptionTarget",
                    "True",
                    1300,
                    "DeletionByTaintManager",
                    "Taint manager: deleting due to NoExecute taint",
                ),
                *running_conditions(6, 45)[:2],
                cond("Ready", "False", 1000, "NodeNotReady"),
                *running_conditions(6, 45)[3:],
            ],
        ),
        event(
            "Node",
            "gpu-node-2",
            "NodeNotReady",
            "Node gpu-node-2 status is now: NodeNotReady",
            1000,
            component="node-controller",
        ),
        event(
            "Pod",
            f"{JOB0}-1-w5e1d",
            "NodeNotReady",
            "Node is not ready",
            1000,
            type_="Warning",
            component="node-controller",
        ),
        event(
            "Pod",
            f"{JOB0}-1-w5e1d",
            "TaintManagerEviction",
            f"Marking for deletion Pod ml-team/{JOB0}-1-w5e1d",
            1300,
            component="taint-eviction-controller",
        ),
    ]


@scenario
def node_deleted_podgc() -> list[dict[str, Any]]:
    return [
        *_failed_chain(2101),
        pod(
            0,
            suffix="f6g3j",
            node="gpu-node-3",
            phase="Failed",
            containers=[container_status(running(40), ready=True)],
            conditions=[
                cond(
                    "DisruptionTarget",
                    "True",
                    2100,
                    "DeletionByPodGC",
                    "PodGC: node no longer exists",
                ),
                *running_conditions(6, 45),
            ],
        ),
        pod(
            1,
            suffix="v8b2n",
            node="gpu-node-4",
            phase="Failed",
            deletion=2101,
            containers=[container_status(terminated(143, 40, 2102))],
            conditions=ended_conditions(6, 45, 2102),
        ),
        event(
            "Node",
            "gpu-node-3",
            "RemovingNode",
            "Node gpu-node-3 event: Removing Node gpu-node-3 from Controller",
            2095,
            component="node-controller",
        ),
        node(
            "gpu-node-4",
            cond(
                "Ready",
                "True",
                -86000,
                "KubeletReady",
                "kubelet is posting ready status",
                lastHeartbeatTime="2026-08-27T10:34:00Z",
            ),
        ),
    ]


@scenario
def oom() -> list[dict[str, Any]]:
    return [
        *_failed_chain(702),
        pod(
            0,
            suffix="r4s9k",
            node="gpu-node-1",
            phase="Failed",
            containers=[container_status(terminated(137, 40, 700, reason="OOMKilled"))],
            conditions=ended_conditions(6, 45, 700),
        ),
        pod(
            1,
            suffix="t1y7u",
            node="gpu-node-2",
            phase="Failed",
            deletion=701,
            containers=[container_status(terminated(143, 40, 702))],
            conditions=ended_conditions(6, 45, 702),
        ),
    ]


@scenario
def deadline() -> list[dict[str, Any]]:
    return [
        trainjob(
            [
                cond(
                    "Failed",
                    "True",
                    3600,
                    "DeadlineExceeded",
                    "TrainJob exceeded its active deadline",
                )
            ],
            deadline=3600,
        ),
        _killed(0, "a3d5f", "gpu-node-1", 3600),
        _killed(1, "b6h8j", "gpu-node-2", 3600),
        event(
            "Pod",
            f"{JOB0}-0-a3d5f",
            "Killing",
            "Stopping container node",
            3600,
            component="kubelet",
            host="gpu-node-1",
        ),
        event(
            "JobSet",
            TRAINJOB,
            "SuccessfulDelete",
            f"Deleted jobset {TRAINJOB}",
            3600,
            component="trainer",
        ),
    ]


def _pending(index: int, suffix: str, since: float, message: str) -> dict[str, Any]:
    return pod(
        index,
        suffix=suffix,
        node=None,
        phase="Pending",
        containers=[],
        conditions=[
            cond("PodScheduled", "False", since, "Unschedulable", message, lastProbeTime=None)
        ],
    )


@scenario
def unschedulable() -> list[dict[str, Any]]:
    message = (
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are "
        "available: 4 No preemption victims found for incoming pod."
    )
    return [
        trainjob(jobs_status=jobs_status(active=1)),
        jobset(rjs={"active": 1}),
        job(active=2),
        _pending(0, "n5m2b", 5, message),
        _pending(1, "x8c4v", 5, message),
        event(
            "Pod",
            f"{JOB0}-0-n5m2b",
            "FailedScheduling",
            message,
            5,
            last=1505,
            count=31,
            type_="Warning",
            component="default-scheduler",
        ),
        event(
            "Pod",
            f"{JOB0}-1-x8c4v",
            "FailedScheduling",
            message,
            5,
            last=1505,
            count=31,
            type_="Warning",
            component="default-scheduler",
        ),
        event(
            "Pod",
            f"{JOB0}-0-n5m2b",
            "NotTriggerScaleUp",
            "pod didn't trigger scale-up: 2 max node group size reached",
            40,
            last=1490,
            count=29,
            component="cluster-autoscaler",
        ),
    ]


@scenario
def exceeds_max_quota() -> list[dict[str, Any]]:
    message = (
        "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in "
        "flavor h100, request > maximum capacity (16 > 8)"
    )
    wl = workload([cond("QuotaReserved", "False", 2, "ExceedsMaxQuota", message)], admitted_cq=None)
    return [
        trainjob(
            [cond("Suspended", "True", 1, "Suspended", "TrainJob is suspended")],
            suspend=True,
            queue="team-a",
        ),
        wl,
        event(
            "TrainJob",
            TRAINJOB,
            "CreatedWorkload",
            f"Created Workload: ml-team/{wl['metadata']['name']}",
            1,
            component="trainjob-kueue-controller",
        ),
        event(
            "Workload",
            wl["metadata"]["name"],
            "Pending",
            message,
            2,
            type_="Warning",
            component="kueue-admission",
            api_version="kueue.x-k8s.io/v1beta2",
        ),
    ]


@scenario
def image_pull() -> list[dict[str, Any]]:
    image = "registry.example.com/ml/mnist-ddp:2.7.1"
    pull = (
        f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": '
        f"{image}: not found"
    )

    def pending(index: int, suffix: str, node_name: str) -> dict[str, Any]:
        return pod(
            index,
            suffix=suffix,
            node=node_name,
            phase="Pending",
            containers=[
                container_status(
                    waiting(
                        "ImagePullBackOff",
                        f'Back-off pulling image "{image}": ErrImagePull: {pull}',
                    )
                )
            ],
            conditions=[
                cond("PodReadyToStartContainers", "True", 9),
                cond("Initialized", "True", 8),
                cond(
                    "Ready",
                    "False",
                    8,
                    "ContainersNotReady",
                    "containers with unready status: [node]",
                ),
                cond(
                    "ContainersReady",
                    "False",
                    8,
                    "ContainersNotReady",
                    "containers with unready status: [node]",
                ),
                cond("PodScheduled", "True", 6),
            ],
        )

    items = [
        trainjob(jobs_status=jobs_status(active=1)),
        jobset(rjs={"active": 1}),
        job(active=2),
        pending(0, "d7k3w", "gpu-node-1"),
        pending(1, "e2q9z", "gpu-node-2"),
    ]
    for index, suffix, host in ((0, "d7k3w", "gpu-node-1"), (1, "e2q9z", "gpu-node-2")):
        name = f"{JOB0}-{index}-{suffix}"
        items.append(
            event(
                "Pod",
                name,
                "Pulling",
                f'Pulling image "{image}"',
                10,
                last=400,
                count=6,
                component="kubelet",
                host=host,
            )
        )
        items.append(
            event(
                "Pod",
                name,
                "Failed",
                f'Failed to pull image "{image}": rpc error: code = NotFound desc = {pull}',
                12,
                last=400,
                count=6,
                type_="Warning",
                component="kubelet",
                host=host,
            )
        )
        items.append(
            event(
                "Pod",
                name,
                "Failed",
                "Error: ErrImagePull",
                12,
                last=400,
                count=6,
                type_="Warning",
                component="kubelet",
                host=host,
            )
        )
        items.append(
            event(
                "Pod",
                name,
                "BackOff",
                f'Back-off pulling image "{image}"',
                13,
                last=460,
                count=24,
                component="kubelet",
                host=host,
            )
        )
    return items


@scenario
def missing_init_container() -> list[dict[str, Any]]:
    wl = workload(
        [
            cond(
                "QuotaReserved",
                "True",
                965,
                "QuotaReserved",
                "Quota reserved in ClusterQueue cq-team-a",
            ),
            cond("Admitted", "True", 965, "Admitted", "The workload is admitted"),
            cond("PodsReady", "False", 965, "WaitForStart", "Not all pods are ready or succeeded"),
            cond(
                "Evicted",
                "False",
                965,
                "QuotaReserved",
                "Previously: Exceeded the PodsReady timeout ml-team/trainjob-" + TRAINJOB,
            ),
            cond("Requeued", "True", 960, "BackoffFinished", "The workload backoff was finished"),
        ],
        evictions=[{"count": 3, "reason": "PodsReadyTimeout", "underlyingCause": ""}],
        requeues=3,
    )
    timeout = f"Exceeded the PodsReady timeout ml-team/{wl['metadata']['name']}"
    return [
        trainjob(
            [cond("Suspended", "False", 965, "Resumed", "TrainJob is resumed")],
            queue="team-a",
            init_container="register",
        ),
        wl,
        event(
            "TrainJob",
            TRAINJOB,
            "CreatedWorkload",
            f"Created Workload: ml-team/{wl['metadata']['name']}",
            1,
            component="trainjob-kueue-controller",
        ),
        event(
            "TrainJob",
            TRAINJOB,
            "Started",
            "Admitted by clusterQueue cq-team-a",
            3,
            last=965,
            count=4,
            component="trainjob-kueue-controller",
        ),
        event(
            "TrainJob",
            TRAINJOB,
            "Stopped",
            timeout,
            303,
            last=903,
            count=3,
            component="trainjob-kueue-controller",
        ),
        new_event(
            "Workload",
            wl["metadata"]["name"],
            "EvictedDueToPodsReadyTimeout",
            timeout,
            903,
            controller="kueue-admission",
            action="Evict",
            api_version="kueue.x-k8s.io/v1beta2",
        ),
    ]


@scenario
def app_error() -> list[dict[str, Any]]:
    return [
        *_failed_chain(1201),
        pod(
            0,
            suffix="g5h2k",
            node="gpu-node-1",
            phase="Failed",
            deletion=1201,
            containers=[container_status(terminated(143, 40, 1202))],
            conditions=ended_conditions(6, 45, 1202),
        ),
        pod(
            1,
            suffix="j8l4m",
            node="gpu-node-2",
            phase="Failed",
            containers=[
                container_status(
                    terminated(3, 40, 1200, message="ValueError: loss is NaN at step 4811")
                )
            ],
            conditions=ended_conditions(6, 45, 1200),
        ),
        pod(
            2,
            suffix="s1d6f",
            node="gpu-node-3",
            phase="Failed",
            containers=[
                container_status(
                    terminated(
                        1,
                        40,
                        1203,
                        message="torch.distributed.DistNetworkError: Connection reset by peer",
                    )
                )
            ],
            conditions=ended_conditions(6, 45, 1203),
        ),
        event(
            "Job",
            JOB0,
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            1201,
            type_="Warning",
            component="job-controller",
            api_version="batch/v1",
        ),
        event(
            "Job",
            JOB0,
            "SuccessfulDelete",
            f"Deleted pod: {JOB0}-0-g5h2k",
            1201,
            component="job-controller",
            api_version="batch/v1",
        ),
    ]


@scenario
def cancel() -> list[dict[str, Any]]:
    return [
        trainjob(
            jobs_status=jobs_status(active=1, ready=1),
            deletion=800,
            annotations={"dispatch.dev/cancelled-by": "alice"},
        ),
        jobset(rjs={"active": 1, "ready": 1}),
        _killed(0, "u3i8o", "gpu-node-1", 800),
        _killed(1, "y6t2r", "gpu-node-2", 800),
        event(
            "Pod",
            f"{JOB0}-0-u3i8o",
            "Killing",
            "Stopping container node",
            800,
            component="kubelet",
            host="gpu-node-1",
        ),
    ]


@scenario
def restart_in_place() -> list[dict[str, Any]]:
    return [
        trainjob(jobs_status=jobs_status(active=1, ready=1)),
        jobset(rjs={"active": 1, "ready": 1}),
        job(active=2, ready=2, failed=0),
        pod(
            0,
            suffix="o9p1a",
            node="gpu-node-1",
            phase="Running",
            containers=[
                container_status(
                    running(512),
                    last=terminated(
                        1,
                        40,
                        500,
                        message="RuntimeError: CUDA error: an illegal memory access was encountered",
                    ),
                    restarts=1,
                    ready=True,
                )
            ],
            conditions=running_conditions(6, 515),
        ),
        pod(
            1,
            suffix="k4j7h",
            node="gpu-node-2",
            phase="Running",
            containers=[container_status(running(40), ready=True)],
            conditions=running_conditions(6, 45),
        ),
        event(
            "Pod",
            f"{JOB0}-0-o9p1a",
            "BackOff",
            f"Back-off restarting failed container node in pod {JOB0}-0-o9p1a_ml-team(1b2c)",
            501,
            type_="Warning",
            component="kubelet",
            host="gpu-node-1",
        ),
    ]


@scenario
def replacement_pod() -> list[dict[str, Any]]:
    return [
        trainjob(jobs_status=jobs_status(active=1, ready=1)),
        jobset(rjs={"active": 1, "ready": 1}),
        job(active=2, ready=2, failed=1),
        pod(
            0,
            suffix="b8n3m",
            node="gpu-node-1",
            phase="Running",
            containers=[container_status(running(40), ready=True)],
            conditions=running_conditions(6, 45),
        ),
        pod(
            1,
            suffix="l2k5j",
            node="gpu-node-2",
            phase="Failed",
            containers=[
                container_status(
                    terminated(1, 40, 400, message="RuntimeError: NCCL communicator was aborted")
                )
            ],
            conditions=ended_conditions(6, 45, 400),
        ),
        pod(
            1,
            suffix="q8r2t",
            node="gpu-node-6",
            phase="Running",
            created=401,
            containers=[container_status(running(415), ready=True)],
            conditions=running_conditions(402, 420),
        ),
        event(
            "Job",
            JOB0,
            "SuccessfulCreate",
            f"Created pod: {JOB0}-1-q8r2t",
            401,
            component="job-controller",
            api_version="batch/v1",
        ),
    ]


@scenario
def jobset_restarts() -> list[dict[str, Any]]:
    return [
        trainjob(jobs_status=jobs_status(active=1, ready=1)),
        jobset(
            [cond("RestartingJobSet", "False", 640, "JobsReady", "all jobs are ready")],
            restarts=1,
            rjs={"active": 1, "ready": 1},
        ),
        job(active=2, ready=2, restart_attempt=1),
        pod(
            0,
            suffix="e4r5t",
            node="gpu-node-1",
            phase="Running",
            created=610,
            restart_attempt=1,
            containers=[container_status(running(625), ready=True)],
            conditions=running_conditions(611, 630),
        ),
        pod(
            1,
            suffix="y7u8i",
            node="gpu-node-2",
            phase="Running",
            created=610,
            restart_attempt=1,
            containers=[container_status(running(626), ready=True)],
            conditions=running_conditions(611, 631),
        ),
        event(
            "JobSet",
            TRAINJOB,
            "Restarting",
            f"applying RestartJobSet failure policy action (first failed job: {JOB0})",
            600,
            type_="Warning",
            component="jobset",
            api_version="jobset.x-k8s.io/v1alpha2",
        ),
    ]


@scenario
def vanished() -> list[dict[str, Any]]:
    """The pods were deleted with the failed JobSet; only events remain."""
    gone = f"{JOB0}-1-w3e4r"
    return [
        trainjob(
            [cond("Failed", "True", 1502, "FailedJobs", FAILED_JOBS)],
            jobs_status=jobs_status(failed=1),
        ),
        event(
            "Job",
            JOB0,
            "SuccessfulCreate",
            f"Created pod: {JOB0}-0-q1w2e",
            4,
            component="job-controller",
            api_version="batch/v1",
        ),
        event(
            "Job",
            JOB0,
            "SuccessfulCreate",
            f"Created pod: {gone}",
            4,
            component="job-controller",
            api_version="batch/v1",
        ),
        event(
            "Pod",
            gone,
            "Started",
            "Started container node",
            40,
            component="kubelet",
            host="gpu-node-2",
        ),
        event(
            "Pod",
            gone,
            "Preempted",
            "Preempted by pod 8a6f0c1e-2b4d-4f7a-9e3c-5d1b7a9c0e2f on node gpu-node-2",
            1500,
            component="default-scheduler",
        ),
        event(
            "Pod",
            gone,
            "Killing",
            "Stopping container node",
            1500,
            component="kubelet",
            host="gpu-node-2",
        ),
        event(
            "Pod",
            f"{JOB0}-0-q1w2e",
            "Killing",
            "Stopping container node",
            1501,
            component="kubelet",
            host="gpu-node-1",
        ),
        event(
            "Job",
            JOB0,
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            1501,
            type_="Warning",
            component="job-controller",
            api_version="batch/v1",
        ),
    ]


@scenario
def success() -> list[dict[str, Any]]:
    done = [
        cond("PodReadyToStartContainers", "False", 1801),
        cond("Initialized", "True", 7),
        cond("Ready", "False", 1801, "PodCompleted"),
        cond("ContainersReady", "False", 1801, "PodCompleted"),
        cond("PodScheduled", "True", 6),
    ]
    return [
        trainjob(
            [cond("Complete", "True", 1802, "AllJobsCompleted", "jobset completed successfully")],
            jobs_status=jobs_status(succeeded=1),
        ),
        jobset(
            [cond("Completed", "True", 1801, "AllJobsCompleted", "jobset completed successfully")],
            rjs={"succeeded": 1},
        ),
        job(
            [
                cond(
                    "SuccessCriteriaMet",
                    "True",
                    1800,
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                ),
                cond(
                    "Complete",
                    "True",
                    1801,
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                ),
            ],
            succeeded=2,
        ),
        pod(
            0,
            suffix="z1x2c",
            node="gpu-node-1",
            phase="Succeeded",
            containers=[container_status(terminated(0, 40, 1799, reason="Completed"))],
            conditions=done,
        ),
        pod(
            1,
            suffix="v3b4n",
            node="gpu-node-2",
            phase="Succeeded",
            containers=[container_status(terminated(0, 40, 1800, reason="Completed"))],
            conditions=done,
        ),
    ]


#: scenarios written as a multi-document stream instead of one ``kind: List``
STREAMS = {"vanished": "yaml", "success": "json"}


def render(name: str, items: list[dict[str, Any]]) -> str:
    style = STREAMS.get(name)
    if style == "json":
        return "".join(json.dumps(item, indent=4, sort_keys=True) + "\n" for item in items)
    if style == "yaml":
        return "".join("---\n" + yaml.safe_dump(item, sort_keys=True) for item in items)
    return yaml.safe_dump(kind_list(items), sort_keys=True)


def main() -> None:
    DUMPS.mkdir(exist_ok=True)
    for name, build in SCENARIOS.items():
        suffix = "json" if STREAMS.get(name) == "json" else "yaml"
        (DUMPS / f"{name}.{suffix}").write_text(render(name, build()))


if __name__ == "__main__":
    main()

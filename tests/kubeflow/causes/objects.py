"""Builders of Kubernetes objects shaped as ``kubectl get -o yaml`` prints them.

Used to write the dumps in ``tests/dumps/`` (``python -m tests.kubeflow.causes.dumpgen``) and
to build small evidence sets in unit tests. Reasons, messages and labels follow the platform
reference (Trainer, JobSet, the Job controller, the kubelet, Kueue); times are offsets in
seconds from ``T0``.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

T0 = datetime(2026, 8, 27, 10, 0, 0, tzinfo=UTC)
NAMESPACE = "ml-team"
JOB_ID = "mnist-ddp-x7k2p"
TRAINJOB = f"{JOB_ID}-1"
IMAGE = "registry.example.com/ml/mnist-ddp:2.7.1"


def ts(offset: float) -> str:
    """RFC 3339 time ``offset`` seconds after T0."""
    return (T0 + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch(offset: float) -> float:
    return (T0 + timedelta(seconds=offset)).timestamp()


def uid(*parts: str) -> str:
    h = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def rv(*seed: str) -> str:
    """A resourceVersion, deterministic from the object's identity."""
    return str(40000 + int(hashlib.sha256("/".join(seed).encode()).hexdigest()[:5], 16) % 90000)


def cond(
    kind: str, status: str, at: float, reason: str = "", message: str = "", **extra: Any
) -> dict[str, Any]:
    c: dict[str, Any] = {"type": kind, "status": status, "lastTransitionTime": ts(at)}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    c.update(extra)
    return c


def _meta(
    name: str, created: float, labels: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "creationTimestamp": ts(created),
        "name": name,
        "namespace": NAMESPACE,
        "resourceVersion": rv(name, str(created)),
        "uid": uid(name, str(created)),
    }
    if labels:
        meta["labels"] = labels
    meta.update(extra)
    return meta


def dispatch_labels(queue: str | None = None) -> dict[str, str]:
    labels = {
        "app.kubernetes.io/managed-by": "dispatch",
        "dispatch.dev/attempt": "1",
        "dispatch.dev/cluster": "prod",
        "dispatch.dev/job": JOB_ID,
    }
    if queue:
        labels["kueue.x-k8s.io/queue-name"] = queue
    return labels


def trainjob(
    conditions: list[dict[str, Any]] | None = None,
    *,
    name: str = TRAINJOB,
    nodes: int = 2,
    suspend: bool = False,
    queue: str | None = None,
    deadline: int | None = None,
    jobs_status: list[dict[str, Any]] | None = None,
    deletion: float | None = None,
    annotations: dict[str, str] | None = None,
    init_container: str | None = None,
) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "annotations": {
            "dispatch.dev/runtime": "ClusterTrainingRuntime/torch-dispatch",
            "dispatch.dev/spec-hash": "sha256:" + hashlib.sha256(name.encode()).hexdigest(),
            **(annotations or {}),
        },
        "generation": 1,
    }
    if deletion is not None:
        extra["deletionTimestamp"] = ts(deletion)
        extra["deletionGracePeriodSeconds"] = 0
        extra["finalizers"] = ["foregroundDeletion"]
    pod_patch: dict[str, Any] = {
        "metadata": {"labels": {"dispatch.dev/attempt": "1", "dispatch.dev/job": JOB_ID}}
    }
    if init_container:
        pod_patch["spec"] = {
            "initContainers": [
                {
                    "name": init_container,
                    "env": [
                        {"name": "DISPATCH_JOB", "value": JOB_ID},
                        {"name": "DISPATCH_ATTEMPT", "value": "1"},
                    ],
                }
            ]
        }
    spec: dict[str, Any] = {
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
        "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": name},
        "runtimePatches": [
            {
                "manager": "dispatch.dev/adapter",
                "time": ts(0),
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {"name": "node", "template": {"spec": {"template": pod_patch}}}
                            ]
                        }
                    }
                },
            }
        ],
        "suspend": suspend,
        "trainer": {
            "command": ["torchrun", "train.py"],
            "env": [
                {"name": "EPOCHS", "value": "3"},
                {"name": "DISPATCH_JOB", "value": JOB_ID},
                {"name": "DISPATCH_ATTEMPT", "value": "1"},
                {"name": "DISPATCH_CLUSTER", "value": "prod"},
            ],
            "image": IMAGE,
            "numNodes": nodes,
            "resourcesPerNode": {
                "limits": {"nvidia.com/gpu": "8"},
                "requests": {"nvidia.com/gpu": "8"},
            },
        },
    }
    if queue:
        spec["runtimePatches"].append({"manager": "kueue.x-k8s.io/manager", "time": ts(1)})
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    status: dict[str, Any] = {}
    if conditions:
        status["conditions"] = conditions
    if jobs_status is not None:
        status["jobsStatus"] = jobs_status
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": _meta(name, 0, dispatch_labels(queue), **extra),
        "spec": spec,
        **({"status": status} if status else {}),
    }


def jobs_status(
    active: int = 0, ready: int = 0, succeeded: int = 0, failed: int = 0
) -> list[dict[str, Any]]:
    return [
        {
            "active": active,
            "failed": failed,
            "name": "node",
            "ready": ready,
            "succeeded": succeeded,
            "suspended": 0,
        }
    ]


def jobset(
    conditions: list[dict[str, Any]] | None = None,
    *,
    name: str = TRAINJOB,
    created: float = 2,
    restarts: int = 0,
    rjs: dict[str, int] | None = None,
    uid_seed: str = "",
) -> dict[str, Any]:
    meta = _meta(
        name, created, {"dispatch.dev/attempt": "1", "dispatch.dev/job": JOB_ID}, generation=1
    )
    meta["uid"] = uid("jobset", name, uid_seed)
    meta["ownerReferences"] = [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "blockOwnerDeletion": True,
            "controller": True,
            "kind": "TrainJob",
            "name": name,
            "uid": uid(name, "0"),
        }
    ]
    counts = {"active": 0, "failed": 0, "ready": 0, "succeeded": 0, "suspended": 0, **(rjs or {})}
    status: dict[str, Any] = {
        "replicatedJobsStatus": [{"name": "node", **counts}],
        "restarts": restarts,
    }
    if conditions:
        status["conditions"] = conditions
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {
            "network": {
                "enableDNSHostnames": True,
                "publishNotReadyAddresses": True,
                "subdomain": name,
            },
            "replicatedJobs": [
                {
                    "name": "node",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "backoffLimit": 0,
                            "completionMode": "Indexed",
                            "completions": 2,
                            "parallelism": 2,
                        }
                    },
                }
            ],
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            "successPolicy": {"operator": "All"},
            "suspend": False,
        },
        "status": status,
    }


def job(
    conditions: list[dict[str, Any]] | None = None,
    *,
    trainjob_name: str = TRAINJOB,
    nodes: int = 2,
    restart_attempt: int = 0,
    **counts: int,
) -> dict[str, Any]:
    name = f"{trainjob_name}-node-0"
    labels = jobset_labels(trainjob_name, restart_attempt)
    labels["trainer.kubeflow.org/trainjob-ancestor-step"] = "trainer"
    status: dict[str, Any] = {
        "active": 0,
        "ready": 0,
        "failed": 0,
        "succeeded": 0,
        "terminating": 0,
        **counts,
    }
    status["startTime"] = ts(5)
    if conditions:
        status["conditions"] = conditions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, 3, labels, generation=1),
        "spec": {
            "backoffLimit": 0,
            "completionMode": "Indexed",
            "completions": nodes,
            "parallelism": nodes,
            "podReplacementPolicy": "TerminatingOrFailed",
            "suspend": False,
        },
        "status": status,
    }


def jobset_labels(trainjob_name: str = TRAINJOB, restart_attempt: int = 0) -> dict[str, str]:
    return {
        "jobset.sigs.k8s.io/global-replicas": "1",
        "jobset.sigs.k8s.io/job-global-index": "0",
        "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/jobset-name": trainjob_name,
        "jobset.sigs.k8s.io/jobset-uid": uid("jobset", trainjob_name, ""),
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
        "jobset.sigs.k8s.io/restart-attempt": str(restart_attempt),
        "trainer.kubeflow.org/trainjob-name": trainjob_name,
    }


def terminated(
    exit_code: int, started: float, finished: float, reason: str = "Error", message: str = ""
) -> dict[str, Any]:
    t: dict[str, Any] = {
        "containerID": f"containerd://{uid('c', str(started), str(finished))[:32]}",
        "exitCode": exit_code,
        "finishedAt": ts(finished),
        "reason": reason,
        "startedAt": ts(started),
    }
    if message:
        t["message"] = message
    return {"terminated": t}


def running(started: float) -> dict[str, Any]:
    return {"running": {"startedAt": ts(started)}}


def waiting(reason: str, message: str = "") -> dict[str, Any]:
    w: dict[str, Any] = {"reason": reason}
    if message:
        w["message"] = message
    return {"waiting": w}


def container_status(
    state: dict[str, Any],
    *,
    last: dict[str, Any] | None = None,
    restarts: int = 0,
    ready: bool = False,
    name: str = "node",
) -> dict[str, Any]:
    started = "running" in state
    s: dict[str, Any] = {
        "image": IMAGE,
        "imageID": "registry.example.com/ml/mnist-ddp@sha256:"
        + hashlib.sha256(IMAGE.encode()).hexdigest(),
        "lastState": last or {},
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "started": started,
        "state": state,
    }
    if "waiting" in state:
        s.pop("imageID")
    else:
        s["containerID"] = f"containerd://{uid(name, str(state))[:32]}"
    return s


def pod(
    index: int,
    *,
    suffix: str,
    node: str | None,
    phase: str,
    containers: list[dict[str, Any]],
    conditions: list[dict[str, Any]],
    created: float = 4,
    trainjob_name: str = TRAINJOB,
    restart_attempt: int = 0,
    deletion: float | None = None,
    grace: int = 30,
    reason: str | None = None,
    message: str | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    host_ip: str = "10.0.3.17",
) -> dict[str, Any]:
    job_name = f"{trainjob_name}-node-0"
    name = f"{job_name}-{index}-{suffix}"
    labels = {
        **jobset_labels(trainjob_name, restart_attempt),
        "batch.kubernetes.io/controller-uid": uid(job_name, "3"),
        "batch.kubernetes.io/job-completion-index": str(index),
        "batch.kubernetes.io/job-name": job_name,
        "controller-uid": uid(job_name, "3"),
        "dispatch.dev/attempt": "1",
        "dispatch.dev/job": JOB_ID,
        "job-name": job_name,
    }
    extra: dict[str, Any] = {
        "annotations": {
            "batch.kubernetes.io/job-completion-index": str(index),
            "jobset.sigs.k8s.io/jobset-name": trainjob_name,
        },
        "generateName": f"{job_name}-{index}-",
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "Job",
                "name": job_name,
                "uid": uid(job_name, "3"),
            }
        ],
    }
    if deletion is not None:
        extra["deletionTimestamp"] = ts(deletion + grace)
        extra["deletionGracePeriodSeconds"] = grace
    spec: dict[str, Any] = {
        "containers": [
            {
                "command": ["torchrun", "train.py"],
                "image": IMAGE,
                "name": "node",
                "ports": [{"containerPort": 29500, "protocol": "TCP"}],
                "resources": {
                    "limits": {"nvidia.com/gpu": "8"},
                    "requests": {"nvidia.com/gpu": "8"},
                },
            }
        ],
        "hostname": f"{trainjob_name}-node-0-{index}",
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "subdomain": trainjob_name,
        "terminationGracePeriodSeconds": grace,
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"conditions": conditions, "phase": phase, "qosClass": "Burstable"}
    if containers:
        status["containerStatuses"] = containers
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    if node:
        status["hostIP"] = host_ip
        status["podIP"] = f"10.244.{index + 1}.{12 + index}"
        status["startTime"] = ts(created + 1)
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, created, labels, **extra),
        "spec": spec,
        "status": status,
    }


def running_conditions(scheduled: float, ready: float) -> list[dict[str, Any]]:
    return [
        cond("PodReadyToStartContainers", "True", scheduled + 2),
        cond("Initialized", "True", scheduled + 1),
        cond("Ready", "True", ready),
        cond("ContainersReady", "True", ready),
        cond("PodScheduled", "True", scheduled),
    ]


def ended_conditions(
    scheduled: float, ready: float, ended: float, reason: str = "PodFailed"
) -> list[dict[str, Any]]:
    return [
        cond("PodReadyToStartContainers", "False" if reason == "PodFailed" else "True", ended),
        cond("Initialized", "True", scheduled + 1),
        cond("Ready", "False", ended, reason),
        cond("ContainersReady", "False", ended, reason),
        cond("PodScheduled", "True", scheduled),
    ]


def event(
    kind: str,
    name: str,
    reason: str,
    message: str,
    first: float,
    *,
    last: float | None = None,
    count: int = 1,
    type_: str = "Normal",
    component: str = "",
    api_version: str = "v1",
    host: str | None = None,
) -> dict[str, Any]:
    """A ``core/v1`` Event as ``kubectl get events -o yaml`` prints it."""
    involved = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid(name, kind)}
    if kind != "Node":
        involved["namespace"] = NAMESPACE
    source: dict[str, Any] = {"component": component} if component else {}
    if host:
        source["host"] = host
    digest = hashlib.sha256(f"{name}{reason}{first}".encode()).hexdigest()[:16]
    return {
        "apiVersion": "v1",
        "count": count,
        "firstTimestamp": ts(first),
        "involvedObject": involved,
        "kind": "Event",
        "lastTimestamp": ts(last if last is not None else first),
        "message": message,
        "metadata": {
            "creationTimestamp": ts(first),
            "name": f"{name}.{digest}",
            "namespace": NAMESPACE if kind != "Node" else "default",
            "resourceVersion": rv("event", name, reason, str(first)),
            "uid": uid("event", name, reason, str(first)),
        },
        "reason": reason,
        "reportingComponent": component,
        "reportingInstance": "",
        "source": source,
        "type": type_,
    }


def new_event(
    kind: str,
    name: str,
    reason: str,
    note: str,
    at: float,
    *,
    controller: str,
    action: str,
    type_: str = "Normal",
    api_version: str = "v1",
) -> dict[str, Any]:
    """An ``events.k8s.io/v1`` Event (``kubectl get events.v1.events.k8s.io -o yaml``)."""
    digest = hashlib.sha256(f"{name}{reason}{at}".encode()).hexdigest()[:16]
    return {
        "action": action,
        "apiVersion": "events.k8s.io/v1",
        "eventTime": (T0 + timedelta(seconds=at)).strftime("%Y-%m-%dT%H:%M:%S.000000Z"),
        "kind": "Event",
        "metadata": {
            "creationTimestamp": ts(at),
            "name": f"{name}.{digest}",
            "namespace": NAMESPACE,
            "resourceVersion": rv("ev2", name, reason, str(at)),
            "uid": uid("ev2", name, reason),
        },
        "note": note,
        "reason": reason,
        "regarding": {
            "apiVersion": api_version,
            "kind": kind,
            "name": name,
            "namespace": NAMESPACE,
            "uid": uid(name, kind),
        },
        "reportingController": controller,
        "reportingInstance": f"{controller}-7d9f8c6b5-x2x9z",
        "type": type_,
    }


def workload(
    conditions: list[dict[str, Any]],
    *,
    trainjob_name: str = TRAINJOB,
    queue: str = "team-a",
    admitted_cq: str | None = "cq-team-a",
    evictions: list[dict[str, Any]] | None = None,
    requeues: int | None = None,
) -> dict[str, Any]:
    h = hashlib.sha256(trainjob_name.encode()).hexdigest()[:5]
    name = f"trainjob-{trainjob_name}-{h}"
    labels = {"kueue.x-k8s.io/job-uid": uid(trainjob_name, "0")}
    extra = {
        "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        "generation": 1,
        "ownerReferences": [
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "TrainJob",
                "name": trainjob_name,
                "uid": uid(trainjob_name, "0"),
            }
        ],
    }
    status: dict[str, Any] = {"conditions": conditions}
    if admitted_cq:
        status["admission"] = {
            "clusterQueue": admitted_cq,
            "podSetAssignments": [
                {
                    "count": 2,
                    "flavors": {"nvidia.com/gpu": "h100"},
                    "name": "node",
                    "resourceUsage": {"nvidia.com/gpu": "16"},
                }
            ],
        }
    if evictions:
        status["schedulingStats"] = {"evictions": evictions}
    if requeues is not None:
        status["requeueState"] = {"count": requeues}
    status["resourceRequests"] = [{"name": "node", "resources": {"nvidia.com/gpu": "16"}}]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": _meta(name, 1, labels, **extra),
        "spec": {
            "active": True,
            "podSets": [{"count": 2, "name": "node"}],
            "priority": 0,
            "queueName": queue,
        },
        "status": status,
    }


def node(
    name: str, ready: dict[str, Any], *, taints: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    meta = {
        "creationTimestamp": ts(-86400),
        "labels": {
            "kubernetes.io/hostname": name,
            "node.kubernetes.io/instance-type": "p5.48xlarge",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        },
        "name": name,
        "resourceVersion": rv("node", name),
        "uid": uid("node", name),
    }
    spec: dict[str, Any] = {
        "providerID": f"aws:///us-east-1a/i-0{hashlib.sha256(name.encode()).hexdigest()[:16]}"
    }
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": spec,
        "status": {
            "allocatable": {
                "cpu": "191450m",
                "memory": "2097152000Ki",
                "nvidia.com/gpu": "8",
                "pods": "110",
            },
            "conditions": [
                cond(
                    "MemoryPressure",
                    "False",
                    -86000,
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                    lastHeartbeatTime=ts(-60),
                ),
                cond(
                    "DiskPressure",
                    "False",
                    -86000,
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                    lastHeartbeatTime=ts(-60),
                ),
                ready,
            ],
        },
    }


def kind_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}

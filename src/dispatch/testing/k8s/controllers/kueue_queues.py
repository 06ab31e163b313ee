"""Kueue's configuration as the emulator models it, its webhooks, and workload resource sums.

The controller reads only Kueue's objects (ClusterQueue, LocalQueue, ResourceFlavor,
WorkloadPriorityClass), as Kueue does. :class:`KueueConfig` is a shorthand for tests: its
queues and priority classes are created as those objects when the cluster starts
(:meth:`KueueConfig.objects`), so a test that writes them in Python and one that creates them
through the API see the same cluster. What is Kueue's own configuration
(``waitForPodsReady``) stays here, as it is in Kueue's ConfigMap, not in an object.

The webhook applies the CRD defaults of ``apis/kueue/v1beta2`` (kubernetes-sigs/kueue v0.17)
that the scheduler relies on (``queueingStrategy: BestEffortFIFO``, ``preemption`` all
``Never``, ``stopPolicy: None``) and suspends a queued TrainJob on creation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.controllers.placement import pod_requests
from dispatch.testing.k8s.errors import FieldError

JsonObj = dict[str, Any]
KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MANAGER = "kueue.x-k8s.io/manager"
FLAVOR = "default"


@dataclass(frozen=True)
class ClusterQueue:
    """A ClusterQueue with one flavor and the LocalQueues (by name, in every namespace the
    cluster starts with) that point at it."""

    name: str
    quota: Mapping[str, str]  # nominal quota of the one flavor, e.g. {"cpu": "8"}
    local_queues: tuple[str, ...] = ()
    #: ``spec.preemption.withinClusterQueue``: ``Never`` (Kueue's default), ``LowerPriority``
    #: or ``LowerOrNewerEqualPriority``
    within_cluster_queue: str = "Never"
    flavor: str = FLAVOR
    queueing_strategy: str = "BestEffortFIFO"


@dataclass
class KueueConfig:
    cluster_queues: tuple[ClusterQueue, ...] = ()
    #: WorkloadPriorityClasses by name -> value
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    #: ``waitForPodsReady.enable``: Kueue keeps a ``PodsReady`` condition on Workloads
    wait_for_pods_ready: bool = False
    #: ``waitForPodsReady.recoveryTimeout`` (emulated seconds; enables ``waitForPodsReady``):
    #: a workload whose pods had all been ready and are not again within it is evicted
    #: (``PodsReadyTimeout``); None: off
    recovery_timeout: float | None = None

    @property
    def pods_ready_enabled(self) -> bool:
        return self.wait_for_pods_ready or self.recovery_timeout is not None

    def objects(self, namespaces: Iterable[str]) -> list[JsonObj]:
        """The ResourceFlavors, ClusterQueues, LocalQueues (one per namespace) and
        WorkloadPriorityClasses this configuration stands for. Every namespace may submit
        (``namespaceSelector: {}``)."""
        namespaces = tuple(namespaces)
        out: list[JsonObj] = []
        for flavor in sorted({q.flavor for q in self.cluster_queues}):
            out.append(_obj("ResourceFlavor", flavor))
        for q in self.cluster_queues:
            resources = [{"name": r, "nominalQuota": v} for r, v in q.quota.items()]
            spec = {
                "namespaceSelector": {},
                "queueingStrategy": q.queueing_strategy,
                "preemption": {"withinClusterQueue": q.within_cluster_queue},
                "resourceGroups": [
                    {
                        "coveredResources": list(q.quota),
                        "flavors": [{"name": q.flavor, "resources": resources}],
                    }
                ],
            }
            out.append({**_obj("ClusterQueue", q.name), "spec": spec})
            for local in q.local_queues:
                out += [
                    {**_obj("LocalQueue", local, ns), "spec": {"clusterQueue": q.name}}
                    for ns in namespaces
                ]
        for name, value in self.priority_classes.items():
            out.append({**_obj("WorkloadPriorityClass", name), "value": value})
        return out


def _obj(kind: str, name: str, namespace: str | None = None) -> JsonObj:
    meta: JsonObj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": KUEUE_API, "kind": kind, "metadata": meta}


#: ``+kubebuilder:default`` markers of ClusterQueueSpec (v1beta2) the scheduler reads
_CLUSTER_QUEUE_DEFAULTS: JsonObj = {
    "queueingStrategy": "BestEffortFIFO",
    "stopPolicy": "None",
    "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
    "preemption": {
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
        "borrowWithinCohort": {"policy": "Never"},
    },
}


def _default(obj: JsonObj, defaults: JsonObj) -> None:
    for key, value in defaults.items():
        if isinstance(value, dict):
            if obj.get(key) is None:
                obj[key] = {}
            if isinstance(obj[key], dict):
                _default(obj[key], value)
        elif obj.get(key) is None:
            obj[key] = value


class KueueWebhook:
    """Kueue's TrainJob webhook (suspend on create, an empty runtimePatch of its manager) and
    the API server's structural defaults of Kueue's queue CRDs."""

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        kind = request.rtype.kind
        if request.subresource or (request.rtype.group != "kueue.x-k8s.io" and kind != "TrainJob"):
            return []
        if kind == "ClusterQueue":
            _default(request.obj.setdefault("spec", {}), _CLUSTER_QUEUE_DEFAULTS)
        elif kind == "LocalQueue":
            _default(request.obj.setdefault("spec", {}), {"stopPolicy": "None"})
        elif kind == "TrainJob" and request.operation == "CREATE":
            labels = request.obj["metadata"].get("labels") or {}
            if QUEUE_LABEL in labels:
                spec = request.obj.setdefault("spec", {})
                spec["suspend"] = True
                patches = spec.setdefault("runtimePatches", [])
                if not any(p.get("manager") == MANAGER for p in patches):
                    patches.append({"manager": MANAGER})
        return []


def pod_set_requests(pod_set: JsonObj) -> dict[str, int]:
    """What a Workload pod set asks in all (per pod times ``count``), scheduler units."""
    per_pod = pod_requests(pod_set.get("template") or {})
    count = int(pod_set.get("count", 1))
    return {r: v * count for r, v in per_pod.items()}


def requests_of(wl: JsonObj) -> dict[str, int]:
    return total([pod_set_requests(ps) for ps in wl["spec"].get("podSets") or []])


def total(items: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        for r, v in item.items():
            out[r] = out.get(r, 0) + v
    return out

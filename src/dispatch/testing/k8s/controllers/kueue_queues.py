"""Kueue's configuration as the emulator models it (ClusterQueues with one flavor, local
queues, priority classes), its TrainJob webhook, and workload resource sums."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.controllers.scheduler import pod_requests
from dispatch.testing.k8s.errors import FieldError

JsonObj = dict[str, Any]
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MANAGER = "kueue.x-k8s.io/manager"
FLAVOR = "default"


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    quota: Mapping[str, str]  # nominal quota of the one flavor, e.g. {"cpu": "8"}
    local_queues: tuple[str, ...] = ()


@dataclass
class KueueConfig:
    cluster_queues: tuple[ClusterQueue, ...] = ()
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    #: ``waitForPodsReady.recoveryTimeout`` (emulated seconds): a workload whose pods had all
    #: been ready and are not again within it is evicted (``PodsReadyTimeout``); None: off
    recovery_timeout: float | None = None

    def queue_for(self, local: str) -> ClusterQueue | None:
        return next((q for q in self.cluster_queues if local in q.local_queues), None)


class KueueWebhook:
    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        if request.operation != "CREATE" or request.rtype.kind != "TrainJob" or request.subresource:
            return []
        labels = request.obj["metadata"].get("labels") or {}
        if QUEUE_LABEL in labels:
            spec = request.obj.setdefault("spec", {})
            spec["suspend"] = True
            patches = spec.setdefault("runtimePatches", [])
            if not any(p.get("manager") == MANAGER for p in patches):
                patches.append({"manager": MANAGER})
        return []


def requests_of(wl: JsonObj) -> dict[str, int]:
    total: dict[str, int] = {}
    for ps in wl["spec"].get("podSets") or []:
        per_pod = pod_requests(ps.get("template") or {})
        for r, v in per_pod.items():
            total[r] = total.get(r, 0) + v * int(ps.get("count", 1))
    return total


def total(items: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        for r, v in item.items():
            out[r] = out.get(r, 0) + v
    return out

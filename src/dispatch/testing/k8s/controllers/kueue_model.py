"""Kueue's queue objects as its cache sees them: a ClusterQueue read into a frozen value
(resource groups with each flavor's nominal quota, namespace selector, queueing strategy,
``withinClusterQueue`` policy), whether it is active, and the status rows Kueue writes.

Ground truth, kubernetes-sigs/kueue v0.17: ``apis/kueue/v1beta2/clusterqueue_types.go`` (the
CRD defaults, a missing ``namespaceSelector`` selects no namespace), ``pkg/cache/scheduler``
(``clusterqueue.go`` ``inactiveReason``, ``cache.go`` ``Usage``/``getUsage``/
``LocalQueueUsage``) and ``pkg/resources/requests.go`` (``ResourceQuantity``: how usage is
printed). Cohorts are not modelled: a ClusterQueue never borrows or lends, so
``borrowingLimit`` is read but never used and ``borrowed`` is always ``"0"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.testing.k8s.controllers.placement import milli
from dispatch.testing.k8s.selectors import LabelSelector

JsonObj = dict[str, Any]
#: usage or quota of one resource of one flavor, in the scheduler's units (cpu in millicores)
FlavorResource = tuple[str, str]

NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL = "LowerOrNewerEqualPriority"
STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"


@dataclass(frozen=True)
class Flavor:
    name: str
    nominal: Mapping[str, int]  # resource -> nominal quota
    borrowing_limit: Mapping[str, int]  # read for completeness; no cohort lends to it


@dataclass(frozen=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[Flavor, ...]


@dataclass(frozen=True)
class QueueSpec:
    """One ClusterQueue as the scheduler uses it."""

    name: str
    groups: tuple[ResourceGroup, ...]
    #: None: no ``namespaceSelector``, which selects no namespace (the v1beta2 API's rule)
    selector: LabelSelector | None
    strategy: str
    within_cluster_queue: str
    missing_flavors: tuple[str, ...]
    stopped: bool

    @property
    def active(self) -> bool:
        return not self.missing_flavors and not self.stopped

    def group_of(self, resource: str) -> ResourceGroup | None:
        return next((g for g in self.groups if resource in g.covered), None)

    def admits_namespace(self, labels: Mapping[str, str] | None) -> bool:
        return self.selector is not None and self.selector.matches(labels)

    def active_condition(self) -> tuple[str, str, str]:
        """(status, reason, message) of the ``Active`` condition, as ``inactiveReason``."""
        if self.active:
            return "True", "Ready", "Can admit new workloads"
        reasons, messages = [], []
        if self.stopped:
            reasons.append("Stopped")
            messages.append("is stopped")
        if self.missing_flavors:
            reasons.append("FlavorNotFound")
            messages.append(
                f"references missing ResourceFlavor(s): {','.join(self.missing_flavors)}"
            )
        return "False", reasons[0], f"Can't admit new workloads: {', '.join(messages)}."


def read_cluster_queue(obj: JsonObj, flavors: set[str]) -> QueueSpec:
    """``obj`` (a stored ClusterQueue, its CRD defaults applied) against the names of the
    ResourceFlavors that exist."""
    spec = obj.get("spec") or {}
    groups = []
    for group in spec.get("resourceGroups") or []:
        covered = tuple(str(r) for r in group.get("coveredResources") or [])
        fl = []
        for flavor in group.get("flavors") or []:
            nominal, limit = {}, {}
            for res in flavor.get("resources") or []:
                name = str(res.get("name", ""))
                nominal[name] = milli(res.get("nominalQuota", 0), name)
                if res.get("borrowingLimit") is not None:
                    limit[name] = milli(res["borrowingLimit"], name)
            fl.append(Flavor(str(flavor.get("name", "")), nominal, limit))
        groups.append(ResourceGroup(covered, tuple(fl)))
    named = [f.name for g in groups for f in g.flavors]
    selector = spec.get("namespaceSelector")
    preemption = spec.get("preemption") or {}
    return QueueSpec(
        name=obj["metadata"]["name"],
        groups=tuple(groups),
        selector=None if selector is None else LabelSelector.from_dict(selector),
        strategy=spec.get("queueingStrategy") or BEST_EFFORT_FIFO,
        within_cluster_queue=preemption.get("withinClusterQueue") or NEVER,
        missing_flavors=tuple(sorted({n for n in named if n not in flavors})),
        stopped=(spec.get("stopPolicy") or "None") != "None",
    )


def quantity_text(resource: str, value: int) -> str:
    """``value`` as Kueue prints a usage (``resources.ResourceQuantity``): cpu from
    millicores (``4``, ``1500m``), memory in binary units when exact (``32Gi``), anything
    else as a canonical decimal quantity (``8``, ``2k``)."""
    if resource == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    binary = resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")
    if value and binary and value % 1024 == 0:
        for suffix, size in _BINARY:
            if value % size == 0:
                return f"{value // size}{suffix}"
    for suffix, size in _DECIMAL:
        if value and value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_DECIMAL = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def usage_rows(
    queue: QueueSpec, usage: Mapping[FlavorResource, int], *, borrowed: bool
) -> list[JsonObj]:
    """``flavorsUsage``/``flavorsReservation``: every flavor of every group, resources sorted
    by name; ClusterQueue rows carry ``borrowed`` (always 0 without a cohort), LocalQueue
    rows do not."""
    rows = []
    for group in queue.groups:
        for flavor in group.flavors:
            resources = []
            for r in sorted(group.covered):
                row: JsonObj = {
                    "name": r,
                    "total": quantity_text(r, usage.get((flavor.name, r), 0)),
                }
                if borrowed:
                    row["borrowed"] = "0"
                resources.append(row)
            rows.append({"name": flavor.name, "resources": resources})
    return rows

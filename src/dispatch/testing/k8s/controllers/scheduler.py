"""kube-scheduler, reduced: binds pending pods to Ready nodes with room, or says why not.

A pod with ``schedulingGates`` gets ``PodScheduled=False/SchedulingGated``. Otherwise the first
node (by name) whose allocatable cpu, memory, GPUs and pod count cover the pod's requests, whose
labels match its ``nodeSelector`` and whose ``NoSchedule`` taints it tolerates gets it
(``spec.nodeName``, ``PodScheduled=True``). No node: ``PodScheduled=False/Unschedulable`` with
the scheduler's message (``0/N nodes are available: ...``) and a ``FailedScheduling`` event.
A pod of a gang (:mod:`.gangs`) is bound only together with its siblings: once its PodGroup's
``minMember`` pods can all be placed at once, all are bound; until then each stays pending
with the message the gang's scheduler gives (scheduler-plugins' coscheduling PreFilter /
PostFilter, or Volcano's gang plugin, which also writes the PodGroup's ``Pending`` /
``Inqueue`` phase and ``Unschedulable`` condition).
:meth:`preempt` evicts a pod as scheduler preemption does (``DisruptionTarget`` reason
``PreemptionByScheduler``, event ``Preempted``, deletion).
"""

from __future__ import annotations

import copy
from typing import Any

from dispatch.testing.k8s.controllers import gang_scheduling
from dispatch.testing.k8s.controllers.base import (
    Key,
    Reconciler,
    record_event,
    set_condition,
    write_status,
)
from dispatch.testing.k8s.controllers.placement import (
    RESOURCES,
    NodeUsage,
    milli,
    pod_requests,
)
from dispatch.testing.k8s.rbac import UserInfo
from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
__all__ = ["RESOURCES", "Scheduler", "milli", "pod_requests", "tolerates"]


def tolerates(pod: JsonObj, taint: JsonObj) -> bool:
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value") == taint.get("value"):
            return True
    return False


class Scheduler(Reconciler):
    name = "scheduler"
    user = UserInfo("system:kube-scheduler", ("system:authenticated",))
    watches = (
        ("v1", "Pod"),
        ("v1", "Node"),
        (gang_scheduling.COSCHEDULING_API, "PodGroup"),
        (gang_scheduling.VOLCANO_API, "PodGroup"),
    )

    def __init__(self) -> None:
        super().__init__()
        self._usage: NodeUsage | None = None

    def keys(self, change: Change) -> list[Key]:
        if change.rtype.kind == "PodGroup":
            return gang_scheduling.unbound_members(self, change)
        if change.rtype.kind == "Node":
            return [
                (p["metadata"]["namespace"], p["metadata"]["name"])
                for p in self.cluster.store.objects(self.rtype("v1", "Pod"))
                if not (p.get("spec") or {}).get("nodeName")
            ]
        if (change.obj.get("spec") or {}).get("nodeName"):
            return []
        return [(change.namespace, change.name)]

    def reconcile(self, key: Key) -> float | None:
        pod = self.find("v1", "Pod", *key)
        if pod is None or pod["metadata"].get("deletionTimestamp") or pod["spec"].get("nodeName"):
            return None
        status = copy.deepcopy(pod.get("status") or {})
        conds = status.setdefault("conditions", [])
        now = self.now()
        if pod["spec"].get("schedulingGates"):
            set_condition(conds, "PodScheduled", "False", "SchedulingGated",
                          "Scheduling is blocked due to non-empty scheduling gates", now)  # fmt: skip
            write_status(self.cluster, self.rtype("v1", "Pod"), pod, status)
            return None
        gang = gang_scheduling.gang_of(pod)
        if gang is not None:
            return gang_scheduling.schedule(self, gang)
        node, why = self.choose(pod)
        if node is None:
            self.unschedulable(pod, why)
            return None
        self.bind(pod, node)
        return None

    def unschedulable(self, pod: JsonObj, why: str, component: str = "default-scheduler") -> None:
        """``PodScheduled=False/Unschedulable`` with ``why``; a ``FailedScheduling`` event when
        the message changes."""
        status = copy.deepcopy(pod.get("status") or {})
        conds = status.setdefault("conditions", [])
        old = next((c for c in conds if c["type"] == "PodScheduled"), None)
        if set_condition(conds, "PodScheduled", "False", "Unschedulable", why, self.now()) and (
            old is None or old.get("message") != why
        ):
            record_event(self.cluster, pod, "Warning", "FailedScheduling", why, component)
        for c in conds:
            c["lastProbeTime"] = None
        write_status(self.cluster, self.rtype("v1", "Pod"), pod, status)

    def bind(self, pod: JsonObj, node: str, component: str = "default-scheduler") -> None:
        """Bind ``pod`` to ``node`` (``PodScheduled=True``, a ``Scheduled`` event) through
        the ``binding`` subresource, as kube-scheduler does: a pod's spec is otherwise
        immutable (:func:`~dispatch.testing.k8s.workloads.pod_update_errors`)."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        pod_type = self.rtype("v1", "Pod")
        status = copy.deepcopy(pod.get("status") or {})
        conds = status.setdefault("conditions", [])
        now = self.now()
        # the pods/binding subresource: the one write that may set spec.nodeName
        bound = self.cluster.store.update(
            pod_type,
            key[0],
            key[1],
            {**pod, "spec": {**pod["spec"], "nodeName": node}},
            subresource="binding",
            copy=False,  # read only below
        )
        set_condition(conds, "PodScheduled", "True", "", "", now)
        for c in conds:
            c["lastProbeTime"] = None
            if c["type"] == "PodScheduled" and c["status"] == "True":
                c.pop("reason", None)
                c.pop("message", None)
        write_status(self.cluster, pod_type, bound, status)
        record_event(self.cluster, bound, "Normal", "Scheduled",
                     f"Successfully assigned {key[0]}/{key[1]} to {node}", component)  # fmt: skip

    def nodes(self) -> list[JsonObj]:
        """Every node, by name."""
        found = self.cluster.store.objects(self.rtype("v1", "Node"))
        return sorted(found, key=lambda n: n["metadata"]["name"])

    def usage(self) -> dict[str, dict[str, int]]:
        """Per node: what its bound, unfinished pods request (and how many there are); a
        copy the caller may change."""
        store = self.cluster.store
        if self._usage is None or self._usage.store is not store:
            self._usage = NodeUsage(store, self.rtype("v1", "Pod"))
        return self._usage.usage()

    def choose(
        self, pod: JsonObj, used: dict[str, dict[str, int]] | None = None
    ) -> tuple[str | None, str]:
        """The first node that fits ``pod`` given ``used`` (default: the bound pods), or why
        none does (``0/N nodes are available: ...``)."""
        nodes = self.nodes()
        used = self.usage() if used is None else used
        wanted = pod_requests(pod)
        reasons: dict[str, int] = {}
        selector = pod["spec"].get("nodeSelector") or {}
        for node in nodes:
            why = self._misfit(node, pod, selector, wanted, used.get(node["metadata"]["name"], {}))
            if why is None:
                return node["metadata"]["name"], ""
            reasons[why] = reasons.get(why, 0) + 1
        detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        return None, f"0/{len(nodes)} nodes are available: {detail}."

    def _misfit(
        self,
        node: JsonObj,
        pod: JsonObj,
        selector: dict[str, str],
        wanted: dict[str, int],
        used: dict[str, int],
    ) -> str | None:
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in selector.items()):
            return "node(s) didn't match Pod's node affinity/selector"
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(pod, taint):
                return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
        alloc = (node.get("status") or {}).get("allocatable") or {}
        for r in RESOURCES:
            if wanted[r] and used.get(r, 0) + wanted[r] > milli(alloc.get(r, 0), r):
                return f"Insufficient {r}"
        if used.get("pods", 0) + 1 > int(alloc.get("pods", 110)):
            return "Too many pods"
        return None

    def misfits(self, pod: JsonObj, used: dict[str, dict[str, int]]) -> dict[str, int]:
        """Why each node cannot take ``pod``: reason -> number of nodes (empty: one can)."""
        reasons: dict[str, int] = {}
        wanted = pod_requests(pod)
        selector = pod["spec"].get("nodeSelector") or {}
        for node in self.nodes():
            why = self._misfit(node, pod, selector, wanted, used.get(node["metadata"]["name"], {}))
            if why is not None:
                reasons[why] = reasons.get(why, 0) + 1
        return reasons

    def preempt(self, namespace: str, name: str) -> None:
        """Evict a pod as scheduler preemption does."""
        pod = self.find("v1", "Pod", namespace, name)
        if pod is None:
            return
        status = copy.deepcopy(pod.get("status") or {})
        set_condition(status.setdefault("conditions", []), "DisruptionTarget", "True", "PreemptionByScheduler",
                      "default-scheduler: preempting to accommodate a higher priority pod", self.now())  # fmt: skip
        pod = write_status(self.cluster, self.rtype("v1", "Pod"), pod, status)
        node = pod["spec"].get("nodeName", "")
        record_event(self.cluster, pod, "Normal", "Preempted",
                     f"Preempted by pod on node {node}", "default-scheduler")  # fmt: skip
        self.cluster.store.delete(self.rtype("v1", "Pod"), namespace, name)

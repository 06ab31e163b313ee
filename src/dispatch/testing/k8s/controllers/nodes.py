"""Node lifecycle: a node going NotReady, taint-based eviction, pod garbage collection, and
the scenario's cluster-event timeline.

* :meth:`NodeLifecycle.not_ready`: ``Ready=Unknown`` (``NodeStatusUnknown``, "Kubelet stopped
  posting node status."), taints ``node.kubernetes.io/unreachable`` NoSchedule + NoExecute; its
  pods get ``Ready=False`` and a ``NodeNotReady`` event; its kubelet stops (pods freeze).
* Taint manager (``pkg/controller/tainteviction``): a pod on a node with a ``NoExecute`` taint
  it does not tolerate is evicted at once; one it tolerates with ``tolerationSeconds`` (every
  pod has 300 s for ``not-ready`` and ``unreachable``: the API server's DefaultTolerationSeconds
  adds them) is evicted that long after the taint was added; one tolerated without
  ``tolerationSeconds`` stays. Eviction: ``DisruptionTarget=True/DeletionByTaintManager``
  ("Taint manager: deleting due to NoExecute taint"), event ``TaintManagerEviction``, deletion
  (the pod stays Terminating: no kubelet).
* PodGC (``pkg/controller/podgc/gc_controller.go``): every 20 s (``gcCheckPeriod``) it looks
  for pods bound to a node that does not exist and puts that node in quarantine for 40 s
  (``quarantineTime``); at the first pass after the quarantine, if the node is still missing,
  each of its pods gets ``DisruptionTarget=True/DeletionByPodGC`` ("PodGC: node no longer
  exists") and phase Failed (unless it had finished), then is force-deleted. So a deleted
  node's pods go 40 to 60 emulated seconds after the node. Terminating pods never bound to a
  node are marked Failed and force-deleted at each pass.
* Timeline actions (:meth:`NodeLifecycle.apply`): ``nodeNotReady``, ``nodeReady``,
  ``deleteNode``, ``addNode``, ``preemptPod`` (scheduler preemption), ``evictPod`` (Eviction
  API), ``pressureEvictPod`` (the kubelet's node-pressure eviction), ``drainNode`` (``kubectl
  drain``), ``shutdownNode`` (graceful node shutdown, as on a spot reclaim); the last four are in
  :mod:`~dispatch.testing.k8s.controllers.disruptions`.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

from dispatch.testing.k8s.controllers.base import (
    Key,
    Reconciler,
    kube_controller,
    record_event,
    set_condition,
    write_status,
)
from dispatch.testing.k8s.controllers.disruptions import (
    drain_node,
    evict_pod,
    pressure_evict_pod,
    shut_down_node,
)
from dispatch.testing.k8s.controllers.scheduler import Scheduler, tolerates
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.meta import parse_rfc3339, rfc3339
from dispatch.testing.k8s.scenario import ClusterEvent, Scenario
from dispatch.testing.k8s.selectors import LabelSelector
from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
log = logging.getLogger(__name__)
UNREACHABLE = "node.kubernetes.io/unreachable"
GC_CHECK_PERIOD = 20.0  # emulated seconds between PodGC passes
QUARANTINE = 40.0  # emulated seconds a missing node waits before its pods are collected


class NodeLifecycle(Reconciler):
    name = "node-lifecycle"
    user = kube_controller("node-lifecycle")
    watches = (("v1", "Node"), ("v1", "Pod"))

    def __init__(
        self, scenario: Scenario | None = None, scheduler: Scheduler | None = None
    ) -> None:
        super().__init__()
        self.scenario = scenario or Scenario()
        self.scheduler = scheduler

    def keys(self, change: Change) -> list[Key]:
        if change.rtype.kind == "Node":
            return [("", change.name)]
        node = (change.obj.get("spec") or {}).get("nodeName")
        return [("", node)] if node else []

    async def run(self, cluster: Any) -> None:
        self._cluster = cluster
        timeline = asyncio.ensure_future(self._timeline())
        pod_gc = asyncio.ensure_future(self._pod_gc_loop())
        try:
            await super().run(cluster)
        finally:
            timeline.cancel()
            pod_gc.cancel()

    async def _timeline(self) -> None:
        start = self.now()
        for event in sorted(self.scenario.events, key=lambda e: e.at):
            await self.cluster.clock.sleep(max(0.0, start + event.at - self.now()))
            self.apply(event)

    def apply(self, event: ClusterEvent) -> None:
        """Carry out one cluster event now."""
        if event.action == "nodeNotReady" and event.node:
            self.not_ready(event.node)
        elif event.action == "nodeReady" and event.node:
            self.ready(event.node)
        elif event.action == "deleteNode" and event.node:
            self.cluster.store.delete(self.rtype("v1", "Node"), None, event.node)
        elif event.action == "addNode" and event.node:
            self.cluster.add_node(event.node)
        elif event.action == "preemptPod" and self.scheduler is not None:
            for ns, name in self._pods(event):
                self.scheduler.preempt(ns, name)
        elif event.action == "evictPod" and (event.pod or event.pod_selector):
            for ns, name in self._pods(event):
                evict_pod(self.cluster, ns, name)
        elif event.action == "pressureEvictPod" and (event.pod or event.pod_selector):
            for ns, name in self._pods(event):
                pressure_evict_pod(self.cluster, ns, name)
        elif event.action == "drainNode" and event.node:
            drain_node(self.cluster, event.node)
        elif event.action == "shutdownNode" and event.node:
            shut_down_node(self.cluster, event.node)
        else:
            raise ValueError(f"unknown or incomplete cluster event {event}")

    def _pods(self, event: ClusterEvent) -> list[Key]:
        if event.pod:
            return [(event.namespace, event.pod)]
        selector = LabelSelector.parse(",".join(f"{k}={v}" for k, v in event.pod_selector.items()))
        found = self.cluster.store.list(self.rtype("v1", "Pod"), event.namespace, labels=selector)
        return [(event.namespace, p["metadata"]["name"]) for p in found.items]

    # ------------------------------------------------------------------ node state

    def not_ready(self, name: str) -> None:
        node_type = self.rtype("v1", "Node")
        node = self.cluster.store.get(node_type, None, name)
        now = self.now()
        status = copy.deepcopy(node.get("status") or {})
        set_condition(status.setdefault("conditions", []), "Ready", "Unknown", "NodeStatusUnknown",
                      "Kubelet stopped posting node status.", now)  # fmt: skip
        node = write_status(self.cluster, node_type, node, status)
        taints = [
            {"key": UNREACHABLE, "effect": "NoSchedule", "timeAdded": rfc3339(now)},
            {"key": UNREACHABLE, "effect": "NoExecute", "timeAdded": rfc3339(now)},
        ]
        self.cluster.store.update(
            node_type, None, name, {**node, "spec": {**node.get("spec", {}), "taints": taints}}
        )
        for pod in self._on_node(name):
            pst = copy.deepcopy(pod.get("status") or {})
            set_condition(
                pst.setdefault("conditions", []), "Ready", "False", "NodeNotReady", "", now
            )
            pod = write_status(self.cluster, self.rtype("v1", "Pod"), pod, pst)
            record_event(
                self.cluster, pod, "Warning", "NodeNotReady", "Node is not ready", "node-controller"
            )

    def ready(self, name: str) -> None:
        node_type = self.rtype("v1", "Node")
        node = self.cluster.store.get(node_type, None, name)
        spec = {k: v for k, v in (node.get("spec") or {}).items() if k != "taints"}
        node = self.cluster.store.update(node_type, None, name, {**node, "spec": spec})
        status = copy.deepcopy(node.get("status") or {})
        set_condition(status.setdefault("conditions", []), "Ready", "True", "KubeletReady",
                      "kubelet is posting ready status", self.now())  # fmt: skip
        write_status(self.cluster, node_type, node, status)

    def _on_node(self, name: str) -> list[JsonObj]:
        return [
            copy.deepcopy(p)
            for p in self.cluster.store.objects(self.rtype("v1", "Pod"))
            if (p.get("spec") or {}).get("nodeName") == name
        ]

    # ------------------------------------------------------------------ reconcile

    def reconcile(self, key: Key) -> float | None:
        name = key[1]
        try:
            node = self.cluster.store.get(self.rtype("v1", "Node"), None, name)
        except ApiError:
            return None  # PodGC's periodic pass collects its pods
        later: float | None = None
        now = self.now()
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") != "NoExecute":
                continue
            added = parse_rfc3339(taint.get("timeAdded") or rfc3339(now))
            for pod in self._on_node(name):
                seconds = _toleration_seconds(pod, taint)
                if pod["metadata"].get("deletionTimestamp") or seconds is None:
                    continue
                due = added + seconds
                if now >= due:
                    self._evict(pod)
                else:
                    later = min(later or due - now, due - now)
        return later

    def _evict(self, pod: JsonObj) -> None:
        status = copy.deepcopy(pod.get("status") or {})
        set_condition(status.setdefault("conditions", []), "DisruptionTarget", "True", "DeletionByTaintManager",
                      "Taint manager: deleting due to NoExecute taint", self.now())  # fmt: skip
        pod = write_status(self.cluster, self.rtype("v1", "Pod"), pod, status)
        m = pod["metadata"]
        record_event(self.cluster, pod, "Normal", "TaintManagerEviction",
                     f"Marking for deletion Pod {m['namespace']}/{m['name']}", "taint-eviction-controller")  # fmt: skip
        self.cluster.store.delete(self.rtype("v1", "Pod"), m["namespace"], m["name"])

    # ------------------------------------------------------------------ PodGC

    async def _pod_gc_loop(self) -> None:
        quarantine: dict[str, float] = {}  # missing node -> when its quarantine ends
        while True:
            self.pod_gc_pass(quarantine)
            await self.cluster.clock.sleep(GC_CHECK_PERIOD)

    def pod_gc_pass(self, quarantine: dict[str, float]) -> None:
        """One PodGC pass: quarantine the missing nodes of bound pods, collect the pods of
        those still missing after their quarantine, and the unbound Terminating pods."""
        now = self.now()
        nodes = {
            n["metadata"]["name"] for n in self.cluster.store.objects(self.rtype("v1", "Node"))
        }
        # read-only: stored objects are never changed in place, and _collect writes copies
        pods = self.cluster.store.objects(self.rtype("v1", "Pod"))
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and node not in nodes:
                quarantine.setdefault(node, now + QUARANTINE)  # an earlier end is kept
        gone = set()
        for node, until in list(quarantine.items()):
            if until <= now:
                del quarantine[node]
                if node not in nodes:
                    gone.add(node)
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            try:
                if node in gone:
                    self._collect(pod, ("DeletionByPodGC", "PodGC: node no longer exists"))
                elif not node and pod["metadata"].get("deletionTimestamp"):
                    self._collect(pod, None)
            except ApiError as exc:  # gone or changed meanwhile: as PodGC, go on with the rest
                log.info("pod GC: %s", exc)

    def _collect(self, pod: JsonObj, reason: tuple[str, str] | None) -> None:
        """``markFailedAndDeletePodWithCondition``: the condition (if any), phase Failed
        unless finished, then deletion with grace 0."""
        pod_type = self.rtype("v1", "Pod")
        status = copy.deepcopy(pod.get("status") or {})
        if reason is not None:
            set_condition(status.setdefault("conditions", []), "DisruptionTarget", "True",
                          reason[0], reason[1], self.now())  # fmt: skip
        if status.get("phase") not in ("Succeeded", "Failed"):
            status["phase"] = "Failed"
        if status != (pod.get("status") or {}):
            write_status(self.cluster, pod_type, pod, status)
        m = pod["metadata"]
        self.cluster.store.delete(pod_type, m["namespace"], m["name"], grace_period_seconds=0)


def _toleration_seconds(pod: JsonObj, taint: JsonObj) -> float | None:
    """Seconds until the taint manager evicts ``pod`` for ``taint``: 0 when no toleration
    matches; else those of the first that does (``GetMatchingTolerations``), 0 at least, or
    None when it has no ``tolerationSeconds`` (tolerated for ever)."""
    first = next(
        (
            t
            for t in (pod.get("spec") or {}).get("tolerations") or []
            if tolerates({"spec": {"tolerations": [t]}}, taint)
        ),
        None,
    )
    if first is None:
        return 0.0
    seconds = first.get("tolerationSeconds")
    return None if seconds is None else max(0.0, float(seconds))

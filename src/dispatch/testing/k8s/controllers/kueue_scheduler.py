"""Kueue's side of the queues: which ClusterQueue a Workload is for, why it cannot be
considered, the scheduler's decisions carried out, and the status of ClusterQueues and
LocalQueues. Everything is read from Kueue's objects in the store on every pass.

Ground truth, kubernetes-sigs/kueue v0.17:

* A Workload's LocalQueue is ``(namespace, spec.queueName)``, whose ``spec.clusterQueue``
  names the ClusterQueue. Missing or inactive, the Workload is not considered and gets
  ``QuotaReserved=False`` reason ``Inadmissible``: ``LocalQueue <q> doesn't exist``,
  ``LocalQueue <q> is inactive``, ``ClusterQueue <cq> doesn't exist``, ``ClusterQueue <cq> is
  inactive`` (``pkg/controller/core/workload_controller.go``). A namespace the
  ClusterQueue's ``namespaceSelector`` does not select: reason ``Pending``, ``Workload
  namespace doesn't match ClusterQueue selector`` (``pkg/scheduler/scheduler.go``
  ``nominate``).
* Not admitted: ``QuotaReserved=False`` reason ``Pending`` with the scheduler's message and a
  ``Pending`` Warning event (``requeueAndUpdate``). Admitted: ``status.admission`` (flavors
  and ``resourceUsage`` per pod set), ``QuotaReserved``/``Admitted`` True and their events
  (``recordWorkloadAdmissionMetrics``). Preempted: ``Evicted`` (``Preempted``) and
  ``Preempted`` (``InClusterQueue``) True, events ``Preempted`` on the victim and
  ``PreemptedWorkload`` on the preemptor (``pkg/scheduler/preemption/preemption.go``
  ``IssuePreemptions``).
* ClusterQueue status: ``Active`` (``Ready``/``Can admit new workloads``, or ``FlavorNotFound``
  ...), ``flavorsReservation``, ``flavorsUsage``, ``pendingWorkloads``,
  ``reservingWorkloads``, ``admittedWorkloads`` (``clusterqueue_controller.go``
  ``updateCqStatusIfChanged``); LocalQueue the same counts and flavors of its own workloads
  and ``Active`` (``Ready``/``Can submit new workloads to localQueue``,
  ``ClusterQueueDoesNotExist``, ``ClusterQueueIsInactive``, ``Stopped``:
  ``localqueue_controller.go``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dispatch.testing.k8s.controllers.base import (
    condition,
    is_true,
    record_event,
    set_condition,
    write_status,
)
from dispatch.testing.k8s.controllers.kueue_admission import (
    Admit,
    Assignment,
    Entry,
    Pend,
    PodSetNeed,
    Preempt,
    schedule,
)
from dispatch.testing.k8s.controllers.kueue_model import (
    FlavorResource,
    QueueSpec,
    quantity_text,
    read_cluster_queue,
    usage_rows,
)
from dispatch.testing.k8s.controllers.kueue_queues import KUEUE_API, pod_set_requests
from dispatch.testing.k8s.meta import parse_rfc3339

if TYPE_CHECKING:
    from dispatch.testing.k8s.cluster import Cluster

JsonObj = dict[str, Any]
JOB_UID = "kueue.x-k8s.io/job-uid"
COMPONENT = "kueue-admission"


@dataclass
class _Queues:
    """One pass's reading of the store."""

    specs: dict[str, QueueSpec] = field(default_factory=dict)
    local: dict[tuple[str, str], JsonObj] = field(default_factory=dict)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)


class KueueScheduler:
    """Runs one pass over every queue and Workload (``run``); the Kueue controller calls it
    after any change to a Workload or a queue object."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def rtype(self, kind: str) -> Any:
        return self.cluster.rtype(KUEUE_API, kind)

    def run(self) -> None:
        queues = self._read()
        workloads = self.cluster.store.objects(self.rtype("Workload"))
        pending: dict[str, list[tuple[Entry, JsonObj]]] = {}
        admitted: dict[str, list[Entry]] = {}
        for wl in workloads:
            if is_true(wl, "Finished"):
                continue
            admission = (wl.get("status") or {}).get("admission")
            if admission:
                admitted.setdefault(admission.get("clusterQueue", ""), []).append(entry_of(wl))
                continue
            if wl["spec"].get("active") is False:
                continue
            cq, reason, message = self._queue_of(wl, queues)
            if message:
                self._pending(wl, reason, message)
            else:
                pending.setdefault(cq, []).append((entry_of(wl), wl))
        for name, spec in queues.specs.items():
            found = pending.get(name, [])
            by_key = {(e.namespace, e.name): wl for e, wl in found}
            for decision in schedule(spec, [e for e, _ in found], admitted.get(name, [])):
                if isinstance(decision, Admit):
                    self._admit(by_key[_key(decision.entry)], spec.name, decision.assignment)
                elif isinstance(decision, Pend):
                    self._pending(by_key[_key(decision.entry)], decision.reason, decision.message)
                elif isinstance(decision, Preempt):
                    self._preempt(decision)
        self._statuses(queues)

    # ------------------------------------------------------------------ reading

    def _read(self) -> _Queues:
        store = self.cluster.store
        flavors = {f["metadata"]["name"] for f in store.objects(self.rtype("ResourceFlavor"))}
        out = _Queues()
        for obj in store.objects(self.rtype("ClusterQueue")):
            out.specs[obj["metadata"]["name"]] = read_cluster_queue(obj, flavors)
        for obj in store.objects(self.rtype("LocalQueue")):
            out.local[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        for ns in store.objects(self.cluster.rtype("v1", "Namespace")):
            out.namespace_labels[ns["metadata"]["name"]] = ns["metadata"].get("labels") or {}
        return out

    def _queue_of(self, wl: JsonObj, queues: _Queues) -> tuple[str, str, str]:
        """(ClusterQueue, reason, message): a message says why it cannot be considered."""
        name = str(wl["spec"].get("queueName", ""))
        local = queues.local.get((wl["metadata"]["namespace"], name))
        if local is None:
            return "", "Inadmissible", f"LocalQueue {name} doesn't exist"
        if (local["spec"].get("stopPolicy") or "None") != "None":
            return "", "Inadmissible", f"LocalQueue {name} is inactive"
        cq = str(local["spec"].get("clusterQueue", ""))
        spec = queues.specs.get(cq)
        if spec is None:
            return cq, "Inadmissible", f"ClusterQueue {cq} doesn't exist"
        if not spec.active:
            return cq, "Inadmissible", f"ClusterQueue {cq} is inactive"
        if not spec.admits_namespace(queues.namespace_labels.get(wl["metadata"]["namespace"])):
            return cq, "Pending", "Workload namespace doesn't match ClusterQueue selector"
        return cq, "", ""

    # ------------------------------------------------------------------ decisions

    def _pending(self, wl: JsonObj, reason: str, message: str) -> None:
        status = copy.deepcopy(wl.get("status") or {})
        conds = status.setdefault("conditions", [])
        if set_condition(
            conds, "QuotaReserved", "False", reason, message, self.cluster.clock.now()
        ):
            write_status(self.cluster, self.rtype("Workload"), wl, status)
            if reason == "Pending":
                record_event(self.cluster, wl, "Warning", "Pending", message, COMPONENT)

    def _admit(self, wl: JsonObj, cq: str, assignment: Assignment) -> None:
        status = copy.deepcopy(wl.get("status") or {})
        conds = status.setdefault("conditions", [])
        now = self.cluster.clock.now()
        needs = {p["name"]: p for p in wl["spec"]["podSets"]}
        status["admission"] = {
            "clusterQueue": cq,
            "podSetAssignments": [
                {
                    "name": name,
                    "flavors": dict(flavors),
                    "resourceUsage": {
                        r: quantity_text(r, v)
                        for r, v in pod_set_requests(needs[name]).items()
                        if r in flavors
                    },
                    "count": needs[name].get("count", 1),
                }
                for name, flavors in assignment.flavors
            ],
        }
        set_condition(conds, "QuotaReserved", "True", "QuotaReserved",
                      f"Quota reserved in ClusterQueue {cq}", now)  # fmt: skip
        set_condition(conds, "Admitted", "True", "Admitted", "The workload is admitted", now)
        for ctype in ("Evicted", "Preempted"):
            old = condition(conds, ctype)
            if old is not None and old.get("status") == "True":
                set_condition(conds, ctype, "False", "QuotaReserved",
                              f"Previously: {old.get('message', '')}", now)  # fmt: skip
        status.pop("requeueState", None)
        write_status(self.cluster, self.rtype("Workload"), wl, status)
        queued = _queued_since(wl)
        waited = max(0.0, now - queued) if queued is not None else 0.0
        record_event(self.cluster, wl, "Normal", "QuotaReserved",
                     f"Quota reserved in ClusterQueue {cq}, wait time since queued was {waited:.0f}s",
                     COMPONENT)  # fmt: skip
        record_event(self.cluster, wl, "Normal", "Admitted",
                     f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s", COMPONENT)  # fmt: skip

    def _preempt(self, decision: Preempt) -> None:
        victim = self.cluster.store.peek(
            self.rtype("Workload"), decision.victim.namespace, decision.victim.name
        )
        preemptor = self.cluster.store.peek(
            self.rtype("Workload"), decision.preemptor.namespace, decision.preemptor.name
        )
        if victim is None:
            return
        status = copy.deepcopy(victim.get("status") or {})
        conds = status.setdefault("conditions", [])
        now = self.cluster.clock.now()
        set_condition(conds, "Evicted", "True", "Preempted", decision.message, now)
        set_condition(conds, "Preempted", "True", decision.reason, decision.message, now)
        write_status(self.cluster, self.rtype("Workload"), victim, status)
        p, v = decision.preemptor.priority, decision.victim.priority
        record_event(self.cluster, victim, "Normal", "Preempted",
                     f"{decision.message}; preemptor effective priority: {p} (base: {p}, boost: 0); "
                     f"preemptee effective priority: {v} (base: {v}, boost: 0)", COMPONENT)  # fmt: skip
        if preemptor is not None:
            cq = ((victim.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
            record_event(self.cluster, preemptor, "Normal", "PreemptedWorkload",
                         f"Preempted workload {decision.victim.namespace}/{decision.victim.name} "
                         f"(UID: {decision.victim.uid}) in ClusterQueue {cq}; preemptor effective "
                         f"priority: {p} (base: {p}, boost: 0); preemptee effective priority: {v} "
                         f"(base: {v}, boost: 0)", COMPONENT)  # fmt: skip

    # ------------------------------------------------------------------ queue status

    def _statuses(self, queues: _Queues) -> None:
        workloads = [
            w
            for w in self.cluster.store.objects(self.rtype("Workload"))
            if not is_true(w, "Finished")
        ]
        counts: dict[tuple[str, ...], _Count] = {}
        for wl in workloads:
            m = wl["metadata"]
            local = queues.local.get((m["namespace"], str(wl["spec"].get("queueName", ""))))
            admission = (wl.get("status") or {}).get("admission")
            cq = admission.get("clusterQueue", "") if admission else ""
            if not cq and local is not None:
                cq = str(local["spec"].get("clusterQueue", ""))
            keys: list[tuple[str, ...]] = [(cq,)] if cq in queues.specs else []
            if local is not None:
                keys.append((m["namespace"], local["metadata"]["name"]))
            for key in keys:
                counts.setdefault(key, _Count()).add(wl, admission)
        for name, spec in queues.specs.items():
            obj = self.cluster.store.peek(self.rtype("ClusterQueue"), None, name)
            if obj is None:
                continue
            count = counts.get((name,), _Count())
            status = copy.deepcopy(obj.get("status") or {})
            state, reason, message = spec.active_condition()
            set_condition(status.setdefault("conditions", []), "Active", state, reason, message,
                          self.cluster.clock.now())  # fmt: skip
            status["flavorsReservation"] = usage_rows(spec, count.reserved, borrowed=True)
            status["flavorsUsage"] = usage_rows(spec, count.used, borrowed=True)
            status["pendingWorkloads"] = count.pending
            status["reservingWorkloads"] = count.reserving
            status["admittedWorkloads"] = count.admitted
            if status != obj.get("status"):
                write_status(self.cluster, self.rtype("ClusterQueue"), obj, status)
        for (ns, name), obj in queues.local.items():
            self._local_status(obj, queues.specs, counts.get((ns, name), _Count()))

    def _local_status(self, obj: JsonObj, specs: dict[str, QueueSpec], count: _Count) -> None:
        spec = specs.get(str(obj["spec"].get("clusterQueue", "")))
        if (obj["spec"].get("stopPolicy") or "None") != "None":
            state, reason, message = "False", "Stopped", "LocalQueue is stopped"
        elif spec is None:
            state, reason = "False", "ClusterQueueDoesNotExist"
            message = "Can't submit new workloads to clusterQueue"
        elif spec.active:
            state, reason, message = "True", "Ready", "Can submit new workloads to localQueue"
        else:
            state, reason = "False", "ClusterQueueIsInactive"
            message = "Can't submit new workloads to clusterQueue"
        status = copy.deepcopy(obj.get("status") or {})
        set_condition(status.setdefault("conditions", []), "Active", state, reason, message,
                      self.cluster.clock.now())  # fmt: skip
        status["pendingWorkloads"] = count.pending if spec is not None else 0
        status["reservingWorkloads"] = count.reserving
        status["admittedWorkloads"] = count.admitted
        status.pop("flavorsReservation", None)
        status.pop("flavorsUsage", None)
        if spec is not None:
            status["flavorsReservation"] = usage_rows(spec, count.reserved, borrowed=False)
            status["flavorsUsage"] = usage_rows(spec, count.used, borrowed=False)
        if status != obj.get("status"):
            write_status(self.cluster, self.rtype("LocalQueue"), obj, status)


@dataclass
class _Count:
    pending: int = 0
    reserving: int = 0
    admitted: int = 0
    reserved: dict[FlavorResource, int] = field(default_factory=dict)
    used: dict[FlavorResource, int] = field(default_factory=dict)

    def add(self, wl: JsonObj, admission: JsonObj | None) -> None:
        if not admission:
            self.pending += wl["spec"].get("active") is not False
            return
        usage = admitted_usage(wl)
        self.reserving += 1
        for fr, v in usage.items():
            self.reserved[fr] = self.reserved.get(fr, 0) + v
        if is_true(wl, "Admitted"):
            self.admitted += 1
            for fr, v in usage.items():
                self.used[fr] = self.used.get(fr, 0) + v


def admitted_usage(wl: JsonObj) -> dict[FlavorResource, int]:
    """Quota a Workload holds: each pod set's requests in the flavors it was assigned."""
    needs = {p["name"]: pod_set_requests(p) for p in wl["spec"].get("podSets") or []}
    usage: dict[FlavorResource, int] = {}
    admission = (wl.get("status") or {}).get("admission") or {}
    for psa in admission.get("podSetAssignments") or []:
        asked = needs.get(psa.get("name"), {})
        for r, f in (psa.get("flavors") or {}).items():
            usage[(f, r)] = usage.get((f, r), 0) + asked.get(r, 0)
    return usage


def entry_of(wl: JsonObj) -> Entry:
    m = wl["metadata"]
    reserved = condition((wl.get("status") or {}).get("conditions") or [], "QuotaReserved") or {}
    return Entry(
        namespace=m["namespace"],
        name=m["name"],
        uid=m.get("uid", ""),
        job_uid=(m.get("labels") or {}).get(JOB_UID, ""),
        priority=int(wl["spec"].get("priority") or 0),
        created=m.get("creationTimestamp", ""),
        pod_sets=tuple(
            PodSetNeed(p["name"], int(p.get("count", 1)), pod_set_requests(p))
            for p in wl["spec"].get("podSets") or []
        ),
        usage=admitted_usage(wl),
        reserved_at=str(reserved.get("lastTransitionTime", ""))
        if reserved.get("status") == "True"
        else "",
        evicted=is_true(wl, "Evicted"),
    )


def _key(entry: Entry) -> tuple[str, str]:
    return entry.namespace, entry.name


def _queued_since(wl: JsonObj) -> float | None:
    """When the workload was last queued: its creation or its last requeue."""
    requeued = condition((wl.get("status") or {}).get("conditions") or [], "Requeued") or {}
    stamp = requeued.get("lastTransitionTime") or wl["metadata"].get("creationTimestamp")
    return parse_rfc3339(stamp) if isinstance(stamp, str) else None

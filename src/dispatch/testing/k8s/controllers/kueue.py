"""Kueue (v0.17+, TrainJob integration with runtimePatches), reduced to one flavor per
ClusterQueue and within-queue priority preemption.

* Webhook: a TrainJob with label ``kueue.x-k8s.io/queue-name`` is created suspended with an
  empty runtimePatch of manager ``kueue.x-k8s.io/manager``.
* A Workload per TrainJob (``trainjob-<name>-<hash>``, label ``kueue.x-k8s.io/job-uid``,
  controller owner reference; pod sets from the would-be JobSet, initializers included).
* Admission in priority then creation order (BestEffortFIFO) against the ClusterQueue's
  nominal quota: ``QuotaReserved``/``Admitted`` True; the TrainJob's Kueue patch gets the pod
  label ``kueue.x-k8s.io/podset``, then it is unsuspended (two writes, as Kueue does). Pending
  reasons ``WaitingForQuota`` and ``ExceedsMaxQuota`` with Kueue's flavor-assignment messages.
* Preemption of lower-priority admitted Workloads (``Evicted``/``Preempted`` reason
  ``InClusterQueue``): the TrainJob is suspended (event ``Stopped``); once no Job is active the
  patch is cleared, the quota released and the Workload requeued (``Requeued``); on the next
  admission ``Evicted``/``Preempted`` turn False ("Previously: ...").
* ``Finished`` (``Succeeded``/``Failed``) from the TrainJob's ``Complete``/``Failed``.
* ``waitForPodsReady`` recovery (``KueueConfig.recovery_timeout``): pods that had all been
  ready and no longer are set ``PodsReady=False/WaitForRecovery``; not ready again within the
  timeout, the Workload is evicted (``Evicted`` reason ``PodsReadyTimeout``, counted in
  ``schedulingStats.evictions`` with ``underlyingCause: WaitForRecovery`` and in
  ``requeueState``) and stopped and requeued like a preempted one.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from dispatch.adapters.kubeflow.planning.jobset import BuildRefused, UnsupportedRuntime, render
from dispatch.testing.k8s.controllers.base import (
    MERGE,
    Key,
    Reconciler,
    condition,
    is_true,
    owner_keys,
    owner_ref,
    record_event,
    set_condition,
    write_status,
)
from dispatch.testing.k8s.controllers.kueue_queues import (
    FLAVOR,
    MANAGER,
    QUEUE_LABEL,
    ClusterQueue,
    KueueConfig,
    KueueWebhook,
    requests_of,
    total,
)
from dispatch.testing.k8s.controllers.scheduler import RESOURCES, milli
from dispatch.testing.k8s.meta import parse_rfc3339
from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"


class Kueue(Reconciler):
    name = "kueue"
    watches = ((TRAINER_API, "TrainJob"), (WORKLOAD_API, "Workload"))

    def __init__(self, config: KueueConfig) -> None:
        super().__init__()
        self.config = config

    def install(self, cluster: Any) -> None:
        super().install(cluster)
        cluster.store.admission.add(KueueWebhook())

    def keys(self, change: Change) -> list[Key]:
        if change.rtype.kind == "Workload":
            return owner_keys(change, "TrainJob")
        return [(change.namespace, change.name)]

    def reconcile(self, key: Key) -> float | None:
        tj = self.find(TRAINER_API, "TrainJob", *key)
        queued = tj is not None and QUEUE_LABEL in (tj["metadata"].get("labels") or {})
        again = None
        if tj is not None and queued and not tj["metadata"].get("deletionTimestamp"):
            again = self._job(tj)
        self._schedule()
        return again

    # ------------------------------------------------------------------ one job

    def _workload(self, tj: JsonObj) -> JsonObj | None:
        for rtype, obj in self.cluster.store.dependents(tj["metadata"]["uid"]):
            if rtype.kind == "Workload":
                return copy.deepcopy(obj)
        return None

    def _job(self, tj: JsonObj) -> float | None:
        wl = self._workload(tj)
        finished = next(
            (c for c in (tj.get("status") or {}).get("conditions") or []
             if c["type"] in ("Complete", "Failed") and c["status"] == "True"), None,
        )  # fmt: skip
        if wl is None:
            if finished is None:
                self._create_workload(tj)
            return None
        again = None
        status = copy.deepcopy(wl.get("status") or {})
        conds = status.setdefault("conditions", [])
        now = self.now()
        if finished is not None:
            ok = finished["type"] == "Complete"
            set_condition(
                conds,
                "Finished",
                "True",
                "Succeeded" if ok else "Failed",
                finished.get("message", ""),
                now,
            )
        elif is_true(wl, "Evicted"):
            self._stop(tj, wl, status)
        elif is_true(wl, "Admitted"):
            self._start(tj, wl)
            jobs = (tj.get("status") or {}).get("jobsStatus") or []
            ready = sum(j.get("ready", 0) + j.get("succeeded", 0) for j in jobs)
            total = sum(int(p.get("count", 1)) > 0 for p in wl["spec"]["podSets"])
            pods_ready = condition(conds, "PodsReady")
            if jobs and ready >= total:
                set_condition(conds, "PodsReady", "True", "Started",
                              "All pods reached readiness and the workload is running", now)  # fmt: skip
            elif (
                self.config.recovery_timeout is not None
                and pods_ready is not None
                and (is_true(wl, "PodsReady") or pods_ready.get("reason") == "WaitForRecovery")
            ):
                again = self._recovery(wl, conds, now)
            elif pods_ready is None:
                set_condition(
                    conds,
                    "PodsReady",
                    "False",
                    "WaitForStart",
                    "Not all pods are ready or succeeded",
                    now,
                )
        if status != (wl.get("status") or {}):
            write_status(self.cluster, self.rtype(WORKLOAD_API, "Workload"), wl, status)
        return again

    def _recovery(self, wl: JsonObj, conds: list[JsonObj], now: float) -> float | None:
        """Pods that had all been ready are not: wait ``recovery_timeout``, then evict. Returns
        when to look again."""
        timeout = self.config.recovery_timeout or 0.0
        pods_ready = condition(conds, "PodsReady") or {}
        if pods_ready.get("status") == "True":
            set_condition(conds, "PodsReady", "False", "WaitForRecovery",
                          "At least one pod has failed, waiting for recovery", now)  # fmt: skip
            return timeout
        changed = pods_ready.get("lastTransitionTime")
        since = parse_rfc3339(changed) if isinstance(changed, str) else now
        if now - since < timeout:
            return timeout - (now - since)
        m = wl["metadata"]
        set_condition(conds, "Evicted", "True", "PodsReadyTimeout",
                      f"Exceeded the PodsReady timeout {m['namespace']}/{m['name']}", now)  # fmt: skip
        return None

    def _create_workload(self, tj: JsonObj) -> None:
        m = tj["metadata"]
        ref = tj["spec"].get("runtimeRef") or {}
        kind = ref.get("kind", "ClusterTrainingRuntime")
        runtime = self.find(
            TRAINER_API,
            kind,
            m["namespace"] if kind == "TrainingRuntime" else None,
            ref.get("name", ""),
        )
        if runtime is None:
            return
        try:
            _, pod_sets = render(tj, runtime)
        except (UnsupportedRuntime, BuildRefused):
            return
        digest = hashlib.sha256(f"{m['name']}/{m['uid']}/TrainJob".encode()).hexdigest()[:5]
        labels = m.get("labels") or {}
        priority = self.config.priority_classes.get(labels.get(PRIORITY_LABEL, ""), 0)
        body = {
            "apiVersion": WORKLOAD_API,
            "kind": "Workload",
            "metadata": {
                "name": f"trainjob-{m['name'][:40]}-{digest}",
                "namespace": m["namespace"],
                "labels": {JOB_UID: m["uid"]},
                "ownerReferences": [owner_ref(tj)],
            },
            "spec": {
                "queueName": labels[QUEUE_LABEL],
                "priority": priority,
                "active": True,
                "podSets": [
                    {"name": p.name, "count": p.pods, "template": p.template} for p in pod_sets
                ],
            },
        }
        wl = self.cluster.store.create(self.rtype(WORKLOAD_API, "Workload"), m["namespace"], body)
        record_event(self.cluster, tj, "Normal", "CreatedWorkload",
                     f"Created Workload: {m['namespace']}/{wl['metadata']['name']}", "kueue-admission")  # fmt: skip

    def _set_patch(self, tj: JsonObj, pod_sets: list[str] | None) -> JsonObj:
        patches = copy.deepcopy(tj["spec"].get("runtimePatches") or [])
        mine: JsonObj = {"manager": MANAGER}
        if pod_sets:
            mine["trainingRuntimeSpec"] = {"template": {"spec": {"replicatedJobs": [
                {"name": n, "template": {"spec": {"template": {"metadata": {"labels": {PODSET_LABEL: n}}}}}}
                for n in pod_sets
            ]}}}  # fmt: skip
        patches = [p for p in patches if p.get("manager") != MANAGER] + [mine]
        if patches == tj["spec"].get("runtimePatches"):
            return tj
        m = tj["metadata"]
        return self.cluster.store.patch(
            self.rtype(TRAINER_API, "TrainJob"),
            m["namespace"],
            m["name"],
            MERGE,
            {"spec": {"runtimePatches": patches}},
        )

    def _start(self, tj: JsonObj, wl: JsonObj) -> None:
        if not tj["spec"].get("suspend"):
            return
        tj = self._set_patch(tj, [p["name"] for p in wl["spec"]["podSets"]])
        m = tj["metadata"]
        self.cluster.store.patch(self.rtype(TRAINER_API, "TrainJob"), m["namespace"], m["name"], MERGE,
                                 {"spec": {"suspend": False}})  # fmt: skip
        cq = (wl.get("status") or {}).get("admission", {}).get("clusterQueue", "")
        record_event(
            self.cluster,
            tj,
            "Normal",
            "Started",
            f"Admitted by clusterQueue {cq}",
            "kueue-admission",
        )

    def _stop(self, tj: JsonObj, wl: JsonObj, status: JsonObj) -> None:
        evicted = condition(status["conditions"], "Evicted") or {}
        m = tj["metadata"]
        if not tj["spec"].get("suspend"):
            self.cluster.store.patch(self.rtype(TRAINER_API, "TrainJob"), m["namespace"], m["name"], MERGE,
                                     {"spec": {"suspend": True}})  # fmt: skip
            record_event(
                self.cluster, tj, "Normal", "Stopped", evicted.get("message", ""), "kueue-admission"
            )
            return
        jobs = (tj.get("status") or {}).get("jobsStatus") or []
        if any(j.get("active", 0) > 0 for j in jobs) or "admission" not in status:
            return
        self._set_patch(tj, None)
        now, conds = self.now(), status["conditions"]
        status.pop("admission", None)
        set_condition(conds, "QuotaReserved", "False", "Pending", evicted.get("message", ""), now)
        set_condition(
            conds, "Admitted", "False", "NoReservation", "The workload has no reservation", now
        )
        set_condition(
            conds,
            "Requeued",
            "True",
            evicted.get("reason", "Preempted"),
            evicted.get("message", ""),
            now,
        )
        stats = status.setdefault("schedulingStats", {}).setdefault("evictions", [])
        if evicted.get("reason") == "PodsReadyTimeout":
            # what the pods were waiting for (WaitForStart / WaitForRecovery), and a backoff
            cause = (condition(conds, "PodsReady") or {}).get("reason", "")
            requeue = status.setdefault("requeueState", {})
            requeue["count"] = int(requeue.get("count", 0)) + 1
        else:
            cause = (condition(conds, "Preempted") or {}).get("reason", "")
        if condition(conds, "PodsReady") is not None:  # requeued: its pods start over
            set_condition(conds, "PodsReady", "False", "WaitForStart",
                          "Not all pods are ready or succeeded", now)  # fmt: skip
        row = next(
            (
                e
                for e in stats
                if e["reason"] == evicted.get("reason") and e.get("underlyingCause") == cause
            ),
            None,
        )
        if row is None:
            stats.append(
                {"reason": evicted.get("reason", "Preempted"), "underlyingCause": cause, "count": 1}
            )
        else:
            row["count"] += 1

    # ------------------------------------------------------------------ admission

    def _schedule(self) -> None:
        workloads = [
            copy.deepcopy(w)
            for w in self.cluster.store.objects(self.rtype(WORKLOAD_API, "Workload"))
        ]
        for cq in self.config.cluster_queues:
            mine = [
                w
                for w in workloads
                if w["spec"].get("queueName") in cq.local_queues and not is_true(w, "Finished")
            ]
            admitted = [w for w in mine if "admission" in (w.get("status") or {})]
            pending = sorted(
                (w for w in mine if "admission" not in (w.get("status") or {})),
                key=lambda w: (
                    -int(w["spec"].get("priority", 0)),
                    w["metadata"]["creationTimestamp"],
                    w["metadata"]["name"],
                ),
            )
            quota = {r: milli(v, r) for r, v in cq.quota.items() if r in RESOURCES}
            used = total([requests_of(w) for w in admitted])
            for wl in pending:
                want = requests_of(wl)
                over = [r for r in quota if want.get(r, 0) > quota[r]]
                short = [r for r in quota if used.get(r, 0) + want.get(r, 0) > quota[r]]
                if over:
                    r = over[0]
                    self._pending(wl, "ExceedsMaxQuota",
                                  f"couldn't assign flavors to pod set {wl['spec']['podSets'][-1]['name']}: insufficient "
                                  f"quota for {r} in flavor {FLAVOR}, request > maximum capacity ({cq.quota[r]})")  # fmt: skip
                elif not short:
                    self._admit(wl, cq)
                    used = total([used, want])
                else:
                    if not self._preempt(wl, admitted, quota, used, want):
                        r = short[0]
                        self._pending(wl, "WaitingForQuota",
                                      f"couldn't assign flavors to pod set {wl['spec']['podSets'][-1]['name']}: insufficient "
                                      f"unused quota for {r} in flavor {FLAVOR}")  # fmt: skip

    def _pending(self, wl: JsonObj, reason: str, message: str) -> None:
        status = copy.deepcopy(wl.get("status") or {})
        if set_condition(
            status.setdefault("conditions", []),
            "QuotaReserved",
            "False",
            reason,
            message,
            self.now(),
        ):
            write_status(self.cluster, self.rtype(WORKLOAD_API, "Workload"), wl, status)

    def _admit(self, wl: JsonObj, cq: ClusterQueue) -> None:
        status = copy.deepcopy(wl.get("status") or {})
        conds = status.setdefault("conditions", [])
        now = self.now()
        status["admission"] = {
            "clusterQueue": cq.name,
            "podSetAssignments": [
                {
                    "name": p["name"],
                    "count": p.get("count", 1),
                    "flavors": dict.fromkeys(cq.quota, FLAVOR),
                }
                for p in wl["spec"]["podSets"]
            ],
        }
        set_condition(
            conds,
            "QuotaReserved",
            "True",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq.name}",
            now,
        )
        set_condition(conds, "Admitted", "True", "Admitted", "The workload is admitted", now)
        for ctype in ("Evicted", "Preempted"):
            old = condition(conds, ctype)
            if old is not None and old.get("status") == "True":
                set_condition(
                    conds,
                    ctype,
                    "False",
                    "QuotaReserved",
                    f"Previously: {old.get('message', '')}",
                    now,
                )
        status.pop("requeueState", None)
        write_status(self.cluster, self.rtype(WORKLOAD_API, "Workload"), wl, status)

    def _preempt(
        self,
        wl: JsonObj,
        admitted: list[JsonObj],
        quota: dict[str, int],
        used: dict[str, int],
        want: dict[str, int],
    ) -> bool:
        priority = int(wl["spec"].get("priority", 0))
        victims = sorted(
            (
                w
                for w in admitted
                if int(w["spec"].get("priority", 0)) < priority and not is_true(w, "Evicted")
            ),
            key=lambda w: (int(w["spec"].get("priority", 0)), w["metadata"]["creationTimestamp"]),
            reverse=False,
        )
        freed: list[JsonObj] = []
        left = dict(used)
        for victim in victims:
            if all(left.get(r, 0) + want.get(r, 0) <= quota[r] for r in quota):
                break
            freed.append(victim)
            for r, v in requests_of(victim).items():
                left[r] = left.get(r, 0) - v
        if not freed or not all(left.get(r, 0) + want.get(r, 0) <= quota[r] for r in quota):
            return False
        job_uid = wl["metadata"]["labels"].get(JOB_UID, "")
        message = (
            f"Preempted to accommodate a workload (UID: {wl['metadata']['uid']}, JobUID: {job_uid}) "
            "due to prioritization in the ClusterQueue"
        )
        for victim in freed:
            status = copy.deepcopy(victim.get("status") or {})
            conds = status.setdefault("conditions", [])
            set_condition(conds, "Evicted", "True", "Preempted", message, self.now())
            set_condition(conds, "Preempted", "True", "InClusterQueue", message, self.now())
            write_status(self.cluster, self.rtype(WORKLOAD_API, "Workload"), victim, status)
        self._pending(
            wl, "WaitingForPreemptedWorkloads", "waiting for preempted workloads to release quota"
        )
        return True

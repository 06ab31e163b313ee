"""Kueue (v0.17+, TrainJob integration with runtimePatches): the job side. The queue side
(which ClusterQueue, flavor assignment, preemption, queue status) is :mod:`.kueue_scheduler`,
reading only Kueue's objects; :mod:`.kueue_queues` holds the configuration and webhooks.

* Webhook: a TrainJob with label ``kueue.x-k8s.io/queue-name`` is created suspended with an
  empty runtimePatch of manager ``kueue.x-k8s.io/manager``.
* A Workload per TrainJob (``trainjob-<name>-<hash>``, label ``kueue.x-k8s.io/job-uid``,
  controller owner reference; pod sets from the would-be JobSet, initializers included). Its
  priority is the value of the WorkloadPriorityClass the ``kueue.x-k8s.io/priority-class``
  label names (``spec.priorityClassRef``), else 0; a label naming a class that does not
  exist creates no Workload until it does (``jobframework.ExtractPriority`` fails).
* Admitted: the TrainJob's Kueue patch gets the pod label ``kueue.x-k8s.io/podset``, then it
  is unsuspended (two writes, as Kueue does).
* Preempted or evicted: the TrainJob is suspended (event ``Stopped``); once no Job is active
  the patch is cleared, the quota released and the Workload requeued (``Requeued``); on the
  next admission ``Evicted``/``Preempted`` turn False ("Previously: ...").
* ``Finished`` (``Succeeded``/``Failed``) from the TrainJob's ``Complete``/``Failed``.
* ``PodsReady`` only with ``waitForPodsReady`` enabled (``KueueConfig.wait_for_pods_ready`` or
  ``recovery_timeout``; ``jobframework/reconciler.go`` writes it only then): ``WaitForStart``
  until every pod set's pods are ready, then ``Started`` (``Recovered`` after a recovery).
  With ``recovery_timeout``, pods that had all been ready and no longer are set
  ``PodsReady=False/WaitForRecovery``; not ready again within the timeout, the Workload is
  evicted (``Evicted`` reason ``PodsReadyTimeout``, counted in ``schedulingStats.evictions``
  with ``underlyingCause: WaitForRecovery`` and in ``requeueState``) and stopped and
  requeued like a preempted one.
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
    KUEUE_API,
    MANAGER,
    QUEUE_LABEL,
    KueueConfig,
    KueueWebhook,
)
from dispatch.testing.k8s.controllers.kueue_scheduler import JOB_UID, KueueScheduler
from dispatch.testing.k8s.meta import parse_rfc3339
from dispatch.testing.k8s.rbac import service_account_user
from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
WORKLOAD_API = KUEUE_API
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PODSET_LABEL = "kueue.x-k8s.io/podset"
#: the key of a scheduling pass over every queue (a TrainJob key names a namespace)
QUEUES: Key = ("", "")
#: emulated seconds before a TrainJob whose WorkloadPriorityClass is missing is looked at again
RETRY_PRIORITY = 5.0


class Kueue(Reconciler):
    name = "kueue"
    user = service_account_user("kueue-system", "kueue-controller-manager")
    watches = (
        (TRAINER_API, "TrainJob"),
        (KUEUE_API, "Workload"),
        (KUEUE_API, "ClusterQueue"),
        (KUEUE_API, "LocalQueue"),
        (KUEUE_API, "ResourceFlavor"),
        (KUEUE_API, "WorkloadPriorityClass"),
        ("v1", "Namespace"),
    )

    def __init__(self, config: KueueConfig) -> None:
        super().__init__()
        self.config = config

    def install(self, cluster: Any) -> None:
        """The webhook first, then the configuration's queue objects (so they are defaulted
        as any client's would be)."""
        super().install(cluster)
        cluster.store.admission.add(KueueWebhook())
        for obj in self.config.objects(cluster.config.namespaces):
            m = obj["metadata"]
            cluster.store.create(cluster.rtype(KUEUE_API, obj["kind"]), m.get("namespace"), obj)

    def keys(self, change: Change) -> list[Key]:
        if change.rtype.kind == "TrainJob":
            return [(change.namespace, change.name)]
        if change.rtype.kind == "Workload":
            return [*owner_keys(change, "TrainJob"), QUEUES]
        return [QUEUES]

    def reconcile(self, key: Key) -> float | None:
        if key == QUEUES:
            KueueScheduler(self.cluster).run()
            return None
        tj = self.find(TRAINER_API, "TrainJob", *key)
        queued = tj is not None and QUEUE_LABEL in (tj["metadata"].get("labels") or {})
        if tj is not None and queued and not tj["metadata"].get("deletionTimestamp"):
            return self._job(tj)
        return None

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
            return self._create_workload(tj) if finished is None else None
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
            if self.config.pods_ready_enabled:
                again = self._pods_ready(tj, wl, conds, now)
        elif self.config.pods_ready_enabled:
            set_condition(conds, "PodsReady", "False", "WaitForStart",
                          "Not all pods are ready or succeeded", now)  # fmt: skip
        if status != (wl.get("status") or {}):
            write_status(self.cluster, self.rtype(WORKLOAD_API, "Workload"), wl, status)
        return again

    def _pods_ready(
        self, tj: JsonObj, wl: JsonObj, conds: list[JsonObj], now: float
    ) -> float | None:
        """``generatePodsReadyCondition`` for an admitted workload; returns when to look
        again (a recovery timeout running)."""
        jobs = (tj.get("status") or {}).get("jobsStatus") or []
        ready = sum(j.get("ready", 0) + j.get("succeeded", 0) for j in jobs)
        wanted = sum(int(p.get("count", 1)) > 0 for p in wl["spec"]["podSets"])
        pods_ready = condition(conds, "PodsReady")
        if jobs and ready >= wanted:
            old = (pods_ready or {}).get("reason")
            reason = "Recovered" if old in ("WaitForRecovery", "Recovered") else "Started"
            set_condition(conds, "PodsReady", "True", reason,
                          "All pods reached readiness and the workload is running", now)  # fmt: skip
        elif (
            self.config.recovery_timeout is not None
            and pods_ready is not None
            and (is_true(wl, "PodsReady") or pods_ready.get("reason") == "WaitForRecovery")
        ):
            return self._recovery(wl, conds, now)
        elif pods_ready is None or pods_ready.get("status") == "True":
            set_condition(conds, "PodsReady", "False",
                          "WaitForRecovery" if pods_ready else "WaitForStart",
                          "At least one pod has failed, waiting for recovery" if pods_ready
                          else "Not all pods are ready or succeeded", now)  # fmt: skip
        return None

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

    def _create_workload(self, tj: JsonObj) -> float | None:
        """Returns when to try again (its WorkloadPriorityClass missing), else None."""
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
            return None
        try:
            _, pod_sets = render(tj, runtime)
        except (UnsupportedRuntime, BuildRefused):
            return None
        labels = m.get("labels") or {}
        priority: JsonObj = {"priority": 0}
        if labels.get(PRIORITY_LABEL):
            wpc = self.find(KUEUE_API, "WorkloadPriorityClass", None, labels[PRIORITY_LABEL])
            if wpc is None:
                return RETRY_PRIORITY
            priority = {
                "priorityClassRef": {
                    "group": "kueue.x-k8s.io",
                    "kind": "WorkloadPriorityClass",
                    "name": labels[PRIORITY_LABEL],
                },
                "priority": int(wpc.get("value", 0)),
            }
        digest = hashlib.sha256(f"{m['name']}/{m['uid']}/TrainJob".encode()).hexdigest()[:5]
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
                **priority,
                "active": True,
                "podSets": [
                    {"name": p.name, "count": p.pods, "template": p.template} for p in pod_sets
                ],
            },
        }
        wl = self.cluster.store.create(self.rtype(WORKLOAD_API, "Workload"), m["namespace"], body)
        record_event(self.cluster, tj, "Normal", "CreatedWorkload",
                     f"Created Workload: {m['namespace']}/{wl['metadata']['name']}", "kueue-admission")  # fmt: skip
        return None

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

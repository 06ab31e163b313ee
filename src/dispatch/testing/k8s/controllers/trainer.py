"""The Trainer v2.3 TrainJob controller (``pkg/controller/trainjob_controller.go``).

Per reconcile of a TrainJob, in Trainer's order:

1. skip a TrainJob managed by another controller (``spec.managedBy``, honoured from v2.3);
2. an unknown runtime kind -> ``Failed`` reason ``TrainingRuntimeNotSupported``;
3. drop a ``Failed`` condition (except ``DeadlineExceeded``) — which is why a failed TrainJob
   whose JobSet disappears is built again (kubeflow/trainer#3737);
4. unless finished: take the runtime from the snapshot ConfigMap (creating it from the live
   runtime the first time), render the JobSet (:mod:`dispatch.adapters.kubeflow.planning.jobset`) and
   apply it when it is missing or either side is suspended; any error becomes a Warning event
   ``TrainJobResourcesCreationFailed`` and the status is left alone;
5. ``Suspended`` True/``Suspended`` or False/``Resumed``;
6. JobSet ``Completed``/``Failed`` (True) copied as ``Complete``/``Failed``, ``jobsStatus``
   from ``replicatedJobsStatus``;
7. ``activeDeadlineSeconds`` from creation or the last resume: past it, ``Failed`` reason
   ``DeadlineExceeded`` and the JobSet is deleted; before it, a requeue at the deadline.
"""

from __future__ import annotations

import json
from typing import Any

from dispatch.adapters.kubeflow.planning.jobset import (
    SNAPSHOT_KEY,
    SNAPSHOT_SUFFIX,
    BuildRefused,
    UnsupportedRuntime,
    build,
    runtime_snapshot,
)
from dispatch.testing.k8s.controllers.base import (
    MERGE,
    Key,
    Reconciler,
    condition,
    owner_keys,
    record_event,
    set_condition,
    write_status,
)
from dispatch.testing.k8s.controllers.ssh_keys import with_generated_keys
from dispatch.testing.k8s.controllers.trainer_webhook import TrainerWebhook
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.meta import parse_rfc3339
from dispatch.testing.k8s.rbac import service_account_user
from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
DEFAULT_MANAGER = "trainer.kubeflow.org/trainjob-controller"
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")
MAX_EVENT_MESSAGE = 950


def _finished(tj: JsonObj) -> bool:
    conds = (tj.get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds)


class TrainerController(Reconciler):
    name = "trainer"
    user = service_account_user("kubeflow-system", "kubeflow-trainer-controller-manager")
    watches = ((TRAINER_API, "TrainJob"), (JOBSET_API, "JobSet"))

    def __init__(self, *, webhooks: bool = True) -> None:
        super().__init__()
        self.webhooks = webhooks

    def install(self, cluster: Any) -> None:
        super().install(cluster)
        if self.webhooks:
            cluster.store.admission.add(TrainerWebhook())

    def keys(self, change: Change) -> list[Key]:
        if change.rtype.kind == "JobSet":
            return owner_keys(change, "TrainJob")
        return [(change.namespace, change.name)]

    def reconcile(self, key: Key) -> float | None:
        ns, name = key
        tj = self.find(TRAINER_API, "TrainJob", ns, name)
        if tj is None or tj["metadata"].get("deletionTimestamp"):
            return None
        spec = tj.get("spec") or {}
        if spec.get("managedBy", DEFAULT_MANAGER) != DEFAULT_MANAGER:
            return None
        status: JsonObj = json.loads(json.dumps(tj.get("status") or {}))
        conds: list[JsonObj] = status.setdefault("conditions", [])
        now = self.now()
        failed = condition(conds, "Failed")
        if failed is not None and failed.get("reason") != "DeadlineExceeded":
            conds.remove(failed)
        ref = spec.get("runtimeRef") or {}
        kind = ref.get("kind", "ClusterTrainingRuntime")
        group = ref.get("apiGroup", "trainer.kubeflow.org")
        if kind not in RUNTIME_KINDS or group != "trainer.kubeflow.org":
            set_condition(
                conds,
                "Failed",
                "True",
                "TrainingRuntimeNotSupported",
                f"unsupported runtime: {kind}.{group}",
                now,
            )
        elif not _finished({"status": status}):
            self._build(tj, kind, ref.get("name", ""))
        if spec.get("suspend"):
            set_condition(conds, "Suspended", "True", "Suspended", "TrainJob is suspended", now)
        elif (condition(conds, "Suspended") or {}).get("status") == "True":
            set_condition(conds, "Suspended", "False", "Resumed", "TrainJob is resumed", now)
        self._copy_jobset_status(tj, status)
        requeue = self._deadline(tj, status, now)
        if not status["conditions"]:
            status.pop("conditions")
        if status != (tj.get("status") or {}):
            write_status(self.cluster, self.rtype(TRAINER_API, "TrainJob"), tj, status)
        return requeue

    # ------------------------------------------------------------------ objects

    def _runtime(self, tj: JsonObj, kind: str, name: str) -> JsonObj:
        ns = tj["metadata"]["namespace"]
        cm_type = self.rtype("v1", "ConfigMap")
        snap = self.find("v1", "ConfigMap", ns, f"{tj['metadata']['name']}{SNAPSHOT_SUFFIX}")
        if snap is not None:
            loaded: JsonObj = json.loads(snap["data"][SNAPSHOT_KEY])
            return loaded
        try:
            runtime = self.cluster.store.get(
                self.rtype(TRAINER_API, kind), ns if kind == "TrainingRuntime" else None, name
            )
        except ApiError as exc:
            raise _BuildError(f"{kind} specified in TrainJob is not found: {exc.message}") from exc
        self.cluster.store.create(cm_type, ns, runtime_snapshot(tj, runtime))
        return runtime

    def _build(self, tj: JsonObj, kind: str, runtime_name: str) -> None:
        m = tj["metadata"]
        existing = self.find(JOBSET_API, "JobSet", m["namespace"], m["name"])
        if (
            existing is not None
            and not (tj.get("spec") or {}).get("suspend")
            and not existing["spec"].get("suspend")
        ):
            return  # a running JobSet is never changed: nothing to build
        try:
            runtime = self._runtime(tj, kind, runtime_name)
            built = build(tj, runtime)
            for other in built.others:  # a PodGroup first: its pods are judged by it
                self._create_missing(other)
            self._apply(tj, built.jobset)
        except (_BuildError, UnsupportedRuntime, BuildRefused, ApiError) as exc:
            text = exc.message if isinstance(exc, ApiError) else str(exc)
            message = f"TrainJob resources reconciliation failed: {text[:MAX_EVENT_MESSAGE]}"
            if len(text) > MAX_EVENT_MESSAGE:
                message += " ..."
            record_event(
                self.cluster,
                tj,
                "Warning",
                "TrainJobResourcesCreationFailed",
                message,
                "trainjob-controller",
                "Reconciling",
            )

    def _create_missing(self, obj: JsonObj) -> None:
        """Create ``obj`` unless it exists (MPI's Secret gets a real key pair as it is made)."""
        meta = obj["metadata"]
        if self.find(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]) is None:
            rtype = self.rtype(obj["apiVersion"], obj["kind"])
            self.cluster.store.create(rtype, meta.get("namespace"), with_generated_keys(obj))

    def _apply(self, tj: JsonObj, jobset: JsonObj) -> None:
        ns, name = tj["metadata"]["namespace"], tj["metadata"]["name"]
        js_type = self.rtype(JOBSET_API, "JobSet")
        existing = self.find(JOBSET_API, "JobSet", ns, name)
        if existing is None:
            self.cluster.store.create(js_type, ns, jobset)
            return
        if existing["metadata"].get("deletionTimestamp"):
            return
        if not (tj.get("spec") or {}).get("suspend") and not existing["spec"].get("suspend"):
            return  # a running JobSet is never changed
        patch = {
            "metadata": {
                k: v for k, v in jobset["metadata"].items() if k in ("labels", "annotations")
            }
        }
        patch["spec"] = jobset["spec"]
        patch["spec"].setdefault("suspend", False)
        self.cluster.store.patch(js_type, ns, name, MERGE, patch)

    # ------------------------------------------------------------------ status

    def _copy_jobset_status(self, tj: JsonObj, status: JsonObj) -> None:
        m = tj["metadata"]
        jobset = self.find(JOBSET_API, "JobSet", m["namespace"], m["name"])
        if jobset is None:
            return
        js_status = jobset.get("status") or {}
        for js_type, tj_type in (("Completed", "Complete"), ("Failed", "Failed")):
            found = condition(js_status.get("conditions") or [], js_type)
            if found is not None and found.get("status") == "True":
                copied = {**found, "type": tj_type}
                old = condition(status["conditions"], tj_type)
                if old is None:
                    status["conditions"].append(copied)
                elif old.get("reason") != "DeadlineExceeded":
                    status["conditions"][status["conditions"].index(old)] = copied
        jobs = [
            {
                k: rj.get(k, 0)
                for k in ("name", "ready", "succeeded", "failed", "active", "suspended")
            }
            for rj in js_status.get("replicatedJobsStatus") or []
        ]
        if jobs:
            status["jobsStatus"] = jobs

    def _deadline(self, tj: JsonObj, status: JsonObj, now: float) -> float | None:
        spec = tj.get("spec") or {}
        seconds = spec.get("activeDeadlineSeconds")
        if not seconds or spec.get("suspend") or _finished({"status": status}):
            return None
        start = parse_rfc3339(tj["metadata"]["creationTimestamp"])
        resumed = condition(status["conditions"], "Suspended")
        if resumed is not None and resumed.get("status") == "False":
            start = parse_rfc3339(resumed["lastTransitionTime"])
        deadline = start + float(seconds)
        if now <= deadline:
            return max(deadline - now, 0.001) + 0.001
        set_condition(
            status["conditions"],
            "Failed",
            "True",
            "DeadlineExceeded",
            "TrainJob exceeded its active deadline",
            now,
        )
        m = tj["metadata"]
        if self.find(JOBSET_API, "JobSet", m["namespace"], m["name"]) is not None:
            self.cluster.store.delete(self.rtype(JOBSET_API, "JobSet"), m["namespace"], m["name"])
        return None


class _BuildError(Exception):
    pass

"""The batch/v1 Job controller for Indexed Jobs (what JobSet creates), Kubernetes 1.33 style.

* One pod per index ``<job>-<index>-<5 chars>`` with labels ``batch.kubernetes.io/job-name``,
  ``controller-uid``, ``job-completion-index`` (also an annotation), hostname
  ``<job>-<index>`` under the template's subdomain, and with ``backoffLimitPerIndex`` the
  annotation ``batch.kubernetes.io/job-index-failure-count``.
* Failures: a pod in phase Failed, or one that vanished before finishing, is a failure
  (counted in ``status.failed``) unless a ``podFailurePolicy`` rule says ``Ignore``
  (``FailJob`` fails the Job at once with reason ``PodFailurePolicy``, its pod counted too, as
  ``matchPodFailurePolicy`` answers countFailed for it; ``FailIndex`` fails the index).
  The selector, template labels and ``restartPolicy`` rules of Job creation are the API
  server's (:mod:`dispatch.testing.k8s.workloads`). With ``restartPolicy: OnFailure`` the
  container restarts of active pods count too (``restartCount`` sum >= ``backoffLimit``).
  Over the limit: ``BackoffLimitExceeded``; per index: ``FailedIndexes`` /
  ``MaxFailedIndexesExceeded``. Messages as Kubernetes writes them.
* Terminal conditions are delayed as in 1.31+: ``FailureTarget`` / ``SuccessCriteriaMet``
  first, active pods deleted, then ``Failed`` / ``Complete`` once no pod is left running —
  which is when the crash-looping pods (and their evidence) are gone.
* ``suspend`` deletes the active pods (``Suspended``: ``JobSuspended`` / ``JobResumed``);
  they are not failures (``deleteJobPods`` removes their tracking finalizer first).
"""

from __future__ import annotations

import copy
from typing import Any

from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.controllers.base import (
    Key,
    Reconciler,
    condition,
    is_true,
    kube_controller,
    owner_keys,
    owner_ref,
    record_event,
    set_condition,
    write_status,
)
from dispatch.testing.k8s.errors import ApiError, FieldError, FieldErrorType
from dispatch.testing.k8s.meta import rfc3339
from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
B = "batch.kubernetes.io/"
INDEX = B + "job-completion-index"
FAILURE_COUNT = B + "job-index-failure-count"
TERMINAL = ("Succeeded", "Failed")
MESSAGES = {
    "BackoffLimitExceeded": "Job has reached the specified backoff limit",
    "FailedIndexes": "Job has failed indexes",
    "MaxFailedIndexesExceeded": "Job has exceeded the specified maximal number of failed indexes",
}


def _index(pod: JsonObj) -> int:
    return int((pod["metadata"].get("annotations") or {}).get(INDEX, "0"))


def _restarts(pod: JsonObj) -> int:
    st = pod.get("status") or {}
    statuses = (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or [])
    return sum(int(c.get("restartCount", 0)) for c in statuses)


def compress(indexes: set[int]) -> str:
    """``0-2,4``: the interval form of ``completedIndexes`` / ``failedIndexes``."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(indexes):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


class PodValidation:
    """The API server's pod checks that a runtimePatch can break: every container and init
    container needs an image, and container names are unique across both lists."""

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        if request.rtype.kind != "Pod" or request.subresource or request.operation != "CREATE":
            return []
        spec = request.obj.get("spec") or {}
        errors, seen = [], set()
        for field in ("initContainers", "containers"):
            for i, c in enumerate(spec.get(field) or []):
                if not c.get("image"):
                    errors.append(FieldError.required(f"spec.{field}[{i}].image"))
                if c.get("name") in seen:
                    errors.append(
                        FieldError(
                            FieldErrorType.DUPLICATE, f"spec.{field}[{i}].name", "", c.get("name")
                        )
                    )
                seen.add(c.get("name"))
        return errors


class JobController(Reconciler):
    name = "job"
    user = kube_controller("job")
    watches = (("batch/v1", "Job"), ("v1", "Pod"))

    def install(self, cluster: Any) -> None:
        super().install(cluster)
        cluster.store.admission.add(PodValidation())

    def __init__(self) -> None:
        super().__init__()
        # per Job uid: pod uid -> (index, finished) for every pod seen, to count failures once
        self._seen: dict[str, dict[str, tuple[int, bool]]] = {}
        self._counted: dict[str, set[str]] = {}

    def keys(self, change: Change) -> list[Key]:
        if change.rtype.kind == "Pod":
            return owner_keys(change, "Job")
        return [(change.namespace, change.name)]

    def reconcile(self, key: Key) -> float | None:
        ns, name = key
        job = self.find("batch/v1", "Job", ns, name)
        if job is None:
            return None
        uid = job["metadata"]["uid"]
        if job["metadata"].get("deletionTimestamp"):
            self._seen.pop(uid, None)
            return None
        pods = [o for t, o in self.cluster.store.dependents(uid) if t.kind == "Pod"]
        spec, status = job["spec"], copy.deepcopy(job.get("status") or {})
        conds: list[JsonObj] = status.setdefault("conditions", [])
        now = self.now()
        running = [p for p in pods if (p.get("status") or {}).get("phase") not in TERMINAL]
        active = [p for p in running if not p["metadata"].get("deletionTimestamp")]
        if is_true(job, "Complete") or is_true(job, "Failed"):
            self._delete(active)
            return None
        failed_now = self._new_failures(uid, pods)
        verdict = self._failure_verdict(job, status, pods, active, failed_now)
        target = condition(conds, "FailureTarget") or condition(conds, "SuccessCriteriaMet")
        if target is None and verdict is not None:
            set_condition(
                conds, "FailureTarget", "True", verdict[0], verdict[1], now, probe_times=True
            )
            target = condition(conds, "FailureTarget")
        completed = {_index(p) for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"}
        completions = int(spec.get("completions", spec.get("parallelism", 1)))
        if target is None and len(completed) >= completions:
            set_condition(
                conds, "SuccessCriteriaMet", "True", "CompletionsReached",
                "Reached expected number of succeeded pods", now, probe_times=True,
            )  # fmt: skip
            target = condition(conds, "SuccessCriteriaMet")
        if target is not None:
            self._delete(active)
            if not running:
                final = "Failed" if target["type"] == "FailureTarget" else "Complete"
                set_condition(
                    conds, final, "True", target["reason"], target["message"], now, probe_times=True
                )
                if final == "Complete":
                    status["completionTime"] = rfc3339(now)
        elif spec.get("suspend"):
            # the Job controller removes its tracking finalizer from the pods it deletes for a
            # suspension (``deleteJobPods``), so they are never counted as failed
            self._counted.setdefault(uid, set()).update(p["metadata"]["uid"] for p in active)
            self._delete(active)
            set_condition(
                conds, "Suspended", "True", "JobSuspended", "Job suspended", now, probe_times=True
            )
            status.pop("startTime", None)
        else:
            if condition(conds, "Suspended") is not None:
                set_condition(
                    conds, "Suspended", "False", "JobResumed", "Job resumed", now, probe_times=True
                )
            status.setdefault("startTime", rfc3339(now))
            self._create_missing(job, pods, completed, status)
        self._counts(status, pods, completed)
        if not conds:
            status.pop("conditions")
        if status != (job.get("status") or {}):
            write_status(self.cluster, self.rtype("batch/v1", "Job"), job, status)
        return None

    # ------------------------------------------------------------------ failures

    def _new_failures(self, uid: str, pods: list[JsonObj]) -> list[JsonObj]:
        """Pods that failed since the last look: phase Failed, or gone while unfinished."""
        seen = self._seen.setdefault(uid, {})
        counted = self._counted.setdefault(uid, set())
        present = {p["metadata"]["uid"]: p for p in pods}
        out: list[JsonObj] = []
        for pod_uid, (index, finished) in list(seen.items()):
            if pod_uid not in present:
                if not finished and pod_uid not in counted:
                    counted.add(pod_uid)
                    out.append({"metadata": {"uid": pod_uid, "annotations": {INDEX: str(index)}}})
                del seen[pod_uid]
        for pod_uid, pod in present.items():
            phase = (pod.get("status") or {}).get("phase")
            seen[pod_uid] = (_index(pod), phase in TERMINAL)
            if phase == "Failed" and pod_uid not in counted:
                counted.add(pod_uid)
                out.append(pod)
        return out

    def _failure_verdict(
        self,
        job: JsonObj,
        status: JsonObj,
        pods: list[JsonObj],
        active: list[JsonObj],
        new: list[JsonObj],
    ) -> tuple[str, str] | None:
        spec = job["spec"]
        per_index = spec.get("backoffLimitPerIndex")
        failed_indexes = _parse(status.get("failedIndexes", ""))
        fail_job: tuple[str, str] | None = None
        for pod in new:
            action, message = _pod_failure_action(job, pod)
            if action == "Ignore":
                continue
            # every failed pod not ignored is counted, the one a FailJob rule matched too
            status["failed"] = int(status.get("failed", 0)) + 1
            if action == "FailJob":
                fail_job = fail_job or ("PodFailurePolicy", message)
                continue
            if per_index is not None:
                index = _index(pod)
                count = int((pod["metadata"].get("annotations") or {}).get(FAILURE_COUNT, "0")) + 1
                if action == "FailIndex" or count > int(per_index):
                    failed_indexes.add(index)
        if per_index is not None and failed_indexes:
            status["failedIndexes"] = compress(failed_indexes)
        if fail_job is not None:
            return fail_job
        if per_index is not None:
            max_failed = spec.get("maxFailedIndexes")
            if max_failed is not None and len(failed_indexes) > int(max_failed):
                return "MaxFailedIndexesExceeded", MESSAGES["MaxFailedIndexesExceeded"]
            completions = int(spec.get("completions", 1))
            done = {_index(p) for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"}
            if failed_indexes and len(done | failed_indexes) >= completions:
                return "FailedIndexes", MESSAGES["FailedIndexes"]
            return None
        limit = int(spec.get("backoffLimit", 6))
        restart_policy = spec["template"].get("spec", {}).get("restartPolicy", "Always")
        failures = int(status.get("failed", 0))
        if restart_policy == "OnFailure":
            failures += sum(_restarts(p) for p in active)
            if failures >= limit and (failures > 0 or new):
                return "BackoffLimitExceeded", MESSAGES["BackoffLimitExceeded"]
        elif failures > limit:
            return "BackoffLimitExceeded", MESSAGES["BackoffLimitExceeded"]
        return None

    # ------------------------------------------------------------------ pods

    def _delete(self, pods: list[JsonObj]) -> None:
        for pod in pods:
            m = pod["metadata"]
            if not m.get("deletionTimestamp"):
                self.cluster.store.delete(self.rtype("v1", "Pod"), m["namespace"], m["name"])

    def _create_missing(
        self, job: JsonObj, pods: list[JsonObj], completed: set[int], status: JsonObj
    ) -> None:
        spec = job["spec"]
        completions = int(spec.get("completions", spec.get("parallelism", 1)))
        failed_indexes = _parse(status.get("failedIndexes", ""))
        wait_terminal = spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy")
        busy = {
            _index(p)
            for p in pods
            if (p.get("status") or {}).get("phase") not in TERMINAL
            and (wait_terminal or not p["metadata"].get("deletionTimestamp"))
        }
        failures: dict[int, int] = {}
        for pod in pods:
            if (pod.get("status") or {}).get("phase") == "Failed":
                failures[_index(pod)] = failures.get(_index(pod), 0) + 1
        for index in range(completions):
            if index in completed or index in busy or index in failed_indexes:
                continue
            pod = self._pod(job, index, failures.get(index, 0))
            try:
                self.cluster.store.create(
                    self.rtype("v1", "Pod"), job["metadata"]["namespace"], pod
                )
            except ApiError as exc:
                message = f"Error creating: {exc.message}"
                record_event(
                    self.cluster, job, "Warning", "FailedCreate", message, "job-controller"
                )
                return

    def _pod(self, job: JsonObj, index: int, failures: int) -> JsonObj:
        m = job["metadata"]
        template = copy.deepcopy(job["spec"].get("template") or {})
        meta = template.get("metadata") or {}
        labels = {
            **(meta.get("labels") or {}),
            B + "job-name": m["name"],
            "job-name": m["name"],
            B + "controller-uid": m["uid"],
            "controller-uid": m["uid"],
            INDEX: str(index),
        }
        annotations = {**(meta.get("annotations") or {}), INDEX: str(index)}
        if job["spec"].get("backoffLimitPerIndex") is not None:
            annotations[FAILURE_COUNT] = str(failures)
        spec = template.get("spec") or {}
        if spec.get("subdomain"):
            spec["hostname"] = f"{m['name']}-{index}"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{m['name']}-{index}-",
                "namespace": m["namespace"],
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [owner_ref(job)],
            },
            "spec": spec,
        }

    def _counts(self, status: JsonObj, pods: list[JsonObj], completed: set[int]) -> None:
        def phase(p: JsonObj) -> str:
            return str((p.get("status") or {}).get("phase"))

        live = [p for p in pods if phase(p) not in TERMINAL]
        status["active"] = sum(1 for p in live if not p["metadata"].get("deletionTimestamp"))
        status["terminating"] = sum(1 for p in live if p["metadata"].get("deletionTimestamp"))
        status["ready"] = sum(
            1
            for p in live
            if not p["metadata"].get("deletionTimestamp")
            and any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        )
        status["succeeded"] = len(completed)
        status.setdefault("failed", 0)
        if completed:
            status["completedIndexes"] = compress(completed)
        status.setdefault("uncountedTerminatedPods", {})


def _parse(text: str) -> set[int]:
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _pod_failure_action(job: JsonObj, pod: JsonObj) -> tuple[str, str]:
    """The ``podFailurePolicy`` action for a failed pod and the Job message of a FailJob."""
    policy = job["spec"].get("podFailurePolicy") or {}
    m = pod["metadata"]
    where = f"{m.get('namespace', job['metadata']['namespace'])}/{m.get('name', '')}"
    st = pod.get("status") or {}
    for i, rule in enumerate(policy.get("rules") or []):
        codes = rule.get("onExitCodes")
        if codes:
            for c in st.get("containerStatuses") or []:
                if codes.get("containerName") and codes["containerName"] != c.get("name"):
                    continue
                code = ((c.get("state") or {}).get("terminated") or {}).get("exitCode")
                if code is None or code == 0:
                    continue
                inside = code in (codes.get("values") or [])
                if inside == (codes.get("operator", "In") == "In"):
                    msg = (
                        f"Container {c['name']} for pod {where} failed with exit code {code} "
                        f"matching {rule['action']} rule at index {i}"
                    )
                    return rule["action"], msg
        for want in rule.get("onPodConditions") or []:
            for have in st.get("conditions") or []:
                if have.get("type") == want.get("type") and have.get("status") == want.get(
                    "status", "True"
                ):
                    msg = f"Pod {where} has condition {have['type']} matching {rule['action']} rule at index {i}"
                    return rule["action"], msg
    return "Count", ""

"""The JobSet v0.12 controller: child Jobs, failure policy, restarts, suspend, status.

* Jobs ``<jobset>-<replicatedJob>-<index>`` with the JobSet labels and annotations on the Job
  and its pod template (jobset-name/uid, replicatedjob-name/replicas, job-index,
  job-global-index, global-replicas, job-key, group-name/replicas, job-group-index,
  restart-attempt), pod ``subdomain`` = ``network.subdomain`` or the JobSet name unless
  ``network.enableDNSHostnames`` is false; the webhook defaults ``completionMode: Indexed`` and
  pod ``restartPolicy: OnFailure``; the API server defaults ``backoffLimit`` 6.
* With DNS hostnames on (the webhook's default), a headless Service named like the subdomain
  (``clusterIP: None``, selecting ``jobset-name``, ``publishNotReadyAddresses`` as the network
  says, default true), owned by the JobSet, so pods resolve ``<hostname>.<subdomain>``.
* A failed Job: no ``failurePolicy`` -> ``Failed``/``FailedJobs``; else the first matching rule
  (reasons, message patterns, target jobs; earliest failure first) decides ``FailJobSet``,
  ``RestartJobSet`` (counts toward ``maxRestarts``; at the limit ``ReachedMaxRestarts``) or
  ``RestartJobSetAndIgnoreMaxRestarts``; no matching rule = ``RestartJobSet``. A restart
  deletes the older Jobs in the foreground and creates new ones, and sets ``RestartingJobSet``
  True; it turns False (reason ``JobsReady``, "all jobs are ready") once every Job of the new
  run is ready or done, or when the JobSet fails (``JobSetFailed``, "jobset failed"),
  completes (``JobSetCompleted``) or is suspended (``JobSetSuspended``), each with a Normal
  event, as v0.12's ``setRestartingConditionFalse``.
* ``successPolicy`` All/Any -> ``Completed``/``AllJobsCompleted``. When finished, still-active
  Jobs are deleted in the foreground; the failed Job and its pods remain.
* ``suspend`` is propagated to the Jobs (``SuspendedJobs`` / ``ResumeJobs``); on resume the
  Jobs' pod templates take the JobSet's labels, annotations, nodeSelector, tolerations and
  schedulingGates (Kueue's admission writes them there).
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

from dispatch.testing.k8s.admission import AdmissionRequest
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
from dispatch.testing.k8s.errors import ApiError, FieldError
from dispatch.testing.k8s.meta import parse_rfc3339
from dispatch.testing.k8s.rbac import service_account_user
from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
P = "jobset.sigs.k8s.io/"
RESTART_ATTEMPT = P + "restart-attempt"
_POD_TEMPLATE_FIELDS = ("nodeSelector", "tolerations", "schedulingGates")


def _job_failed(job: JsonObj) -> JsonObj | None:
    found = condition((job.get("status") or {}).get("conditions") or [], "Failed")
    return found if found is not None and found.get("status") == "True" else None


class JobSetWebhook:
    """JobSet's validating webhook, the part that bites Trainer users: generated pod names
    ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>-<5 chars>`` must fit in 63 characters."""

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        if request.rtype.kind != "JobSet" or request.subresource or request.operation != "CREATE":
            return []
        name = request.obj["metadata"].get("name", "")
        errors = []
        for i, rjob in enumerate((request.obj.get("spec") or {}).get("replicatedJobs") or []):
            pods = int(((rjob.get("template") or {}).get("spec") or {}).get("parallelism", 1))
            longest = f"{name}-{rjob.get('name')}-{int(rjob.get('replicas', 1)) - 1}-{max(pods, 1) - 1}-abcde"
            if len(longest) > 63:
                errors.append(
                    FieldError.invalid(
                        f"spec.replicatedJobs[{i}]",
                        longest,
                        "pod names generated for this JobSet will exceed 63 characters",
                    )
                )
        return errors


class JobSetController(Reconciler):
    name = "jobset"
    user = service_account_user("jobset-system", "jobset-controller-manager")
    watches = ((JOBSET_API, "JobSet"), ("batch/v1", "Job"))

    def install(self, cluster: Any) -> None:
        super().install(cluster)
        cluster.store.admission.add(JobSetWebhook())

    def keys(self, change: Change) -> list[Key]:
        if change.rtype.kind == "Job":
            return owner_keys(change, "JobSet")
        return [(change.namespace, change.name)]

    def reconcile(self, key: Key) -> float | None:
        ns, name = key
        js = self.find(JOBSET_API, "JobSet", ns, name)
        if js is None or js["metadata"].get("deletionTimestamp"):
            return None
        status: JsonObj = copy.deepcopy(js.get("status") or {})
        status.setdefault("restarts", 0)
        status.setdefault("conditions", [])
        jobs = self._jobs(js)
        attempt = int(status["restarts"])
        stale = [
            j for j in jobs if int(j["metadata"]["labels"].get(RESTART_ATTEMPT, "0")) < attempt
        ]
        current = [j for j in jobs if j not in stale]
        for job in stale:
            if not job["metadata"].get("deletionTimestamp"):
                self._delete_job(job)
        rows = self._replicated_status(js, current)
        if not status.get("terminalState"):
            if not js["spec"].get("suspend") and _all_ready(js, rows):
                self._restarting_false(js, status, "JobsReady", "all jobs are ready")
            self._decide(js, status, current)
        if status.get("terminalState"):
            for job in current:
                if not (is_true(job, "Complete") or _job_failed(job)):
                    self._delete_job(job)
        else:
            self._headless_service(js)
            self._suspend_or_resume(js, status, current)
            if int(status["restarts"]) == attempt:
                self._create_missing(js, current, attempt)
        status["replicatedJobsStatus"] = rows
        if not status["conditions"]:
            status.pop("conditions")
        if status != (js.get("status") or {}):
            write_status(self.cluster, self.rtype(JOBSET_API, "JobSet"), js, status)
        return None

    # ------------------------------------------------------------------ decisions

    def _decide(self, js: JsonObj, status: JsonObj, jobs: list[JsonObj]) -> None:
        now, conds = self.now(), status["conditions"]
        failed = [j for j in jobs if _job_failed(j)]
        if failed:
            self._on_failure(js, status, failed)
            return
        success = js["spec"].get("successPolicy") or {}
        targets = success.get("targetReplicatedJobs") or []
        wanted = [
            j
            for j in jobs
            if not targets or j["metadata"]["labels"][P + "replicatedjob-name"] in targets
        ]
        done = [j for j in wanted if is_true(j, "Complete")]
        expected = sum(
            int(rj.get("replicas", 1))
            for rj in js["spec"]["replicatedJobs"]
            if not targets or rj["name"] in targets
        )
        any_ok = success.get("operator") == "Any" and done
        if any_ok or (expected and len(done) == expected):
            set_condition(
                conds, "Completed", "True", "AllJobsCompleted", "jobset completed successfully", now
            )
            status["terminalState"] = "Completed"
            record_event(
                self.cluster,
                js,
                "Normal",
                "AllJobsCompleted",
                "jobset completed successfully",
                "jobset",
            )
            self._restarting_false(js, status, "JobSetCompleted", "jobset completed successfully")

    def _on_failure(self, js: JsonObj, status: JsonObj, failed: list[JsonObj]) -> None:
        policy = js["spec"].get("failurePolicy")
        failed.sort(key=lambda j: parse_rfc3339(_job_failed(j)["lastTransitionTime"]))  # type: ignore[index]
        if policy is None:
            return self._fail(
                js, status, "FailedJobs", "jobset failed due to one or more job failures", failed[0]
            )
        action, rule_name, first = "RestartJobSet", "", failed[0]
        for i, rule in enumerate(policy.get("rules") or []):
            match = [j for j in failed if _rule_matches(rule, j)]
            if match:
                action, first = rule.get("action", "RestartJobSet"), match[0]
                rule_name = rule.get("name") or f"failurePolicyRule{i}"
                break
        job_name = first["metadata"]["name"]
        if action == "FailJobSet":
            return self._fail(
                js,
                status,
                "FailJobSetFailurePolicyAction",
                "applying FailJobSet failure policy action",
                first,
            )
        counts = action == "RestartJobSet"
        if counts and int(status.get("restartsCountTowardsMax", 0)) >= int(
            policy.get("maxRestarts", 0)
        ):
            return self._fail(
                js,
                status,
                "ReachedMaxRestarts",
                "jobset failed due to reaching max number of restarts",
                first,
            )
        status["restarts"] = int(status["restarts"]) + 1
        if counts:
            status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax", 0)) + 1
        message = f"applying {action} failure policy action (first failed job: {job_name})"
        reason = f"FailurePolicy_{rule_name}" if rule_name else "DefaultFailurePolicy"
        set_condition(status["conditions"], "RestartingJobSet", "True", reason, message, self.now())
        record_event(self.cluster, js, "Warning", f"{action}FailurePolicyAction", message, "jobset")
        return None

    def _fail(self, js: JsonObj, status: JsonObj, reason: str, text: str, first: JsonObj) -> None:
        message = f"{text} (first failed job: {first['metadata']['name']})"
        set_condition(status["conditions"], "Failed", "True", reason, message, self.now())
        status["terminalState"] = "Failed"
        record_event(self.cluster, js, "Warning", reason, message, "jobset")
        self._restarting_false(js, status, "JobSetFailed", "jobset failed")

    def _restarting_false(self, js: JsonObj, status: JsonObj, reason: str, message: str) -> None:
        """``setRestartingConditionFalse``: an existing ``RestartingJobSet`` condition turns
        False (a new time when it was True; reason and message updated otherwise); none is
        added when there is none. A change is announced by a Normal event, as any of JobSet's
        condition changes."""
        conds = status["conditions"]
        old = condition(conds, "RestartingJobSet")
        if old is None:
            return
        if set_condition(conds, "RestartingJobSet", "False", reason, message, self.now()):
            record_event(self.cluster, js, "Normal", reason, message, "jobset")

    def _headless_service(self, js: JsonObj) -> None:
        """``createHeadlessSvcIfNecessary``: with DNS hostnames enabled (JobSet's webhook
        defaults ``network.enableDNSHostnames`` to true), a headless Service named after the
        pods' subdomain selects the JobSet's pods, owned by the JobSet; an existing Service of
        that name is left as it is."""
        network = js["spec"].get("network") or {}
        if network.get("enableDNSHostnames") is False:
            return
        m = js["metadata"]
        name = _subdomain(js)
        service_type = self.rtype("v1", "Service")
        if self.cluster.store.peek(service_type, m["namespace"], name) is not None:
            return
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": m["namespace"],
                "ownerReferences": [owner_ref(js)],
            },
            "spec": {
                "clusterIP": "None",
                "selector": {P + "jobset-name": m["name"]},
                "publishNotReadyAddresses": network.get("publishNotReadyAddresses", True)
                is not False,
            },
        }
        try:
            self.cluster.store.create(service_type, m["namespace"], service)
        except ApiError as exc:
            record_event(
                self.cluster, js, "Warning", "HeadlessServiceCreationFailed", exc.message, "jobset"
            )
            raise

    # ------------------------------------------------------------------ jobs

    def _jobs(self, js: JsonObj) -> list[JsonObj]:
        uid = js["metadata"]["uid"]
        return [obj for rtype, obj in self.cluster.store.dependents(uid) if rtype.kind == "Job"]

    def _delete_job(self, job: JsonObj) -> None:
        m = job["metadata"]
        if not m.get("deletionTimestamp"):
            self.cluster.store.delete(
                self.rtype("batch/v1", "Job"), m["namespace"], m["name"], propagation="Foreground"
            )

    def _create_missing(self, js: JsonObj, jobs: list[JsonObj], attempt: int) -> None:
        names = {j["metadata"]["name"] for j in jobs}
        global_index = 0
        global_replicas = sum(int(rj.get("replicas", 1)) for rj in js["spec"]["replicatedJobs"])
        for rjob in js["spec"]["replicatedJobs"]:
            for index in range(int(rjob.get("replicas", 1))):
                job_name = f"{js['metadata']['name']}-{rjob['name']}-{index}"
                if job_name not in names:
                    body = self._job(
                        js, rjob, index, global_index, global_replicas, attempt, job_name
                    )
                    self.cluster.store.create(
                        self.rtype("batch/v1", "Job"), js["metadata"]["namespace"], body
                    )
                global_index += 1

    def _job(
        self,
        js: JsonObj,
        rjob: JsonObj,
        index: int,
        gindex: int,
        greplicas: int,
        attempt: int,
        name: str,
    ) -> JsonObj:
        m = js["metadata"]
        template = copy.deepcopy(rjob.get("template") or {})
        spec = template.setdefault("spec", {})
        spec.setdefault("completionMode", "Indexed")
        if "backoffLimitPerIndex" in spec:
            spec.setdefault("backoffLimit", 2147483647)
        spec.setdefault("backoffLimit", 6)
        pod = spec.setdefault("template", {})
        pod_spec = pod.setdefault("spec", {})
        pod_spec.setdefault("restartPolicy", "OnFailure")
        if (js["spec"].get("network") or {}).get("enableDNSHostnames") is not False:
            pod_spec["subdomain"] = _subdomain(js)
        spec["suspend"] = bool(js["spec"].get("suspend"))
        key = hashlib.sha1(f"{m['namespace']}/{name}".encode(), usedforsecurity=False).hexdigest()
        meta = {
            P + "jobset-name": m["name"],
            P + "jobset-uid": m["uid"],
            P + "replicatedjob-name": rjob["name"],
            P + "replicatedjob-replicas": str(rjob.get("replicas", 1)),
            P + "job-index": str(index),
            P + "job-global-index": str(gindex),
            P + "global-replicas": str(greplicas),
            P + "job-key": key,
            P + "group-name": rjob.get("groupName", "default"),
            P + "group-replicas": str(rjob.get("replicas", 1)),
            P + "job-group-index": str(index),
            RESTART_ATTEMPT: str(attempt),
        }
        job_meta = template.setdefault("metadata", {})
        for where in (job_meta, pod.setdefault("metadata", {})):
            where["labels"] = {**(where.get("labels") or {}), **meta}
            where["annotations"] = {**(where.get("annotations") or {}), **meta}
        job_meta.update(name=name, namespace=m["namespace"], ownerReferences=[owner_ref(js)])
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": spec}

    def _suspend_or_resume(self, js: JsonObj, status: JsonObj, jobs: list[JsonObj]) -> None:
        suspend = bool(js["spec"].get("suspend"))
        now, conds = self.now(), status["conditions"]
        job_type = self.rtype("batch/v1", "Job")
        templates = {rj["name"]: rj for rj in js["spec"]["replicatedJobs"]}
        for job in jobs:
            m = job["metadata"]
            if bool(job["spec"].get("suspend")) == suspend or m.get("deletionTimestamp"):
                continue
            if is_true(job, "Complete") or _job_failed(job):
                continue
            patch: JsonObj = {"spec": {"suspend": suspend}}
            rjob = templates.get(m["labels"].get(P + "replicatedjob-name", ""))
            if not suspend and rjob is not None:
                src = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
                pod_meta = src.get("metadata") or {}
                tmpl: JsonObj = {
                    "metadata": {
                        "labels": {**(pod_meta.get("labels") or {})},
                        "annotations": {**(pod_meta.get("annotations") or {})},
                    },
                    "spec": {f: (src.get("spec") or {}).get(f) for f in _POD_TEMPLATE_FIELDS},
                }
                patch["spec"]["template"] = tmpl
            self.cluster.store.patch(job_type, m["namespace"], m["name"], MERGE, patch)
        if suspend:
            set_condition(conds, "Suspended", "True", "SuspendedJobs", "jobset is suspended", now)
            self._restarting_false(js, status, "JobSetSuspended", "jobset is suspended")
        elif condition(conds, "Suspended") is not None:
            set_condition(conds, "Suspended", "False", "ResumeJobs", "jobset is resumed", now)

    def _replicated_status(self, js: JsonObj, jobs: list[JsonObj]) -> list[JsonObj]:
        out = []
        for rjob in js["spec"]["replicatedJobs"]:
            mine = [
                j
                for j in jobs
                if j["metadata"]["labels"].get(P + "replicatedjob-name") == rjob["name"]
            ]
            row = {
                "name": rjob["name"],
                "ready": 0,
                "succeeded": 0,
                "failed": 0,
                "active": 0,
                "suspended": 0,
            }
            for job in mine:
                st = job.get("status") or {}
                parallelism = int(job["spec"].get("parallelism", 1))
                if job["spec"].get("completions") is not None:
                    parallelism = min(parallelism, int(job["spec"]["completions"]))
                if is_true(job, "Complete"):
                    row["succeeded"] += 1
                elif _job_failed(job):
                    row["failed"] += 1
                elif job["spec"].get("suspend"):
                    row["suspended"] += 1
                    row["active"] += int(int(st.get("active", 0)) > 0)
                else:
                    if int(st.get("ready", 0)) + int(st.get("succeeded", 0)) >= parallelism:
                        row["ready"] += 1
                    if int(st.get("active", 0)) > 0:
                        row["active"] += 1
            out.append(row)
        return out


def _subdomain(js: JsonObj) -> str:
    """``GetSubdomain``: ``network.subdomain``, else the JobSet's name."""
    return str((js["spec"].get("network") or {}).get("subdomain") or js["metadata"]["name"])


def _all_ready(js: JsonObj, rows: list[JsonObj]) -> bool:
    """``allJobsReady``: ready plus succeeded Jobs of the current run equal all replicas."""
    total = sum(int(rj.get("replicas", 1)) for rj in js["spec"]["replicatedJobs"])
    return total == sum(int(r["ready"]) + int(r["succeeded"]) for r in rows)


def _rule_matches(rule: JsonObj, job: JsonObj) -> bool:
    failed = _job_failed(job) or {}
    reasons = rule.get("onJobFailureReasons") or []
    if reasons and failed.get("reason") not in reasons:
        return False
    patterns = rule.get("onJobFailureMessagePatterns") or []
    if patterns and not any(re.search(p, failed.get("message", "")) for p in patterns):
        return False
    targets = rule.get("targetReplicatedJobs") or []
    rjob = job["metadata"]["labels"].get(P + "replicatedjob-name")
    return not targets or rjob in targets

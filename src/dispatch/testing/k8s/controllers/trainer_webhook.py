"""Trainer's admission webhooks (v2.3), as admission plugins of the emulator.

TrainJob (``validator.trainjob`` + ``defaulter.trainjob``): the runtime kind must be supported
(``unsupported runtime: ...``) and the runtime must exist; torch reserved ``PET_*`` env;
runtimePatches (JobSet plugin): a domain-prefixed ``manager``, replicated jobs and
(init) containers that exist in the runtime (init-container names are checked against every
container name of the job, init or not, as Trainer does), no ``env`` for containers ``node``,
``dataset-initializer``, ``model-initializer``, and changes only while suspended (before or
after the update) with no active child Job. New or changed patches are stamped with ``time``.

Runtimes (``validator.(cluster)trainingruntime``): ancestor replicated jobs must have
``replicas: 1``; skipped with label ``trainer.kubeflow.org/webhook-validation: disabled``.
"""

from __future__ import annotations

import re
from typing import Any

from dispatch.adapters.kubeflow.planning.jobset import (
    DATASET_INITIALIZER,
    MODEL_INITIALIZER,
    TORCH_RESERVED_ENV,
    merged_template,
)
from dispatch.adapters.kubeflow.planning.runtime import (
    ANCESTOR_LABEL,
    NODE_CONTAINER,
    env_injection_targets,
)
from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.errors import ApiError, FieldError
from dispatch.testing.k8s.meta import rfc3339

JsonObj = dict[str, Any]
GROUP = "trainer.kubeflow.org"
_DOMAIN_PATH = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+/.+$")
_NO_ENV = (NODE_CONTAINER, DATASET_INITIALIZER, MODEL_INITIALIZER)
PATCHES = "spec.runtimePatches"


class TrainerWebhook:
    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        if request.subresource or request.rtype.group != GROUP:
            return []
        if request.rtype.kind == "TrainJob":
            self._default(request)
            return self._validate_trainjob(request)
        if request.rtype.kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
            return _validate_runtime(request)
        return []

    def _default(self, request: AdmissionRequest) -> None:
        old_patches = {
            p.get("manager"): p
            for p in (request.old or {}).get("spec", {}).get("runtimePatches") or []
        }
        now = rfc3339(request.store.clock.now())
        for patch in (request.obj.get("spec") or {}).get("runtimePatches") or []:
            old = old_patches.get(patch.get("manager"))
            if old is None or {**old, "time": None} != {**patch, "time": None}:
                patch["time"] = now

    def _validate_trainjob(self, request: AdmissionRequest) -> list[FieldError]:
        tj = request.obj
        spec = tj.get("spec") or {}
        ref = spec.get("runtimeRef") or {}
        kind = ref.get("kind", "ClusterTrainingRuntime")
        if (
            kind not in ("TrainingRuntime", "ClusterTrainingRuntime")
            or ref.get("apiGroup", GROUP) != GROUP
        ):
            return [
                FieldError.invalid("spec.runtimeRef", ref, f"unsupported runtime: {kind}.{GROUP}")
            ]
        catalog = request.store.catalog
        rtype = catalog.find(
            GROUP,
            "v1alpha1",
            "trainingruntimes" if kind == "TrainingRuntime" else "clustertrainingruntimes",
        )
        ns = tj["metadata"].get("namespace") if kind == "TrainingRuntime" else None
        try:
            if rtype is None:
                raise KeyError(kind)
            runtime = request.store.get(rtype, ns, ref.get("name", ""))
        except (ApiError, KeyError) as exc:
            what = "trainingRuntime" if kind == "TrainingRuntime" else "clusterTrainingRuntime"
            return [
                FieldError.invalid(
                    "spec.runtimeRef",
                    ref,
                    f"{exc}: specified {what} must be created before the TrainJob is created",
                )
            ]
        errors = _torch_env(runtime, spec)
        errors += _env_injection(runtime, tj)
        errors += _patch_rules(runtime, tj)
        if request.old is not None:
            errors += _patch_changes(request)
        return errors


def _torch_env(runtime: JsonObj, spec: JsonObj) -> list[FieldError]:
    if ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("torch") is None:
        return []
    env = (spec.get("trainer") or {}).get("env") or []
    reserved = sorted({e.get("name") for e in env} & set(TORCH_RESERVED_ENV))
    if not reserved:
        return []
    return [
        FieldError.invalid(
            "spec.trainer.env",
            env,
            f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]",
        )
    ]


def _env_injection(runtime: JsonObj, tj: JsonObj) -> list[FieldError]:
    """v2.3 torch ``envInjection``: every target container must exist in the runtime's
    template (with the TrainJob's patches), else the TrainJob is refused at runtimeRef."""
    injection = (((runtime.get("spec") or {}).get("mlPolicy") or {}).get("torch") or {}).get(
        "envInjection"
    )
    if not injection:
        return []
    rjobs = merged_template(tj, runtime)["spec"].get("replicatedJobs") or []
    errors = []
    for job_name, container in env_injection_targets(injection):
        rjob = next((r for r in rjobs if r.get("name") == job_name), None)
        pod = (((rjob or {}).get("template") or {}).get("spec") or {}).get("template") or {}
        names = {
            c.get("name")
            for key in ("containers", "initContainers")
            for c in (pod.get("spec") or {}).get(key) or []
        }
        if container not in names:
            target = {"jobName": job_name, "containerNames": [container]}
            message = (
                f'envInjection target podSet "{job_name}" container "{container}" not found '
                "in runtime template"
            )
            errors.append(FieldError.invalid("spec.runtimeRef", target, message))
    return errors


def _patch_rules(runtime: JsonObj, tj: JsonObj) -> list[FieldError]:
    base = merged_template({"spec": {}}, runtime)["spec"]
    names: dict[str, set[str]] = {}
    for rjob in base.get("replicatedJobs") or []:
        pod = ((rjob.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
        names[rjob.get("name")] = {
            c.get("name") for c in (pod.get("initContainers") or []) + (pod.get("containers") or [])
        }
    patches = (tj.get("spec") or {}).get("runtimePatches") or []
    errors: list[FieldError] = []

    def bad(detail: str) -> None:
        errors.append(FieldError.invalid(PATCHES, patches, detail))

    for patch in patches:
        manager = str(patch.get("manager", ""))
        if not _DOMAIN_PATH.match(manager):
            errors.append(
                FieldError.invalid(
                    f"{PATCHES}.manager",
                    manager,
                    'must be a domain-prefixed path (such as "acme.io/foo")',
                )
            )
        rjobs = (
            ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        ).get("replicatedJobs") or []
        for rjob in rjobs:
            known = names.get(rjob.get("name"))
            if known is None:
                bad("must not have replicated job that doesn't exist in the runtime job template")
                continue
            pod = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get(
                "spec"
            ) or {}
            for c in pod.get("initContainers") or []:
                if c.get("name") not in known:
                    bad(
                        f"must not have initContainer that doesn't exist in the runtime job {rjob['name']}"
                    )
            for c in pod.get("containers") or []:
                if c.get("name") not in known:
                    bad(
                        f"must not have container that doesn't exist in the runtime job {rjob['name']}"
                    )
                elif c.get("env") and c.get("name") in _NO_ENV:
                    bad(
                        f"must not have envs for the {DATASET_INITIALIZER}, {MODEL_INITIALIZER}, {NODE_CONTAINER} containers"
                    )
    return errors


def _strip_time(patches: list[JsonObj]) -> list[JsonObj]:
    return [{k: v for k, v in p.items() if k != "time"} for p in patches]


def _patch_changes(request: AdmissionRequest) -> list[FieldError]:
    old = request.old or {}
    new = request.obj
    old_patches = _strip_time((old.get("spec") or {}).get("runtimePatches") or [])
    new_patches = _strip_time((new.get("spec") or {}).get("runtimePatches") or [])
    if old_patches == new_patches:
        return []
    if not (old.get("spec") or {}).get("suspend") and not (new.get("spec") or {}).get("suspend"):
        return [
            FieldError.forbidden(
                PATCHES,
                "RuntimePatches can only be modified when the TrainJob is suspended before or after the update",
            )
        ]
    js_type = request.store.catalog.find("jobset.x-k8s.io", "v1alpha2", "jobsets")
    m = new["metadata"]
    try:
        jobset = request.store.get(js_type, m.get("namespace"), m["name"]) if js_type else None
    except ApiError:
        jobset = None
    errors = []
    for rj in ((jobset or {}).get("status") or {}).get("replicatedJobsStatus") or []:
        if rj.get("active", 0) > 0:
            errors.append(
                FieldError.forbidden(
                    PATCHES,
                    f"RuntimePatches cannot be modified when the JobSet's ReplicatedJob {rj['name']} is still active",
                )
            )
    return errors


def _validate_runtime(request: AdmissionRequest) -> list[FieldError]:
    runtime = request.obj
    labels = runtime["metadata"].get("labels") or {}
    if labels.get("trainer.kubeflow.org/webhook-validation") == "disabled":
        return []
    if request.operation != "CREATE" and request.rtype.kind == "TrainingRuntime":
        return []
    errors = []
    rjobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "replicatedJobs"
    ) or []
    for i, rjob in enumerate(rjobs):
        ancestor = (((rjob.get("template") or {}).get("metadata") or {}).get("labels") or {}).get(
            ANCESTOR_LABEL
        )
        if ancestor and rjob.get("replicas", 1) != 1:
            errors.append(
                FieldError.invalid(
                    f"spec.template.spec.replicatedJobs[{i}].replicas",
                    rjob.get("replicas"),
                    "always must be 1",
                )
            )
    return errors

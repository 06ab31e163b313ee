"""Validation of Trainer (v2.3) and JobSet objects: CRD schemas and CEL rules.

What a real cluster enforces in the API server itself, without the Trainer or JobSet webhooks:

- TrainJob: schema (``kubeflow-trainer-api`` models); CEL ``metadata.name`` RFC 1035 and at most
  63 characters (object-level rules, reported at field ``<nil>``); ``managedBy`` allowed values;
  ``activeDeadlineSeconds >= 1``; list sizes (``runtimePatches`` <= 16, ``replicatedJobs`` <=
  100, ``command``/``args``/``env`` <= 128); ``runtimePatches`` keyed by ``manager``; transition
  rules ``self == oldSelf`` on ``runtimeRef``, ``initializer``, ``trainer``,
  ``activeDeadlineSeconds``, ``managedBy`` and the immutable ``PodSpecPatch`` fields. As with
  CEL transition rules, a field that is added or removed is not compared.
- TrainingRuntime / ClusterTrainingRuntime: schema; ``spec`` has at least one property; only
  one ML policy and one pod-group policy.
- JobSet: schema; replicated-job names unique.

Only the main resource is validated (``/status`` writes are not).
"""

from __future__ import annotations

from typing import Any

from kubeflow_trainer_api.models import (
    JobsetV1alpha2JobSetSpec,
    TrainerV1alpha1TrainingRuntimeSpec,
    TrainerV1alpha1TrainJobSpec,
)

from dispatch.adapters.kubeflow.planning.stored import default_runtime, default_trainjob
from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.errors import FieldError
from dispatch.testing.k8s.schema import (
    max_items,
    max_length,
    minimum,
    model_errors,
    pattern,
    unique_keys,
)
from dispatch.testing.k8s.validation import DNS1035_LABEL

JsonObj = dict[str, Any]
TRAINER = "trainer.kubeflow.org"
MANAGED_BY = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
_IMMUTABLE_SPEC = ("runtimeRef", "initializer", "trainer", "activeDeadlineSeconds", "managedBy")
_IMMUTABLE_POD_PATCH = (
    "serviceAccountName",
    "volumes",
    "initContainers",
    "containers",
    "imagePullSecrets",
    "securityContext",
    "terminationGracePeriodSeconds",
)
_ML_POLICIES = ("torch", "mpi", "jax", "xgboost", "flux")
_RJ_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_STORAGE_URI = r"^([A-Za-z][A-Za-z0-9+.-]*://.+|/.*)$"


def _cel(path: str, value: Any, message: str) -> FieldError:
    return FieldError.invalid(path, _cel_type(value), message)


def _cel_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "boolean"
    return "integer" if isinstance(value, int) else "string"


def _get(obj: Any, *keys: str | int) -> Any:
    cur = obj
    for key in keys:
        if isinstance(key, int):
            cur = cur[key] if isinstance(cur, list) and len(cur) > key else None
        else:
            cur = cur.get(key) if isinstance(cur, dict) else None
    return cur


class TrainerValidation:
    """Admission plugin with the API-server-side rules of Trainer and JobSet CRDs."""

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        if request.subresource:
            return []
        storage = request.rtype.storage
        if storage == (TRAINER, "trainjobs"):
            _stored(request.obj, default_trainjob)
            return trainjob_errors(request.obj, request.old)
        if storage in ((TRAINER, "trainingruntimes"), (TRAINER, "clustertrainingruntimes")):
            _stored(request.obj, default_runtime)
            return runtime_errors(request.obj)
        if storage == ("jobset.x-k8s.io", "jobsets"):
            return jobset_errors(request.obj)
        return []


def _stored(obj: JsonObj, default: Any) -> None:
    """``obj`` replaced, in place, by what the API server stores of it: nulls pruned and the
    v2.3 CRD's defaults (``planning.stored``) applied, before any webhook sees it."""
    stored = default(obj)
    obj.clear()
    obj.update(stored)


def trainjob_errors(obj: JsonObj, old: JsonObj | None) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        errors.append(FieldError.required("spec.runtimeRef"))
        spec = {}
    else:
        errors += model_errors(TrainerV1alpha1TrainJobSpec, spec, "spec")
    name = str(obj["metadata"].get("name", ""))
    if not DNS1035_LABEL.match(name):
        errors.append(_cel("<nil>", obj, "metadata.name must match RFC 1035 DNS label format"))
    if len(name) > 63:
        errors.append(_cel("<nil>", obj, "metadata.name must be no more than 63 characters"))
    errors += _trainjob_spec_rules(spec)
    if old is not None:
        errors += _transition_rules(spec, old.get("spec") or {})
    return errors


def _trainjob_spec_rules(spec: JsonObj) -> list[FieldError]:
    errors: list[FieldError] = []
    ref = spec.get("runtimeRef") or {}
    if ref.get("name") == "":
        errors.append(
            FieldError.invalid(
                "spec.runtimeRef.name",
                "",
                "spec.runtimeRef.name in body should be at least 1 chars long",
            )
        )
    errors += max_length("spec.runtimeRef.name", ref.get("name"), 253)
    managed = spec.get("managedBy")
    if isinstance(managed, str) and managed not in MANAGED_BY:
        errors.append(
            _cel(
                "spec.managedBy",
                managed,
                "ManagedBy must be "
                "trainer.kubeflow.org/trainjob-controller or "
                "kueue.x-k8s.io/multikueue if set",
            )
        )
    errors += minimum("spec.activeDeadlineSeconds", spec.get("activeDeadlineSeconds"), 1)
    trainer = spec.get("trainer") or {}
    for field in ("command", "args", "env"):
        errors += max_items(f"spec.trainer.{field}", trainer.get(field), 128)
    errors += unique_keys("spec.trainer.env", trainer.get("env"), "name")
    errors += max_length("spec.trainer.image", trainer.get("image"), 500)
    dataset = _get(spec, "initializer", "dataset") or {}
    errors += pattern(
        "spec.initializer.dataset.storageUri", dataset.get("storageUri"), _STORAGE_URI
    )
    patches = spec.get("runtimePatches")
    errors += max_items("spec.runtimePatches", patches, 16)
    errors += unique_keys("spec.runtimePatches", patches, "manager")
    for i, patch in enumerate(patches if isinstance(patches, list) else []):
        base = f"spec.runtimePatches[{i}]"
        manager = _get(patch, "manager")
        if manager == "":
            errors.append(
                FieldError.invalid(
                    f"{base}.manager", "", f"{base}.manager in body should be at least 1 chars long"
                )
            )
        errors += max_length(f"{base}.manager", manager, 253)
        jobs = _get(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs")
        jobs_path = f"{base}.trainingRuntimeSpec.template.spec.replicatedJobs"
        errors += max_items(jobs_path, jobs, 100)
        errors += unique_keys(jobs_path, jobs, "name")
        for j, job in enumerate(jobs if isinstance(jobs, list) else []):
            errors += pattern(f"{jobs_path}[{j}].name", _get(job, "name"), _RJ_NAME)
    return errors


def _transition_rules(spec: JsonObj, old: JsonObj) -> list[FieldError]:
    errors = []
    for field in _IMMUTABLE_SPEC:
        if field in spec and field in old and spec[field] != old[field]:
            errors.append(_cel(f"spec.{field}", spec[field], "field is immutable"))
    old_patches = {
        p.get("manager"): p for p in old.get("runtimePatches") or [] if isinstance(p, dict)
    }
    for i, patch in enumerate(spec.get("runtimePatches") or []):
        before = old_patches.get(_get(patch, "manager"))
        if before is None:
            continue
        old_jobs = {
            j.get("name"): j
            for j in _get(before, "trainingRuntimeSpec", "template", "spec", "replicatedJobs") or []
        }
        jobs = _get(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs") or []
        for j, job in enumerate(jobs):
            old_job = old_jobs.get(_get(job, "name"))
            new_pod = _get(job, "template", "spec", "template", "spec") or {}
            old_pod = _get(old_job, "template", "spec", "template", "spec") or {}
            for field in _IMMUTABLE_POD_PATCH:
                if field in new_pod and field in old_pod and new_pod[field] != old_pod[field]:
                    path = (
                        f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec."
                        f"replicatedJobs[{j}].template.spec.template.spec.{field}"
                    )
                    errors.append(_cel(path, new_pod[field], "field is immutable"))
    return errors


def runtime_errors(obj: JsonObj) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not spec:
        count = len(spec) if isinstance(spec, dict) else 0
        return [FieldError.invalid("spec", count, "spec in body should have at least 1 properties")]
    errors = model_errors(TrainerV1alpha1TrainingRuntimeSpec, spec, "spec")
    policy = spec.get("mlPolicy") or {}
    if sum(1 for p in _ML_POLICIES if policy.get(p) is not None) > 1:
        errors.append(_cel("spec.mlPolicy", policy, "Only one of the policy can be configured"))
    groups = spec.get("podGroupPolicy") or {}
    if sum(1 for p in ("coscheduling", "volcano") if groups.get(p) is not None) > 1:
        errors.append(
            _cel("spec.podGroupPolicy", groups, "Only one of the policy can be configured")
        )
    jobs = _get(spec, "template", "spec", "replicatedJobs")
    errors += unique_keys("spec.template.spec.replicatedJobs", jobs, "name")
    return errors


def jobset_errors(obj: JsonObj) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [FieldError.required("spec")]
    errors = model_errors(JobsetV1alpha2JobSetSpec, spec, "spec")
    errors += unique_keys("spec.replicatedJobs", spec.get("replicatedJobs"), "name")
    return errors

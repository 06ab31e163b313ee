"""The objects ``start`` creates, built as plain data (spec/kubeflow-adapter.md, section 2).

Pure: no I/O, no clock, no randomness; the same (job, attempt, runtime, settings) always
gives the same objects, so a repeated ``start`` can compare what exists with what it would
create. Two objects per attempt, both named ``trainjob_name(job.id, attempt)``:

* the runtime copy, a ``TrainingRuntime`` in the job's namespace, made from the *raw* runtime
  object so that every field survives (typed models drop fields they do not know);
* the ``TrainJob`` running on that copy, built through the ``kubeflow-trainer-api`` models,
  which check every field name against Trainer's v1alpha1 API (runtimePatches: Trainer >= 2.2).

The copy is created labelled ``dispatch.dev/owner-pending``; after the TrainJob exists,
``owner_reference_patch`` makes the copy belong to it and removes the label.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Hashable, Mapping
from typing import Any, cast

from dispatch.adapters.kubeflow.planning.names import label_value
from dispatch.adapters.kubeflow.planning.rules import RuntimeVerdict
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings, PublishVia
from dispatch.model import ExecutionIdentity, JobSpec

API_GROUP = "trainer.kubeflow.org"
API_VERSION = f"{API_GROUP}/v1alpha1"
#: the Trainer version whose API these objects use (``runtimePatches``, int ``numProcPerNode``)
MIN_TRAINER_VERSION = (2, 2)

LABEL_JOB = "dispatch.dev/job"
LABEL_ATTEMPT = "dispatch.dev/attempt"
LABEL_CLUSTER = "dispatch.dev/cluster"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY = "dispatch"
LABEL_QUEUE = "kueue.x-k8s.io/queue-name"
#: on the TrainJob: the runtime the user chose (the TrainJob's runtimeRef names its copy), so
#: tools can find a runtime's jobs (``kubectl get trainjobs -l dispatch.dev/runtime=torch``)
LABEL_RUNTIME = "dispatch.dev/runtime"
#: on the runtime copy: the runtime it copies, so tools can hide copies from a runtime list
LABEL_RUNTIME_COPY = "dispatch.dev/runtime-copy-of"
#: on the runtime copy until it is owned by its TrainJob (``api/owners.py``): the copies a
#: crash left without an owner are found by it (``kubectl get trainingruntimes -l ...``)
LABEL_OWNER_PENDING = "dispatch.dev/owner-pending"
ANNOTATION_WEAKENED = "dispatch.dev/weakened-identity"
ANNOTATION_SPEC_HASH = "dispatch.dev/spec-hash"
ANNOTATION_RUNTIME = "dispatch.dev/runtime"
#: the runtimePatches manager dispatch owns (a domain-prefixed path, as Trainer requires)
PATCH_MANAGER = "dispatch.dev/adapter"
ENV_RANK_FAILURES = "DISPATCH_RANK_FAILURES"
#: the pod annotation the Job controller keeps per index (with backoffLimitPerIndex)
FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
#: annotations of the original runtime that describe the original, not the copy
_NOT_COPIED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def spec_hash(spec: JobSpec) -> str:
    """``sha256:<hex>`` of the spec's canonical JSON (field order and defaults do not matter)."""
    data = spec.model_dump(mode="json", by_alias=True)
    for later in ("inheritEnv", "secretEnv"):  # fields added later: the hash of a spec not
        if not data.get(later):  # using them stays what it was
            data.pop(later, None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def identity_labels(job_id: str, attempt: int) -> dict[str, str]:
    """The labels that say which job and attempt an object or pod belongs to."""
    return {LABEL_JOB: label_value(job_id), LABEL_ATTEMPT: str(attempt)}


def object_labels(identity: ExecutionIdentity, queue: str | None) -> dict[str, str]:
    """Labels of the TrainJob and the runtime copy."""
    labels = {
        **identity_labels(identity.job_id, identity.attempt),
        LABEL_CLUSTER: label_value(identity.cluster),
        LABEL_MANAGED_BY: MANAGED_BY,
    }
    if queue:
        labels[LABEL_QUEUE] = queue
    return labels


def object_annotations(
    spec: JobSpec, verdict: RuntimeVerdict, weakened: str | None
) -> dict[str, str]:
    """Annotations of the TrainJob and the runtime copy."""
    annotations = {
        ANNOTATION_SPEC_HASH: spec_hash(spec),
        ANNOTATION_RUNTIME: f"{verdict.kind}/{verdict.name}",
    }
    if weakened:
        annotations[ANNOTATION_WEAKENED] = weakened
    return annotations


def runtime_copy(
    raw: Mapping[str, Any],
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """A ``TrainingRuntime`` named ``name`` in ``namespace`` with the raw runtime's spec, losslessly.

    Every field of the original except its identity (metadata other than labels and
    annotations) and ``status`` is kept, unknown fields included. The original's labels and
    annotations are kept (Trainer and its SDK read some, e.g. ``trainer.kubeflow.org/framework``);
    dispatch's own are set over them.
    """
    body = {
        key: copy.deepcopy(value)
        for key, value in raw.items()
        if key not in ("apiVersion", "kind", "metadata", "status")
    }
    metadata = raw.get("metadata")
    old_labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    old_annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    kept_annotations = {
        str(k): str(v)
        for k, v in (old_annotations.items() if isinstance(old_annotations, Mapping) else ())
        if k not in _NOT_COPIED_ANNOTATIONS
    }
    kept_labels = {
        str(k): str(v) for k, v in (old_labels.items() if isinstance(old_labels, Mapping) else ())
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**kept_labels, **labels},
            "annotations": {**kept_annotations, **annotations},
        },
        **body,
    }


def owner_reference_patch(trainjob: str, uid: str) -> dict[str, Any]:
    """A merge patch making the runtime copy owned by the TrainJob (deleted with it), and
    removing its ``dispatch.dev/owner-pending`` label.

    ``blockOwnerDeletion`` is left out on purpose: setting it needs permission to update the
    TrainJob's finalizers, which the adapter does not otherwise need.
    """
    return {
        "metadata": {
            "labels": {LABEL_OWNER_PENDING: None},
            "ownerReferences": [
                {"apiVersion": API_VERSION, "kind": "TrainJob", "name": trainjob, "uid": uid}
            ],
        }
    }


def _env(values: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"name": key, "value": value} for key, value in values.items()]


def _rank_failures_env() -> dict[str, Any]:
    path = f"metadata.annotations['{FAILURE_COUNT_ANNOTATION}']"
    return {"name": ENV_RANK_FAILURES, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _resources(spec: JobSpec) -> dict[str, Any] | None:
    quantities: dict[str, str] = {}
    if spec.resources.cpu is not None:
        quantities["cpu"] = spec.resources.cpu
    if spec.resources.memory is not None:
        quantities["memory"] = spec.resources.memory
    if spec.resources.gpu:
        quantities["nvidia.com/gpu"] = str(spec.resources.gpu)
    if not quantities:
        return None
    return {"requests": dict(quantities), "limits": dict(quantities)}


def trainer_command(spec: JobSpec, torch: bool) -> list[str]:
    """The node container's command: the spec's, wrapped in torchrun on torch runtimes.

    A command that does not start torchrun is started ``procsPerNode`` times per node by
    torchrun (``--no-python`` runs it as given), so each process gets RANK, LOCAL_RANK,
    WORLD_SIZE and the rendezvous from Trainer's PET_* variables (DESIGN.md, launch modes).
    """
    if torch and not spec.launches_torchrun:
        return ["torchrun", "--no-python", *spec.command]
    return list(spec.command)


def secret_name(trainjob: str) -> str:
    """The Secret holding an attempt's ``secretEnv`` values, owned by its TrainJob."""
    return f"{trainjob}-env"


def secret_manifest(
    trainjob: str, namespace: str, labels: Mapping[str, str], values: Mapping[str, str]
) -> dict[str, Any]:
    """The attempt's Secret; plans build it with every value hidden, ``start`` with the
    values (sent to the API server only)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret_name(trainjob), "namespace": namespace, "labels": dict(labels)},
        "type": "Opaque",
        "stringData": dict(values),
    }


def _secret_env(spec: JobSpec, trainjob: str) -> list[dict[str, Any]]:
    ref = secret_name(trainjob)
    return [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": ref, "key": key}}}
        for key in spec.secret_env
    ]


def _trainer(
    spec: JobSpec,
    verdict: RuntimeVerdict,
    identity: ExecutionIdentity,
    inherited: Mapping[str, str],
    trainjob: str,
) -> dict[str, Any]:
    env = _env(inherited) + _env(spec.env) + _secret_env(spec, trainjob) + _env(identity.env())
    if identity.weakened:
        env.append(_rank_failures_env())
    trainer: dict[str, Any] = {
        "numNodes": spec.nodes,
        "command": trainer_command(spec, verdict.torch),
        "env": env,
    }
    if spec.procs_per_node is not None and verdict.procs_per_node.supported:
        trainer["numProcPerNode"] = spec.procs_per_node
    elif verdict.torch and not spec.launches_torchrun:
        trainer["numProcPerNode"] = 1  # one process per node unless the spec asks
    if spec.image:
        trainer["image"] = spec.image
    if spec.args:
        trainer["args"] = list(spec.args)
    resources = _resources(spec)
    if resources:
        trainer["resourcesPerNode"] = resources
    return trainer


def runtime_patch(
    trainer_job: str, identity: ExecutionIdentity, settings: KubeflowSettings
) -> dict[str, Any]:
    """dispatch's entry in ``spec.runtimePatches``: the JobSet's and the pods' labels, and the
    init container's env. (The JobSet's let the capture check its JobSets for one job alone,
    ``api.kinds``.)"""
    labels = identity_labels(identity.job_id, identity.attempt)
    pod: dict[str, Any] = {"metadata": {"labels": labels}}
    if settings.publish_via is PublishVia.INIT_CONTAINER and settings.init_container:
        pod["spec"] = {
            "initContainers": [{"name": settings.init_container, "env": _env(identity.env())}]
        }
    return {
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "replicatedJobs": [
                        {"name": trainer_job, "template": {"spec": {"template": pod}}}
                    ]
                },
            }
        },
    }


def trainjob_manifest(
    spec: JobSpec,
    identity: ExecutionIdentity,
    verdict: RuntimeVerdict,
    settings: KubeflowSettings,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    held: bool = False,
    inherited: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The TrainJob for one attempt, running on the runtime copy named ``name``.

    ``inherited``: the values of the spec's ``inheritEnv`` captured at submit; the base of a
    rank's environment (``PATH``, ``HOME`` …) is the image's, not the submitter's. Each
    ``secretEnv`` variable is a ``secretKeyRef`` into the attempt's Secret (``secret_manifest``).

    Raises ``ValueError`` when the runtime has no single trainer job (the runtime rules
    refuse such a runtime first, so callers never build for it).
    """
    trainer_job = verdict.trainer_job
    if trainer_job is None:
        raise ValueError(f"{verdict.kind} {verdict.name!r} has no single trainer job")
    body: dict[str, Any] = {
        "runtimeRef": {"apiGroup": API_GROUP, "kind": "TrainingRuntime", "name": name},
        "trainer": _trainer(spec, verdict, identity, inherited or {}, name),
        "runtimePatches": [runtime_patch(trainer_job.name, identity, settings)],
    }
    if spec.time_limit is not None:
        body["activeDeadlineSeconds"] = max(1, math.ceil(spec.time_limit))
    if held:
        body["suspend"] = True
    manifest = {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": dict(annotations),
        },
        "spec": body,
    }
    return _through_trainer_models(manifest)


#: shapes (``_shape``) of manifests that came through Trainer's models unchanged, with the
#: models' answer for each (its key order); at most ``MAX_SHAPES``, the oldest forgotten first
_SURVIVED: dict[Hashable, Any] = {}
MAX_SHAPES = 256


def _shape(value: Any) -> Hashable:
    """``value`` (JSON) with each leaf replaced by its type: its keys in order, its lists'
    lengths, its leaves' types."""
    if isinstance(value, dict):
        return (dict, tuple((key, _shape(item)) for key, item in value.items()))
    if isinstance(value, list):
        return (list, tuple(_shape(item) for item in value))
    return cast(Hashable, type(value))


def _ordered_like(value: Any, model: Any) -> Any:
    """``value`` with the key order of ``model`` (of ``value``'s shape, keys in another order)."""
    if isinstance(model, dict):
        return {key: _ordered_like(value[key], item) for key, item in model.items()}
    if isinstance(model, list):
        return [_ordered_like(v, m) for v, m in zip(value, model, strict=True)]
    return value


def _through_trainer_models(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as Trainer's v1alpha1 models write it; a field they drop is a bug here.

    Whether the models drop or change a field depends on the manifest's shape alone
    (``_shape``: keys, list lengths, leaf types; on the TrainJob's path their only validators
    are the one-of types of ``Quantity`` and ``IntOrString``). So a manifest of a shape that
    came through unchanged before (every attempt of a job after its first, every job built
    alike) is not sent through them again, and is written in the key order they gave: a plan
    of the ``torch`` example took 1.4 ms, now 0.4 ms (``python -m bench.hot_paths``). A
    value the API refuses (none of the builder's fields has an enum) is the API server's to
    refuse, as it is for every field."""
    shape = _shape(manifest)
    model = _SURVIVED.get(shape)
    if model is not None:
        return cast(dict[str, Any], _ordered_like(manifest, model))
    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

    typed: dict[str, Any] = TrainerV1alpha1TrainJob.from_dict(manifest).to_dict()
    if typed != manifest:
        raise ValueError(
            "the TrainJob does not survive Trainer's v1alpha1 models unchanged: "
            f"built {json.dumps(manifest, sort_keys=True)}, models {json.dumps(typed, sort_keys=True)}"
        )
    if _shape(_ordered_like(typed, manifest)) == shape:  # no leaf changed its type
        if len(_SURVIVED) >= MAX_SHAPES:
            del _SURVIVED[next(iter(_SURVIVED))]
        _SURVIVED[shape] = typed
    return typed

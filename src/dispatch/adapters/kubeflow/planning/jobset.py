"""What Kubeflow Trainer v2.3 makes of a TrainJob and its runtime: the JobSet, as plain data.

Pure (no Kubernetes client, no clock): the emulator's Trainer controller creates exactly these
objects, and ``dispatch plan --show-jobset`` shows them.

Follows Trainer v2.3.0 (kubeflow/trainer, tag v2.3.0):

* ``pkg/runtime/core/trainingruntime.go`` ``newRuntimeInfo`` / ``mergeRuntimePatches``: labels
  and annotations = runtime template metadata + each runtimePatch's template metadata; the
  patches are strategic-merged onto the runtime's JobSet spec in list order, then the runtime's
  replicatedJob order is restored; one pod set per replicated job with count = ``parallelism``
  (default 1), except the ``trainer`` ancestor whose count is ``mlPolicy.numNodes`` (default 1)
  when an mlPolicy exists; ``resourcesPerNode`` merged over container ``node``'s resources.
* ``plugins/plainml`` and ``plugins/torch``: ``trainer.numNodes`` overrides the count;
  ``trainer.env`` upserted into container ``node``; torch adds ``PET_NNODES``,
  ``PET_NPROC_PER_NODE`` (``numProcPerNode``, else ``auto``, which becomes the CPU count when
  the node has no GPU), ``PET_NODE_RANK`` (the completion index), ``PET_MASTER_ADDR``
  (``<trainjob>-node-0-0.<trainjob>``), ``PET_MASTER_PORT`` (29500) and container port 29500.
* ``plugins/jobset`` ``SyncParallelCount`` / ``Build`` / ``builder.go``: parallelism =
  completions = count; ancestor jobs get ``replicas: 1``; image, command and args of container
  ``node``; initializer ``STORAGE_URI``, env and secret; ``suspend``; the owner reference.
* ``pkg/runtime/core/snapshot.go``: the runtime snapshot ConfigMap ``<trainjob>-runtime-snapshot``.

The other plugins are modules of ``planning.plugins``, run in Trainer's phases: MPI (which
takes the TrainJob's ``numNodes`` and ``env`` over from the code here), JAX, XGBoost, the
torchtune command rewrite (called from the torch code here), coscheduling and Volcano (the
gang's pod label or annotation, and its PodGroup).

Not rendered (``UnsupportedRuntime``): the Flux policy, MPI other than OpenMPI.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.objects import as_list, dig, strategic_merge, without_nulls
from dispatch.adapters.kubeflow.planning.plugins import torchtune
from dispatch.adapters.kubeflow.planning.plugins.base import (
    BuildRefused,
    Context,
    UnsupportedRuntime,
)
from dispatch.adapters.kubeflow.planning.plugins.coscheduling import POD_GROUP_LABEL
from dispatch.adapters.kubeflow.planning.plugins.mpi import node_as_trainer
from dispatch.adapters.kubeflow.planning.plugins.registry import PLUGINS
from dispatch.adapters.kubeflow.planning.podspec import (
    ancestor,
    containers,
    ensure,
    node_container,
    owner_reference,
    same_port,
    upsert,
    upsert_container_env,
)
from dispatch.adapters.kubeflow.planning.quantity import Quantity
from dispatch.adapters.kubeflow.planning.runtime import (
    NODE_CONTAINER,
    TRAINER_STEP,
    env_injection_targets,
)
from dispatch.model.units import quantity_value

__all__ = [
    "POD_GROUP_LABEL",
    "Build",
    "BuildRefused",
    "PodSet",
    "UnsupportedRuntime",
    "build",
    "render",
    "render_jobset",
    "runtime_snapshot",
]

JsonObj = dict[str, Any]

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
TRAINER_PORT = 29500
COMPLETION_INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
SNAPSHOT_SUFFIX = "-runtime-snapshot"
SNAPSHOT_KEY = "runtime"
TORCH_RESERVED_ENV = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
)


@dataclass(frozen=True)
class PodSet:
    """One replicated job as Kueue counts it: ``count`` pods of ``template`` per Job."""

    name: str
    ancestor: str | None
    replicas: int
    count: int
    template: JsonObj

    @property
    def pods(self) -> int:
        return self.replicas * self.count


# ---------------------------------------------------------------------- the rendering


def merged_template(trainjob: Mapping[str, Any], runtime: Mapping[str, Any]) -> JsonObj:
    """The runtime's JobSet template with every runtimePatch applied: ``{metadata, spec}``."""
    template = dig(runtime, "spec", "template") or {}
    labels = dict(dig(template, "metadata", "labels") or {})
    annotations = dict(dig(template, "metadata", "annotations") or {})
    spec: JsonObj = copy.deepcopy(template.get("spec") or {})
    order = {rj.get("name"): i for i, rj in enumerate(spec.get("replicatedJobs") or [])}
    for patch in dig(trainjob, "spec", "runtimePatches") or []:
        patch_template = dig(patch, "trainingRuntimeSpec", "template") or {}
        labels.update(dig(patch_template, "metadata", "labels") or {})
        annotations.update(dig(patch_template, "metadata", "annotations") or {})
        if isinstance(patch_template.get("spec"), dict):
            # Trainer reads the patch into Go types: a null in it deletes nothing
            spec = strategic_merge(spec, without_nulls(patch_template["spec"]))
    spec["replicatedJobs"] = sorted(
        spec.get("replicatedJobs") or [], key=lambda rj: order.get(rj.get("name"), 0)
    )
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}


def _check_supported(ml_policy: Mapping[str, Any]) -> None:
    if ml_policy.get("flux") is not None:
        raise UnsupportedRuntime("mlPolicy.flux is not rendered")


def _pod_counts(
    trainjob: Mapping[str, Any], spec: JsonObj, ml_policy: Mapping[str, Any] | None
) -> list[int]:
    """Pods per Job of each replicated job, after the ML policy plugins."""
    num_nodes = dig(trainjob, "spec", "trainer", "numNodes")
    mpi = dig(ml_policy, "mpi") is not None  # MPI counts its ``node`` job itself
    counts = []
    for rjob in spec.get("replicatedJobs") or []:
        count = int(dig(rjob, "template", "spec", "parallelism") or 1)
        if ancestor(rjob) == TRAINER_STEP:
            if ml_policy is not None:
                count = int(ml_policy.get("numNodes") or 1)
            if num_nodes is not None and not mpi:  # PlainML / Torch: the TrainJob's wins
                count = int(num_nodes)
        counts.append(count)
    return counts


def _merge_resources(rjob: JsonObj, per_node: Mapping[str, Any]) -> None:
    """``newRuntimeInfo``: ``resourcesPerNode`` strategic-merged over container ``node``'s
    limits and requests (``MergeResourceRequirements``); only those two are kept."""
    node = node_container(rjob)
    if node is None:
        return
    resources = node.get("resources") or {}
    merged = {}
    for part in (*resources, *per_node):
        if part in ("limits", "requests") and part not in merged:
            found = {**(resources.get(part) or {}), **(per_node.get(part) or {})}
            if found:
                merged[part] = found
    node["resources"] = merged


def _canonical_quantities(rjobs: list[JsonObj]) -> None:
    """Every container's limits and requests as Trainer writes them back: it reads the runtime
    into Go types, so a quantity prints in its canonical form (``2.5`` as ``2500m``)."""
    for rjob in rjobs:
        for key in ("initContainers", "containers"):
            for item in containers(rjob, key):
                resources = item.get("resources")
                for part in ("limits", "requests"):
                    found = dig(resources, part)
                    if isinstance(resources, dict) and isinstance(found, dict):
                        resources[part] = {k: _canonical(v) for k, v in found.items()}


def _canonical(text: Any) -> Any:
    try:
        return str(Quantity.parse(text))
    except ValueError:
        return text


def _num_proc_per_node(trainjob: Mapping[str, Any], trainer_rjob: JsonObj | None) -> str:
    """``PET_NPROC_PER_NODE`` as the v2.2+ torch plugin computes it."""
    explicit = dig(trainjob, "spec", "trainer", "numProcPerNode")
    if explicit is not None:
        return str(explicit)
    resources: Any = dig(trainjob, "spec", "trainer", "resourcesPerNode")
    if resources is None and trainer_rjob is not None:
        node = node_container(trainer_rjob)
        resources = (node or {}).get("resources")
    resources = resources or {}

    def gpus(part: str) -> int:
        items = sorted((resources.get(part) or {}).items())
        return next((quantity_value(q) for name, q in items if "gpu" in name.lower()), 0)

    if gpus("requests") or gpus("limits"):
        return "auto"
    cpu_request = (resources.get("requests") or {}).get("cpu")
    cpu_limit = (resources.get("limits") or {}).get("cpu")
    cpus = quantity_value(cpu_request) if cpu_request and quantity_value(cpu_request) else 0
    if not cpus and cpu_limit is not None:
        cpus = quantity_value(cpu_limit)
    return str(max(1, cpus))


def _torch_env(name: str, nodes: int, nproc: str) -> list[JsonObj]:
    return [
        {"name": "PET_NNODES", "value": str(nodes)},
        {"name": "PET_NPROC_PER_NODE", "value": nproc},
        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}},
        {"name": "PET_MASTER_ADDR", "value": f"{name}-{NODE_CONTAINER}-0-0.{name}"},
        {"name": "PET_MASTER_PORT", "value": str(TRAINER_PORT)},
    ]


def _inject_env(rjobs: list[JsonObj], env_injection: Any, env: list[JsonObj]) -> None:
    """Torch ``envInjection`` (v2.3): every target container or init container gets the
    ``PET_*`` variables, master address and port included; a target the runtime does not
    have fails the build, as Trainer's does."""
    for job_name, container_name in env_injection_targets(env_injection):
        rjob = next((rj for rj in rjobs if rj.get("name") == job_name), None)
        pod = dig(rjob, "template", "spec", "template", "spec") if rjob else None
        found = None
        for key in ("containers", "initContainers"):
            for container in as_list(dig(pod, key)) or []:
                if isinstance(container, dict) and container.get("name") == container_name:
                    found = found or container
        if found is None:
            raise BuildRefused(
                f'envInjection target podSet "{job_name}" container "{container_name}" '
                "not found in runtime template"
            )
        upsert_container_env(found, copy.deepcopy(env))


def _apply_initializer(rjob: JsonObj, step: str, config: Mapping[str, Any] | None) -> None:
    rjob["replicas"] = 1
    if not config:
        return
    for container in containers(rjob):
        if container.get("name") != step:
            continue
        if config.get("storageUri") is not None:
            upsert_container_env(
                container, [{"name": "STORAGE_URI", "value": config["storageUri"]}]
            )
        upsert_container_env(container, list(config.get("env") or []))
        if config.get("secretRef"):
            container.setdefault("envFrom", []).append(
                {"secretRef": {"name": config["secretRef"]["name"]}}
            )


def _apply_trainer(rjob: JsonObj, trainer: Mapping[str, Any] | None) -> None:
    rjob["replicas"] = 1
    node = node_container(rjob)
    if node is None or trainer is None:
        return
    for key in ("image", "command", "args"):
        if trainer.get(key) is not None:
            node[key] = copy.deepcopy(trainer[key])
    upsert_container_env(node, list(trainer.get("env") or []))


@dataclass(frozen=True)
class Build:
    """Everything Trainer v2.3 creates for one TrainJob besides the runtime snapshot."""

    jobset: JsonObj
    pod_sets: list[PodSet]
    #: the other objects the plugins build (a PodGroup, MPI's Secret and ConfigMap), in order
    others: list[JsonObj]

    @property
    def objects(self) -> list[JsonObj]:
        """The JobSet, then the others."""
        return [self.jobset, *self.others]


def build(trainjob: Mapping[str, Any], runtime: Mapping[str, Any]) -> Build:
    """Every object Trainer v2.3 applies for ``trainjob`` on ``runtime``, and the pod sets."""
    meta = trainjob.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), meta.get("namespace")
    ml_policy = dig(runtime, "spec", "mlPolicy")
    if ml_policy is not None:
        _check_supported(ml_policy)
    torch = isinstance(ml_policy, Mapping) and ml_policy.get("torch") is not None
    template = merged_template(trainjob, runtime)
    spec = template["spec"]
    rjobs: list[JsonObj] = spec["replicatedJobs"]
    trainer = dig(trainjob, "spec", "trainer")
    per_node = dig(trainer, "resourcesPerNode")
    if per_node is not None and ml_policy is not None:
        for rjob in rjobs:
            if ancestor(rjob) == TRAINER_STEP or node_as_trainer(ml_policy, rjob):
                _merge_resources(rjob, per_node)
    _canonical_quantities(rjobs)
    ctx = Context(trainjob, runtime, spec, _pod_counts(trainjob, spec, ml_policy))
    plugins = [plugin for plugin in PLUGINS if plugin.applies(ctx)]
    counts = ctx.counts
    trainer_at = ctx.trainer_index
    trainer_rjob = rjobs[trainer_at] if trainer_at is not None else None
    if trainer_rjob is not None and trainer is not None:
        node = node_container(trainer_rjob)
        if node is not None:
            # PlainML and Torch add the TrainJob's env before their own; for MPI and JAX the
            # JobSet builder adds it after theirs
            if dig(ml_policy, "mpi") is None and dig(ml_policy, "jax") is None:
                upsert_container_env(node, list(trainer.get("env") or []))
            if torch:
                nproc = _num_proc_per_node(trainjob, trainer_rjob)
                pet = _torch_env(name, counts[trainer_at or 0], nproc)
                if torchtune.applies(trainer):
                    pet = torchtune.without_master(pet)
                    tune_run = torchtune.command(ctx, counts[trainer_at or 0], nproc)
                    trainer = {**trainer, "command": tune_run}
                upsert_container_env(node, pet)
                ports = node.setdefault("ports", [])
                upsert(ports, {"containerPort": TRAINER_PORT}, same_port)
    if torch:
        nodes = counts[trainer_at] if trainer_at is not None else 1
        nproc = _num_proc_per_node(trainjob, trainer_rjob)
        _inject_env(rjobs, dig(ml_policy, "torch", "envInjection"), _torch_env(name, nodes, nproc))
    for plugin in plugins:
        plugin.ml_policy(ctx)
    for plugin in plugins:
        plugin.pod_group(ctx)
    ctx.identify_pod_network()
    for rjob, count in zip(rjobs, counts, strict=True):
        job_spec = ensure(rjob, "template", "spec")
        job_spec["parallelism"] = job_spec["completions"] = count
        step = ancestor(rjob)
        if step == TRAINER_STEP:
            _apply_trainer(rjob, trainer)
        elif step in (DATASET_INITIALIZER, MODEL_INITIALIZER):
            key = "dataset" if step == DATASET_INITIALIZER else "model"
            _apply_initializer(rjob, step, dig(trainjob, "spec", "initializer", key))
        if ctx.pod_labels:
            ensure(job_spec, "template", "metadata", "labels").update(ctx.pod_labels)
        if ctx.pod_annotations:
            ensure(job_spec, "template", "metadata", "annotations").update(ctx.pod_annotations)
    # builder.go ``Suspend``: the TrainJob's value replaces the template's, even when unset
    spec.pop("suspend", None)
    suspend = dig(trainjob, "spec", "suspend")
    if suspend is not None:
        spec["suspend"] = suspend
    metadata: JsonObj = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    for key in ("labels", "annotations"):
        if template["metadata"][key]:
            metadata[key] = template["metadata"][key]
    metadata["ownerReferences"] = [owner_reference(trainjob)]
    jobset = {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": metadata, "spec": spec}
    ctx.jobset = jobset
    others = [obj for plugin in plugins for obj in plugin.objects(ctx)]
    pod_sets = [
        PodSet(
            str(rj.get("name")),
            ancestor(rj),
            int(rj.get("replicas") or 1),
            count,
            copy.deepcopy(dig(rj, "template", "spec", "template") or {}),
        )
        for rj, count in zip(rjobs, counts, strict=True)
    ]
    return Build(jobset, pod_sets, others)


def render(trainjob: Mapping[str, Any], runtime: Mapping[str, Any]) -> tuple[JsonObj, list[PodSet]]:
    """The JobSet Trainer v2.3 applies for ``trainjob`` on ``runtime``, and its pod sets."""
    built = build(trainjob, runtime)
    return built.jobset, built.pod_sets


def render_jobset(trainjob: Mapping[str, Any], runtime: Mapping[str, Any]) -> JsonObj:
    """The JobSet only (see :func:`build`)."""
    return build(trainjob, runtime).jobset


def runtime_snapshot(trainjob: Mapping[str, Any], runtime: Mapping[str, Any]) -> JsonObj:
    """The ConfigMap in which Trainer v2.3 keeps the runtime a TrainJob was first built from
    (data key ``runtime``; JSON is YAML, so it reads back as Trainer's YAML does)."""
    meta = trainjob.get("metadata") or {}
    kept = {k: v for k, v in runtime.items() if k != "status"}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{meta.get('name')}{SNAPSHOT_SUFFIX}",
            "namespace": meta.get("namespace"),
            "ownerReferences": [owner_reference(trainjob)],
        },
        "data": {SNAPSHOT_KEY: json.dumps(kept, sort_keys=True, indent=2)},
    }

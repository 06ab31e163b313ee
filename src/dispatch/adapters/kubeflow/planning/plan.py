"""Planning an attempt on a Kubeflow cluster, as a pure function over values.

``plan_objects(job, attempt, runtime_raw, settings)`` is the dry run of ``start``: the runtime
rules, the job checks, the ProcsPerNode answer, the weakened identity, and (when nothing is
refused) the exact runtime copy and TrainJob ``start`` would create. The adapter reads the
runtime from the cluster and calls this; ``dispatch plan`` prints the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.jobchecks import check_job
from dispatch.adapters.kubeflow.planning.jobset import (
    BuildRefused,
    UnsupportedRuntime,
    build,
)
from dispatch.adapters.kubeflow.planning.names import label_value, trainjob_name
from dispatch.adapters.kubeflow.planning.rules import NOT_FOUND, RuntimeVerdict, check_runtime
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings
from dispatch.adapters.kubeflow.planning.stored import default_runtime, default_trainjob
from dispatch.adapters.kubeflow.planning.trainjob import (
    LABEL_OWNER_PENDING,
    LABEL_RUNTIME,
    LABEL_RUNTIME_COPY,
    MIN_TRAINER_VERSION,
    identity_labels,
    object_annotations,
    object_labels,
    runtime_copy,
    secret_manifest,
    trainjob_manifest,
)
from dispatch.adapters.secrets import HIDDEN
from dispatch.model import Artifact, CapabilityReport, Job, JobSpec, Plan, Reason

ADAPTER = "kubeflow"
NO_RUNTIME = Reason(
    NOT_FOUND,
    "the job names no runtime; a Kubeflow cluster needs "
    "runtime: {kind: ClusterTrainingRuntime, name: ...} in the job spec",
)


def runtime_verdict(spec: JobSpec, runtime_raw: Any, settings: KubeflowSettings) -> RuntimeVerdict:
    """The runtime rules for the runtime ``spec`` names (``runtime_raw`` None: not found)."""
    kind = spec.runtime.kind.value if spec.runtime else None
    name = spec.runtime.name if spec.runtime else None
    return check_runtime(runtime_raw, settings, kind=kind, name=name)


def weakened_identity(spec: JobSpec, runtime_raw: Any, settings: KubeflowSettings) -> str | None:
    """``IdentityWeakener`` over values: why ranks of ``spec`` may rerun in one attempt here."""
    return runtime_verdict(spec, runtime_raw, settings).weakened_identity


def plan_objects(
    job: Job,
    attempt: int,
    runtime_raw: Mapping[str, Any] | None,
    settings: KubeflowSettings,
    *,
    held: bool = False,
) -> Plan:
    """The plan of ``attempt`` of ``job``: every refusal, and the objects when there is none.

    Guarantees: pure and deterministic; creates nothing; a refused plan carries every reason
    (runtime rules, then job checks) and no objects.
    """
    spec = job.spec
    verdict = runtime_verdict(spec, runtime_raw, settings)
    name = trainjob_name(job.id, attempt)
    refusals = list(verdict.reasons) if spec.runtime is not None else [NO_RUNTIME]
    if spec.runtime is not None:
        refusals += check_job(spec, verdict, name)
    identity = job.identity(attempt, weakened=verdict.weakened_identity)
    report = CapabilityReport(
        cluster=spec.cluster,
        adapter=ADAPTER,
        answers=(verdict.procs_per_node,),
        refusals=tuple(refusals),
        weakened_identity=verdict.weakened_identity,
    )
    artifacts: tuple[Artifact, ...] = ()
    if not refusals and runtime_raw is not None:
        namespace = settings.effective_namespace
        labels = object_labels(identity, spec.queue or settings.queue)
        annotations = object_annotations(spec, verdict, verdict.weakened_identity)
        chosen = label_value(verdict.name)
        copy = runtime_copy(
            runtime_raw,
            name=name,
            namespace=namespace,
            labels={**labels, LABEL_RUNTIME_COPY: chosen, LABEL_OWNER_PENDING: "true"},
            annotations=annotations,
        )
        trainjob = trainjob_manifest(
            spec,
            identity,
            verdict,
            settings,
            name=name,
            namespace=namespace,
            labels={**labels, LABEL_RUNTIME: chosen},
            annotations=annotations,
            held=held,
            inherited={
                name: job.environment[name]
                for name in spec.inherit_env
                if job.environment is not None and name in job.environment
            },
        )
        artifacts = (
            Artifact(kind="TrainingRuntime", name=name, content=copy),
            Artifact(kind="TrainJob", name=name, content=trainjob),
        )
        if spec.secret_env:  # the values are filled in by ``start`` only
            hidden = dict.fromkeys(spec.secret_env, HIDDEN)
            secret = secret_manifest(name, namespace, identity_labels(job.id, attempt), hidden)
            artifacts += (Artifact(kind="Secret", name=secret["metadata"]["name"], content=secret),)
    version = ".".join(str(part) for part in MIN_TRAINER_VERSION)
    notes = (f"the TrainJob uses runtimePatches and needs Kubeflow Trainer >= {version}",)
    return Plan(
        identity=identity,
        adapter=ADAPTER,
        capabilities=report,
        artifacts=artifacts,
        notes=notes if artifacts else (),
    )


#: the uid a planned TrainJob has not been given yet (the JobSet's owner reference names it)
PENDING_UID = "(given when the TrainJob is created)"


def with_jobset(plan: Plan) -> Plan:
    """``plan`` with the JobSet Trainer would build from its TrainJob and runtime copy, and the
    other objects its plugins build (a PodGroup, MPI's Secret and ConfigMap), added to its
    objects (``dispatch plan --show-jobset``). The TrainJob is rendered as the API server
    stores it (its nulls pruned, as the CRD's structural schema has them, and the default
    ``suspend: false``); its uid is not known before it exists.
    A runtime the renderer cannot reproduce, or Trainer would refuse, gets a note instead."""
    contents = {a.kind: a.content for a in plan.artifacts}
    trainjob, runtime = contents.get("TrainJob"), contents.get("TrainingRuntime")
    if not plan.accepted or not isinstance(trainjob, Mapping) or not isinstance(runtime, Mapping):
        return plan
    stored = default_trainjob(dict(trainjob))
    stored.setdefault("metadata", {}).setdefault("uid", PENDING_UID)
    try:
        built = build(stored, default_runtime(dict(runtime)))
    except (UnsupportedRuntime, BuildRefused) as exc:
        return replace(plan, notes=(*plan.notes, f"the JobSet is not shown: {exc}"))
    shown = tuple(
        Artifact(kind=str(obj["kind"]), name=str(dig(obj, "metadata", "name") or ""), content=obj)
        for obj in built.objects
    )
    return replace(plan, artifacts=(*plan.artifacts, *shown))

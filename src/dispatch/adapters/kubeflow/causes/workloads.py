"""The training workloads a dump may hold, which objects belong to each, and each pod's rank.

| kind | its objects | a pod's rank |
|---|---|---|
| TrainJob | the JobSet of its name; Jobs and pods labelled with it | as its JobSet's |
| JobSet | Jobs and pods labelled ``jobset.sigs.k8s.io/jobset-name`` | pods of the Jobs before it (by global Job index) + completion index |
| PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob, JAXJob | pods (and an MPIJob's launcher Job) labelled ``training.kubeflow.org/job-name`` | the replica index (a PyTorchJob's workers come after its master) |
| Job | pods labelled ``batch.kubernetes.io/job-name`` | the completion index |

Any of them may have a Kueue ``Workload`` (owned by it, or labelled with its uid). Objects
are also joined by ``ownerReferences``. A workload is *top-level* in a dump when no other
workload in it owns it (a TrainJob's JobSet is not; a JobSet whose TrainJob is absent is).
Pure; nothing raises on malformed objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.causes.evidence import (
    EvidenceSet,
    ObjectHistory,
    Ref,
    event_subject,
)
from dispatch.adapters.kubeflow.objects import as_int, as_list, dig, labels_of, text_of

#: training-operator v1 kinds (kubeflow.org; MPIJob is v2beta1)
OPERATOR_KINDS = ("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob")
#: every workload kind diagnose reads, outermost first
WORKLOAD_KINDS = ("TrainJob", "JobSet", *OPERATOR_KINDS, "Job")

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
TRAINJOB_NAME = "trainer.kubeflow.org/trainjob-name"
OPERATOR_JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX_LABELS = ("jobset.sigs.k8s.io/job-global-index", "jobset.sigs.k8s.io/job-index")
WORKLOAD_JOB_UID = "kueue.x-k8s.io/job-uid"
#: labels dispatch puts on what it creates (a TrainJob's JobSet, Jobs and pods carry them too)
DISPATCH_LABELS = ("dispatch.dev/job", "dispatch.dev/attempt")
MANAGED_BY = "app.kubernetes.io/managed-by"

#: a Job pod's generated name ``<job>-<index>-<5 random>`` and a v1 pod's ``<job>-<type>-<index>``
_JOB_POD = re.compile(r"^(?P<job>.+)-(?P<index>\d+)-[a-z0-9]{5}$")
_OPERATOR_POD = re.compile(
    r"^(?P<job>.+)-(?P<type>master|worker|ps|chief|evaluator|launcher)-(?P<index>\d+)$"
)


def owners(obj: Any) -> list[tuple[str, str, str]]:
    """(kind, name, uid) of each owner reference."""
    found = []
    for owner in as_list(dig(obj, "metadata", "ownerReferences")) or []:
        kind, name = text_of(dig(owner, "kind")), text_of(dig(owner, "name"))
        if kind and name:
            found.append((kind, name, text_of(dig(owner, "uid"))))
    return found


def workloads(evidence: EvidenceSet) -> list[Ref]:
    """The top-level workloads of ``evidence``, outermost kind first, then by name."""
    found: list[Ref] = []
    for kind in WORKLOAD_KINDS:
        for history in evidence.histories(kind):
            if _parent(evidence, history) is None:
                found.append(history.ref)
    return found


def implied_workloads(evidence: EvidenceSet) -> list[Ref]:
    """The workloads that the pods and Jobs of ``evidence`` name (by owner reference or
    label) though the workload object itself is not there: the outermost one of each."""
    found: list[Ref] = []
    for history in [*evidence.histories("Job"), *evidence.histories("Pod")]:
        named = _named_workloads(history.latest)
        if not named:
            continue
        kind, name = min(named, key=lambda pair: WORKLOAD_KINDS.index(pair[0]))
        ref = Ref(kind, history.ref.namespace, name)
        if ref not in found and not any((r.kind, r.name) in named for r in found):
            found.append(ref)
    return found


#: training-operator ``operator-name`` label values -> their kind
_OPERATORS = {f"{k.lower()}-controller": k for k in OPERATOR_KINDS}


def _named_workloads(obj: Any) -> set[tuple[str, str]]:
    named = {(k, n) for k, n, _ in owners(obj) if k in WORKLOAD_KINDS}
    labels = labels_of(obj)
    if text_of(labels.get(TRAINJOB_NAME)):
        named.add(("TrainJob", text_of(labels.get(TRAINJOB_NAME))))
    if text_of(labels.get(JOBSET_NAME)):
        named.add(("JobSet", text_of(labels.get(JOBSET_NAME))))
    operator = _OPERATORS.get(text_of(labels.get("training.kubeflow.org/operator-name")))
    if operator and text_of(labels.get(OPERATOR_JOB_NAME)):
        named.add((operator, text_of(labels.get(OPERATOR_JOB_NAME))))
    for label in JOB_NAME_LABELS:
        if text_of(labels.get(label)):
            named.add(("Job", text_of(labels.get(label))))
            break
    return named


def _parent(evidence: EvidenceSet, history: ObjectHistory) -> Ref | None:
    ref, latest = history.ref, history.latest
    for kind, name, _ in owners(latest):
        if kind in WORKLOAD_KINDS and evidence.get(kind, name, ref.namespace) is not None:
            return Ref(kind, ref.namespace, name)
    labels = labels_of(latest)
    if ref.kind == "JobSet" and evidence.get("TrainJob", ref.name, ref.namespace):
        return Ref("TrainJob", ref.namespace, ref.name)
    if ref.kind == "Job":
        jobset = text_of(labels.get(JOBSET_NAME))
        if jobset and evidence.get("JobSet", jobset, ref.namespace):
            return Ref("JobSet", ref.namespace, jobset)
        operator_job = text_of(labels.get(OPERATOR_JOB_NAME))
        for kind in OPERATOR_KINDS:
            if operator_job and evidence.get(kind, operator_job, ref.namespace):
                return Ref(kind, ref.namespace, operator_job)
    return None


def scoped(evidence: EvidenceSet, root: Ref) -> EvidenceSet:
    """Only what belongs to the workload ``root`` (a dump may hold unrelated objects).

    Kept: the workload; what it owns, directly or through its JobSet and Jobs (by owner
    reference or by the labels its controllers set); its Kueue Workload; the Nodes its pods
    ran on; and Events about any of these (pods and Jobs that vanished are recognised by the
    ``<name>-`` prefix their controllers give their names).
    """
    own = evidence.get(root.kind, root.name, root.namespace or None)
    kept: dict[Ref, ObjectHistory] = {own.ref: own} if own else {}
    candidates = [
        h for h in evidence.histories() if h.ref.kind not in ("Event", "Node") and h is not own
    ]
    namespace = own.ref.namespace if own else root.namespace
    for _ in range(len(WORKLOAD_KINDS) + 2):  # each round goes one level down
        uids = {u for h in kept.values() for u in _uids(h)}
        # the workload itself counts even when it is not (or no longer) in the evidence
        names = {(r.kind, r.name) for r in kept} | {(root.kind, root.name)}
        added = False
        for history in candidates:
            if history.ref in kept or (namespace and history.ref.namespace != namespace):
                continue
            if _belongs(history, names, uids):
                kept[history.ref] = history
                added = True
        if not added:
            break
    nodes = {
        text_of(dig(o, "spec", "nodeName"))
        for h in kept.values()
        if h.ref.kind == "Pod"
        for o in h.objects()
    }
    for history in evidence.histories("Node"):
        if history.ref.name in nodes:
            kept[history.ref] = history
    names = {(r.kind, r.name) for r in kept} | {(root.kind, root.name)}
    prefix = f"{root.name}-"
    events = []
    for history in evidence.histories("Event"):
        about = event_subject(history.latest)
        if about is None or (namespace and history.ref.namespace not in ("", namespace)):
            continue
        kind, name = about
        if (kind, name) in names or (kind in ("Pod", "Job") and name.startswith(prefix)):
            events.append(history)
    return EvidenceSet([*kept.values(), *events])


def _uids(history: ObjectHistory) -> set[str]:
    return {u for u in (text_of(dig(o, "metadata", "uid")) for o in history.objects()) if u}


def _belongs(history: ObjectHistory, names: set[tuple[str, str]], uids: set[str]) -> bool:
    kind = history.ref.kind
    for obj in history.objects():
        for owner_kind, owner_name, uid in owners(obj):
            if (uid and uid in uids) or (owner_kind, owner_name) in names:
                return True
        labels = labels_of(obj)
        if kind == "JobSet" and ("TrainJob", history.ref.name) in names:
            return True
        if kind in ("Job", "Pod"):
            for label, owner_kinds in _LABELLED_BY:
                value = text_of(labels.get(label))
                if value and any((k, value) in names for k in owner_kinds):
                    return True
        if kind == "Workload" and text_of(labels.get(WORKLOAD_JOB_UID)) in uids:
            return True
    return False


#: pod and Job labels naming their owner, and the kinds that owner may be
_LABELLED_BY: tuple[tuple[str, tuple[str, ...]], ...] = (
    (JOBSET_NAME, ("JobSet", "TrainJob")),
    (TRAINJOB_NAME, ("TrainJob",)),
    (OPERATOR_JOB_NAME, OPERATOR_KINDS),
    *((label, ("Job",)) for label in JOB_NAME_LABELS),
)


def managed_by_dispatch(evidence: EvidenceSet) -> bool:
    """dispatch made this workload (its labels, or those of its TrainJob, say so): dispatch
    starts every attempt itself, so any re-run inside one is unplanned."""
    for kind in ("TrainJob", "JobSet", "Job"):
        for history in evidence.histories(kind):
            labels = labels_of(history.latest)
            if labels.get(MANAGED_BY) == "dispatch" or any(k in labels for k in DISPATCH_LABELS):
                return True
    return False


# --- ranks ----------------------------------------------------------------------------------


def ranks(evidence: EvidenceSet, masters: frozenset[str] | None = None) -> dict[str, int | None]:
    """Each pod's rank (the node rank a launcher gives it), by pod name; see the module table.
    ``masters``: ``with_master(evidence)``, when the caller has it already."""
    masters = with_master(evidence) if masters is None else masters
    per_job = _pods_per_job(evidence)
    before = _pods_before_job(evidence)
    found: dict[str, int | None] = {}
    for history in evidence.histories("Pod"):
        found[history.ref.name] = pod_rank(
            history.latest, history.ref.name, masters, per_job, before
        )
    return found


def pod_rank(
    pod: Any,
    name: str = "",
    with_master: frozenset[str] = frozenset(),
    per_job: Mapping[str, int] | None = None,
    before: Mapping[str, int] | None = None,
) -> int | None:
    """The rank of one pod from its controllers' labels (else its name).

    ``with_master``: names of PyTorchJobs with a Master replica (their workers come after it);
    ``per_job``: pods per Job of a JobSet, by Job name (default 1); ``before``: pods of the
    JobSet's Jobs with a lower global index, by Job name, where every such Job is known (its
    replicated jobs may differ in size: an MPI launcher after its nodes is the next rank).
    """
    labels = labels_of(pod)
    replica = text_of(labels.get(REPLICA_TYPE)).lower()
    index = as_int(labels.get(REPLICA_INDEX))
    if replica and index is not None:
        job = text_of(labels.get(OPERATOR_JOB_NAME))
        return index + 1 if replica == "worker" and job in with_master else index
    completion = as_int(labels.get(COMPLETION_INDEX))
    if completion is None:
        completion = as_int(dig(pod, "metadata", "annotations", COMPLETION_INDEX))
    job_index = next(
        (i for i in (as_int(labels.get(k)) for k in JOB_INDEX_LABELS) if i is not None), None
    )
    if completion is not None:
        if job_index:
            job = text_of(next((labels.get(k) for k in JOB_NAME_LABELS if labels.get(k)), ""))
            if before and job in before:
                return before[job] + completion
            return job_index * (per_job or {}).get(job, 1) + completion
        return completion
    return rank_from_pod_name(name or text_of(dig(pod, "metadata", "name")), with_master)


def rank_from_pod_name(name: str, with_master: frozenset[str] = frozenset()) -> int | None:
    """The rank in a pod name a controller generated (``<job>-<index>-<5 random>`` for Job
    pods, ``<job>-<type>-<index>`` for training-operator pods), else None."""
    match = _OPERATOR_POD.match(name)
    if match:
        index = int(match.group("index"))
        worker = match.group("type") == "worker"
        return index + 1 if worker and match.group("job") in with_master else index
    match = _JOB_POD.match(name)
    return int(match.group("index")) if match else None


def with_master(evidence: EvidenceSet) -> frozenset[str]:
    """Names of the PyTorchJobs with a Master replica (its workers' ranks start at 1)."""
    names = set()
    for history in evidence.histories("PyTorchJob"):
        specs = dig(history.latest, "spec", "pytorchReplicaSpecs")
        if isinstance(specs, Mapping) and "Master" in specs:
            names.add(history.ref.name)
    for history in evidence.histories("Pod"):
        labels = labels_of(history.latest)
        if text_of(labels.get(REPLICA_TYPE)).lower() == "master":
            names.add(text_of(labels.get(OPERATOR_JOB_NAME)))
    return frozenset(names)


def _pods_before_job(evidence: EvidenceSet) -> dict[str, int]:
    """For each Job of a JobSet in ``evidence``, by Job name: how many pods the JobSet's Jobs
    of lower global index run (the first rank of its pods). JobSet numbers its Jobs
    ``<jobset>-<replicatedJob>-<replica>`` over its replicated jobs in order, each of
    ``parallelism`` pods; read from the JobSet's spec, as its Jobs may be gone."""
    found: dict[str, int] = {}
    for history in evidence.histories("JobSet"):
        total = 0
        for rjob in as_list(dig(history.latest, "spec", "replicatedJobs")) or []:
            name = text_of(dig(rjob, "name"))
            replicas = as_int(dig(rjob, "replicas"))
            pods = as_int(dig(rjob, "template", "spec", "parallelism"))
            for replica in range(1 if replicas is None else replicas):
                found[f"{history.ref.name}-{name}-{replica}"] = total
                total += 1 if pods is None else pods
    return found


def _pods_per_job(evidence: EvidenceSet) -> dict[str, int]:
    found: dict[str, int] = {}
    for history in evidence.histories("Job"):
        spec = dig(history.latest, "spec")
        count = as_int(dig(spec, "parallelism")) or as_int(dig(spec, "completions"))
        if count:
            found[history.ref.name] = count
    return found


# --- what the workload's own spec lets its controllers re-run ---------------------------------


def restart_policy(pod: Any) -> str:
    return text_of(dig(pod, "spec", "restartPolicy")) or "Always"


def backoff_limit(job: Any) -> int | None:
    """The retries a Job allows (``backoffLimit``, else ``backoffLimitPerIndex``)."""
    spec = dig(job, "spec")
    limits = [as_int(dig(spec, "backoffLimit")), as_int(dig(spec, "backoffLimitPerIndex"))]
    known = [limit for limit in limits if limit is not None]
    return max(known) if known else None


def jobset_max_restarts(jobset: Any) -> int:
    return as_int(dig(jobset, "spec", "failurePolicy", "maxRestarts")) or 0


def replica_specs(job: Any) -> Mapping[str, Any]:
    """``spec.<kind>ReplicaSpecs`` of a training-operator job (``pytorchReplicaSpecs``, ...)."""
    spec = dig(job, "spec")
    if isinstance(spec, Mapping):
        for key, value in spec.items():
            if str(key).endswith("ReplicaSpecs") and isinstance(value, Mapping):
                return value
    return {}


def restart_policies(job: Any) -> dict[str, str]:
    """Each replica type's ``restartPolicy``, by lower-case type (as the pods' labels say it)."""
    found = {}
    for replica, spec in replica_specs(job).items():
        policy = text_of(dig(spec, "restartPolicy")) or text_of(
            dig(spec, "template", "spec", "restartPolicy")
        )
        found[str(replica).lower()] = policy or "Never"
    return found


def replacement_plans(evidence: EvidenceSet) -> dict[str, str]:
    """For each pod whose controller replaces failed pods, the spec field that asks for it:
    its Job's ``backoffLimit`` (> 0), its training-operator replica's ``restartPolicy`` (not
    ``Never``). By pod name; pods without one are absent."""
    jobs = {h.ref.name: h.latest for h in evidence.histories("Job")}
    operator = {
        h.ref.name: restart_policies(h.latest)
        for kind in OPERATOR_KINDS
        for h in evidence.histories(kind)
    }
    found: dict[str, str] = {}
    for history in evidence.histories("Pod"):
        labels = labels_of(history.latest)
        job = next((text_of(labels.get(k)) for k in JOB_NAME_LABELS if labels.get(k)), "")
        limit = backoff_limit(jobs[job]) if job in jobs else None
        if limit:
            found[history.ref.name] = f"spec.backoffLimit {limit} of Job {job}"
        owner = text_of(labels.get(OPERATOR_JOB_NAME))
        replica = text_of(labels.get(REPLICA_TYPE)).lower()
        policy = operator.get(owner, {}).get(replica, "")
        if policy and policy != "Never":
            found[history.ref.name] = f"restartPolicy {policy} of {owner}'s {replica} replicas"
    return found

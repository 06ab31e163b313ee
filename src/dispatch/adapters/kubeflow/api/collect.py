"""Collecting every object that explains one training workload: from a cluster, or as the
``kubectl`` commands that write the same dump.

For a workload (kind, name, namespace) the dump holds the workload; its JobSet (TrainJob);
the Jobs and Pods its controllers labelled; the namespace's Events (an Event carries no
label: the cause function keeps those about the workload's objects, including pods already
deleted); Kueue's Workloads in the namespace (when Kueue is installed); for a TrainJob, the
PodGroups of the namespace (scheduler-plugins', Volcano's, where installed: its gang); and the
Nodes its pods ran on. Read-only: nothing here writes to the cluster.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.api.client import TRAINJOBS, JsonObj, Resource, Session
from dispatch.adapters.kubeflow.api.kinds import (
    CORE_EVENTS,
    JOBS,
    JOBSETS,
    NODES,
    POD_GROUPS,
    PODS,
    WORKLOADS,
)
from dispatch.adapters.kubeflow.api.listwatch import list_raw
from dispatch.model import NotFound


def _operator(kind: str, plural: str, version: str = "v1") -> Resource:
    return Resource("kubeflow.org", version, plural, kind)


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    """A workload kind: its resource, and the label its controllers put on its Jobs and Pods."""

    resource: Resource
    label: str
    #: also list the Jobs carrying ``label`` (a JobSet's Jobs, an MPIJob's launcher)
    jobs: bool = False
    #: also read the JobSet of the same name (a TrainJob's)
    jobset: bool = False

    @property
    def kubectl_name(self) -> str:
        res = self.resource
        return f"{res.plural}.{res.group}" if res.group else res.plural


KINDS: dict[str, WorkloadKind] = {
    "TrainJob": WorkloadKind(TRAINJOBS, "jobset.sigs.k8s.io/jobset-name", jobs=True, jobset=True),
    "JobSet": WorkloadKind(JOBSETS, "jobset.sigs.k8s.io/jobset-name", jobs=True),
    "PyTorchJob": WorkloadKind(
        _operator("PyTorchJob", "pytorchjobs"), "training.kubeflow.org/job-name"
    ),
    "TFJob": WorkloadKind(_operator("TFJob", "tfjobs"), "training.kubeflow.org/job-name"),
    "MPIJob": WorkloadKind(
        _operator("MPIJob", "mpijobs", "v2beta1"), "training.kubeflow.org/job-name", jobs=True
    ),
    "XGBoostJob": WorkloadKind(
        _operator("XGBoostJob", "xgboostjobs"), "training.kubeflow.org/job-name"
    ),
    "PaddleJob": WorkloadKind(
        _operator("PaddleJob", "paddlejobs"), "training.kubeflow.org/job-name"
    ),
    "JAXJob": WorkloadKind(_operator("JAXJob", "jaxjobs"), "training.kubeflow.org/job-name"),
    "Job": WorkloadKind(JOBS, "batch.kubernetes.io/job-name"),
}

#: what a user may type for a kind (``pytorchjob``, ``pytorchjobs``, ``jobs.batch``, ...)
_ALIASES = {
    **{k.lower(): k for k in KINDS},
    **{w.resource.plural: k for k, w in KINDS.items()},
    **{w.kubectl_name: k for k, w in KINDS.items()},
}


def parse_target(text: str) -> tuple[str, str]:
    """``KIND/NAME`` -> (the kind as Kubernetes spells it, name). ``ValueError`` says why not."""
    kind_text, sep, name = text.partition("/")
    if not sep or not kind_text or not name or "/" in name:
        raise ValueError(f"{text!r} is not KIND/NAME (for example pytorchjob/my-job)")
    kind = _ALIASES.get(kind_text.lower())
    if kind is None:
        known = ", ".join(k.lower() for k in KINDS)
        raise ValueError(f"{kind_text!r} is not a workload kind diagnose reads ({known})")
    return kind, name


def kubectl_commands(kind: str, name: str, namespace: str, out: str = "") -> list[str]:
    """The shell lines that write the dump ``collect`` would read (one multi-document YAML)."""
    wk = KINDS[kind]
    ns = f"-n {shlex.quote(namespace)}"
    target = f"{wk.kubectl_name}/{shlex.quote(name)}"
    if wk.jobset:
        target += f" jobsets.jobset.x-k8s.io/{shlex.quote(name)}"
    selector = shlex.quote(f"{wk.label}={name}")
    owned = "jobs.batch,pods" if wk.jobs or kind == "JobSet" else "pods"
    file = shlex.quote(out or f"{name}-dump.yaml")
    return [
        "{",
        f"  kubectl get {ns} {target} -o yaml",
        "  echo ---",
        f"  kubectl get {ns} {owned} -l {selector} -o yaml",
        "  echo ---",
        f"  kubectl get {ns} events -o yaml",
        "  echo ---",
        f"  kubectl get {ns} workloads.kueue.x-k8s.io -o yaml 2>/dev/null || true",
        "  echo ---",
        *(_pod_group_commands(ns) if wk.jobset else []),
        "  kubectl get nodes -o yaml",
        f"}} > {file}",
    ]


def _pod_group_commands(ns: str) -> list[str]:
    """A TrainJob's gang: the namespace's PodGroups of each kind, where installed."""
    return [
        line
        for res in POD_GROUPS
        for line in (
            f"  kubectl get {ns} {res.plural}.{res.group} -o yaml 2>/dev/null || true",
            "  echo ---",
        )
    ]


async def collect(session: Session, kind: str, name: str, namespace: str) -> list[JsonObj]:
    """Every object that explains the workload, as the API gives them (module docstring).

    Raises ``NotFound`` when neither the workload nor any pod of it exists, and another
    ``DispatchError`` when the cluster cannot be read."""
    wk = KINDS[kind]
    objects: list[JsonObj] = []
    own = await session.get(wk.resource, name, namespace)
    if own is not None:
        objects.append(_typed(own, wk.resource))
    if wk.jobset:
        jobset = await session.get(JOBSETS, name, namespace)
        if jobset is not None:
            objects.append(_typed(jobset, JOBSETS))
    selector = f"{wk.label}={name}"
    owned = [JOBS, PODS] if wk.jobs or kind == "JobSet" else [PODS]
    for res in owned:
        objects.extend(await _items(session, res, namespace, selector))
    pods = [o for o in objects if o.get("kind") == "Pod"]
    if own is None and not pods:
        raise NotFound(f"{kind} {namespace}/{name} does not exist, and no pod of it does")
    objects.extend(await _items(session, CORE_EVENTS, namespace))
    with suppress(NotFound):  # no Kueue on this cluster
        objects.extend(await _items(session, WORKLOADS, namespace))
    for res in POD_GROUPS if wk.jobset else ():
        with suppress(NotFound):  # no such gang scheduler on this cluster
            objects.extend(await _items(session, res, namespace))
    for node in sorted({_node(p) for p in pods} - {""}):
        found = await session.read_core("Node", node)
        if found is not None:
            objects.append(_typed(found, NODES))
    return objects


async def _items(
    session: Session, res: Resource, namespace: str, selector: str = ""
) -> list[JsonObj]:
    listed = await list_raw(session, res, namespace, label_selector=selector)
    return [item for item in listed.get("items") or [] if isinstance(item, dict)]


def _typed(obj: Mapping[str, Any], res: Resource) -> JsonObj:
    found = dict(obj)
    found.setdefault("kind", res.kind)
    found.setdefault("apiVersion", res.api_version)
    return found


def _node(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return node if isinstance(node, str) else ""

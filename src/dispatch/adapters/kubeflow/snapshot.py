"""One attempt's objects read once (for ``observe`` without a running capture).

``snapshot(session, namespace, trainjob, at)`` lists what belongs to one TrainJob, label-
selected per object where the labels allow (its JobSet by name, Jobs and Pods by
``jobset.sigs.k8s.io/jobset-name``, Workloads by ``kueue.x-k8s.io/job-uid``, Events of the
namespace, the Nodes its pods ran on) and returns them as ``object_evidence`` records. It
reads the present only: what the cluster already deleted is in the records store, which the
supervisor hands back (``KubeflowAdapter.seed_evidence``). A kind the cluster does not serve
is skipped.

The reads of one snapshot are not one consistent cut of the cluster (each list is read at
its own moment), so ``observe`` reads a snapshot that shows an end twice and ``merged`` joins
the two.
"""

from __future__ import annotations

from typing import Any

from dispatch.adapters.kubeflow.attribution import Attribution
from dispatch.adapters.kubeflow.causes_evidence import object_evidence, text_of
from dispatch.adapters.kubeflow.client import TRAINJOBS, Resource, Session
from dispatch.adapters.kubeflow.kinds import (
    CORE_EVENTS,
    JOBS,
    JOBSET_NAME,
    JOBSETS,
    NODES,
    PODS,
    WORKLOAD_JOB_UID,
    WORKLOADS,
)
from dispatch.adapters.kubeflow.listwatch import list_raw
from dispatch.adapters.kubeflow.shape import dig
from dispatch.model import Evidence, Forbidden, NotFound


async def _items(
    session: Session, res: Resource, namespace: str | None, selector: str = ""
) -> list[dict[str, Any]]:
    try:
        listing = await list_raw(session, res, namespace, label_selector=selector)
    except (NotFound, Forbidden):
        return []
    return [i for i in listing.get("items") or [] if isinstance(i, dict)]


async def snapshot(session: Session, namespace: str, name: str, at: float) -> list[Evidence]:
    """The TrainJob ``namespace/name`` and what belongs to it now, as records seen ``at``."""
    trainjob = await session.get(TRAINJOBS, name, namespace)
    if trainjob is None:
        return []
    trainjob.setdefault("kind", "TrainJob")
    uid = text_of(dig(trainjob, "metadata", "uid"))
    found: list[dict[str, Any]] = [trainjob]
    jobset = await session.get(JOBSETS, name, namespace)
    if jobset is not None:
        found.append({"kind": "JobSet", **jobset})
    found += await _items(session, JOBS, namespace, f"{JOBSET_NAME}={name}")
    pods = await _items(session, PODS, namespace, f"{JOBSET_NAME}={name}")
    found += pods
    if uid:
        found += await _items(session, WORKLOADS, namespace, f"{WORKLOAD_JOB_UID}={uid}")
    found += await _items(session, CORE_EVENTS, namespace)
    nodes = {text_of(dig(p, "spec", "nodeName")) for p in pods} - {""}
    if nodes:
        listed = await _items(session, NODES, None)
        found += [n for n in listed if dig(n, "metadata", "name") in nodes]
    index = Attribution()
    return [
        object_evidence(obj, at) for obj in found if obj.get("kind") == "Node" or index.assign(obj)
    ]


def merged(first: list[Evidence], later: list[Evidence]) -> list[Evidence]:
    """The records of two snapshots, each object state once (by key), the first's first."""
    keys = {r.key for r in first}
    return [*first, *(r for r in later if r.key not in keys)]

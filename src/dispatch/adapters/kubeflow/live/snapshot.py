"""One attempt's objects read once (for ``observe`` without a running capture).

``snapshot(session, namespace, trainjob, at)`` lists what belongs to one TrainJob, label-
selected per object where the labels allow (its JobSet by name, Jobs and Pods by
``jobset.sigs.k8s.io/jobset-name``, Workloads by ``kueue.x-k8s.io/job-uid``, its PodGroup by
owner or name, Events of the namespace, the Nodes its pods ran on) and returns them as
``object_evidence`` records. It
reads the present only: what the cluster already deleted is in the records store, which the
supervisor hands back (``KubeflowAdapter.seed_evidence``). A kind the cluster does not serve
is skipped. Lists are read page by page and only what belongs to the TrainJob is kept.

The reads of one snapshot are not one consistent cut of the cluster (each list is read at
its own moment), so ``observe`` reads a snapshot that shows an end twice and ``merged`` joins
the two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dispatch.adapters.kubeflow.api.client import TRAINJOBS, Resource, Session
from dispatch.adapters.kubeflow.api.kinds import (
    CORE_EVENTS,
    JOBS,
    JOBSET_NAME,
    JOBSETS,
    NODES,
    POD_GROUPS,
    PODS,
    WORKLOAD_JOB_UID,
    WORKLOADS,
)
from dispatch.adapters.kubeflow.api.listwatch import list_pages
from dispatch.adapters.kubeflow.causes.evidence import object_evidence
from dispatch.adapters.kubeflow.live.attribution import Attribution
from dispatch.adapters.kubeflow.live.identity import replaced_by, replaced_evidence
from dispatch.adapters.kubeflow.live.laststate import trim
from dispatch.adapters.kubeflow.objects import dig, text_of
from dispatch.model import Evidence, Forbidden, NotFound


async def _items(
    session: Session,
    res: Resource,
    namespace: str | None,
    selector: str = "",
    *,
    keep: Callable[[dict[str, Any]], bool] = lambda _: True,
) -> list[dict[str, Any]]:
    """The listed objects ``keep`` accepts, page by page (a namespace's Events are not all
    decoded at once)."""
    found: list[dict[str, Any]] = []
    try:
        async for page in list_pages(session, res, namespace, label_selector=selector):
            found += [i for i in page.get("items") or [] if isinstance(i, dict) and keep(i)]
    except (NotFound, Forbidden):
        return []
    return found


async def snapshot(
    session: Session, namespace: str, name: str, at: float, *, uid: str | None = None
) -> list[Evidence]:
    """The TrainJob ``namespace/name`` and what belongs to it now, as records seen ``at``.
    With the attempt's ``uid``, a TrainJob of another uid under the name is not read further:
    the one record is the proof that the name holds another object (``identity``)."""
    trainjob = await session.get(TRAINJOBS, name, namespace)
    if trainjob is None:
        return []
    other = replaced_by(trainjob, uid)
    if other is not None and uid is not None:
        return [replaced_evidence(namespace, name, uid, other, at)]
    trainjob.setdefault("kind", "TrainJob")
    uid = text_of(dig(trainjob, "metadata", "uid"))
    index = Attribution()

    def belongs(obj: dict[str, Any]) -> bool:
        return bool(index.assign(obj))

    found: list[dict[str, Any]] = [o for o in (trainjob,) if belongs(o)]
    jobset = await session.get(JOBSETS, name, namespace)
    if jobset is not None:
        found += [o for o in ({"kind": "JobSet", **jobset},) if belongs(o)]
    found += await _items(session, JOBS, namespace, f"{JOBSET_NAME}={name}", keep=belongs)
    pods = await _items(session, PODS, namespace, f"{JOBSET_NAME}={name}", keep=belongs)
    found += pods
    if uid:
        found += await _items(
            session, WORKLOADS, namespace, f"{WORKLOAD_JOB_UID}={uid}", keep=belongs
        )
    for res in POD_GROUPS:
        found += await _items(session, res, namespace, keep=belongs)
    found += await _items(session, CORE_EVENTS, namespace, keep=belongs)
    nodes = {text_of(dig(p, "spec", "nodeName")) for p in pods} - {""}
    if nodes:
        found += await _items(
            session, NODES, None, keep=lambda n: dig(n, "metadata", "name") in nodes
        )
    return [object_evidence(trim(obj), at) for obj in found]  # as the streams keep them


def merged(first: list[Evidence], later: list[Evidence]) -> list[Evidence]:
    """The records of two snapshots, each object state once (by key), the first's first."""
    keys = {r.key for r in first}
    return [*first, *(r for r in later if r.key not in keys)]

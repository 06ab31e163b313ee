"""Diagnosing one workload on a live cluster: read its objects, again and again with
``--follow``, and judge what was seen (``dispatch diagnose KIND/NAME --cluster C``).

Each read (``api.collect``) is kept as evidence the way the supervisor keeps what it watches:
one record per object state (by resourceVersion), and a deletion record for an object seen
before and gone now. So a pod the Job controller deletes after a failure still explains the
failure at the next judgement, as it would from the supervisor's records. Only the
workload's own objects are kept (a namespace's other Events are dropped at each read), so
memory grows with the workload's history, not the namespace's. Read-only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from dispatch.adapters.kubeflow.api.client import Session
from dispatch.adapters.kubeflow.api.collect import collect
from dispatch.adapters.kubeflow.causes.decide import Diagnosis, Inputs, diagnose
from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet, Ref, object_evidence, ref_of
from dispatch.adapters.kubeflow.causes.workloads import scoped
from dispatch.model import Evidence, NotFound

#: seconds between two reads of a followed workload
DEFAULT_INTERVAL = 5.0


class Following:
    """The evidence gathered so far about one workload."""

    def __init__(self, kind: str, name: str, namespace: str) -> None:
        self.ref = Ref(kind, namespace, name)
        self.records: dict[str, Evidence] = {}
        self.present: dict[Ref, Mapping[str, Any]] = {}
        self.reads = 0

    def observe(self, objects: Iterable[Mapping[str, Any]], now: float) -> None:
        """One read of the cluster: new states recorded, vanished objects recorded deleted."""
        mine = scoped(EvidenceSet.from_objects(objects), self.ref)
        seen: dict[Ref, Mapping[str, Any]] = {}
        for history in mine.histories():
            obj = history.latest
            record = object_evidence(obj, now)
            self.records.setdefault(record.key, record)
            ref = ref_of(obj)
            if ref is not None:
                seen[ref] = obj
        for ref, obj in self.present.items():
            if ref not in seen and ref.kind != "Event":  # Events expire; that is no news
                gone = object_evidence(obj, now, deleted=True)
                self.records.setdefault(gone.key, gone)
        self.present = seen
        self.reads += 1

    def judge(self, now: float, patience: float) -> Diagnosis:
        inputs = Inputs(patience=patience, now=now, workload=self.ref)
        return diagnose(EvidenceSet.from_evidence(self.records.values()), inputs)


async def diagnose_live(
    session: Session,
    following: Following,
    *,
    patience: float,
    follow: bool = False,
    interval: float = DEFAULT_INTERVAL,
    on_change: Callable[[Diagnosis], None] | None = None,
    sleep: Callable[[float], Awaitable[Any]] | None = None,
    clock: Callable[[], float] = time.time,
) -> Diagnosis:
    """Read the workload (and, with ``follow``, keep reading it every ``interval`` seconds
    until its outcome is terminal); ``on_change`` hears each new outcome. Raises
    ``NotFound`` when the workload was never there."""
    wait = sleep or asyncio.sleep
    ref = following.ref
    shown: tuple[Any, ...] | None = None
    while True:
        try:
            objects = await collect(session, ref.kind, ref.name, ref.namespace)
        except NotFound:
            if following.reads == 0:
                raise
            objects = []  # it was there: now it is gone, and that is evidence
        now = clock()
        following.observe(objects, now)
        diagnosis = following.judge(now, patience)
        outcome = diagnosis.outcome
        key = (outcome.state, outcome.cause, outcome.summary)
        if key != shown:
            shown = key
            if on_change is not None:
                on_change(diagnosis)
        if not follow or outcome.is_terminal:
            return diagnosis
        await wait(interval)

"""The evidence ledger: every object state seen, filed under the TrainJob it is evidence for.

``Ledger.seen(obj)`` files one observed object state, the moment it is seen, as an
``object_evidence`` record under each TrainJob ``attribution.Attribution`` assigns it to (and
a pod's node, the first time the pod is seen on it). Records are de-duplicated by key (kind,
object, resourceVersion, deleted), so a state seen twice (a re-list, a GET) is filed once.

* ``take(ref)`` hands out the records filed since the last take (``give_back`` undoes a take
  whose records were not delivered); ``records(ref)`` every record kept, seeded ones included.
* ``release(ref)`` (the attempt's outcome is final) drops what is kept for it, but the part of
  the TrainJob that retirement reads (``latest_trainjob``); ``forget(ref)`` drops everything.
* ``changed`` (the event given) is set whenever a record is filed.

No I/O. An object whose TrainJob is not known yet is kept by the attribution and filed once
its TrainJob is seen; ``claim`` is told, so the streams keep that object's state for it.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from dispatch.adapters.kubeflow.api.kinds import kueue_may_manage
from dispatch.adapters.kubeflow.causes.coarse import ANNOTATION_ENDED, ANNOTATION_STARTED
from dispatch.adapters.kubeflow.causes.evidence import DELETED_SUFFIX, object_evidence
from dispatch.adapters.kubeflow.causes.podgroups import COSCHEDULING_LABEL, VOLCANO_ANNOTATION
from dispatch.adapters.kubeflow.live.attribution import Attribution, TrainJobRef
from dispatch.adapters.kubeflow.live.laststate import version_of
from dispatch.adapters.kubeflow.objects import dig, text_of
from dispatch.adapters.kubeflow.planning.trainjob import LABEL_JOB
from dispatch.clock import Clock
from dispatch.model import Evidence

#: the metadata and condition fields retirement reads; the rest of a released TrainJob goes
RETIREMENT_METADATA = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")
RETIREMENT_CONDITION = ("type", "status")
#: and dispatch's marks on it, which the cluster-side guard reads
RETIREMENT_MARKS = (ANNOTATION_ENDED, ANNOTATION_STARTED)
#: TrainJobs whose pods are kept, when their outcome became final, for their last words
FINAL_PODS_KEPT = 1000

Claim = Callable[[TrainJobRef, Mapping[str, Any]], None]


class Ledger:
    """The records of every TrainJob followed (see the module docstring)."""

    def __init__(self, clock: Clock, changed: asyncio.Event, claim: Claim) -> None:
        self.clock = clock
        self.changed = changed
        self.attribution = Attribution()
        self._claim = claim
        self._records: dict[TrainJobRef, list[Evidence]] = {}
        #: per TrainJob, the key of each record filed and its place in ``_records``
        self._keys: dict[TrainJobRef, dict[str, int]] = {}
        self._fresh: dict[TrainJobRef, list[Evidence]] = {}
        self._trainjob: dict[TrainJobRef, tuple[Mapping[str, Any], bool]] = {}
        self._newest: dict[TrainJobRef, int] = {}  # the newest resourceVersion filed per ref
        self._queued: set[TrainJobRef] = set()  # Kueue may manage them (a Workload may exist)
        self._ganged: set[TrainJobRef] = set()  # a PodGroup of them may exist
        self._with_pods: set[TrainJobRef] = set()  # a pod of them was filed
        self._nodes: dict[str, Mapping[str, Any]] = {}
        self._node_sent: dict[TrainJobRef, set[tuple[str, str]]] = {}  # (node, version) filed
        self._viewed: set[TrainJobRef] = set()  # released: their TrainJob kept as retirement reads
        self._final_pods: OrderedDict[TrainJobRef, list[Mapping[str, Any]]] = OrderedDict()

    # --- reading ----------------------------------------------------------------------------

    def records(self, ref: TrainJobRef) -> list[Evidence]:
        return list(self._records.get(ref, ()))

    def take(self, ref: TrainJobRef) -> tuple[Evidence, ...]:
        return tuple(self._fresh.pop(ref, ()))

    def give_back(self, ref: TrainJobRef, records: Iterable[Evidence]) -> None:
        """Undo a ``take`` whose records were not delivered: the next take returns them first."""
        returned = list(records)
        if returned:
            self._fresh[ref] = [*returned, *self._fresh.get(ref, ())]
            self.changed.set()

    def fresh_refs(self) -> list[TrainJobRef]:
        """The TrainJobs with records filed since their last ``take``."""
        return list(self._fresh)

    def latest_trainjob(self, ref: TrainJobRef) -> tuple[Mapping[str, Any] | None, bool]:
        """The TrainJob as last filed, and whether that record is its deletion (once
        released: its metadata, ``spec.suspend`` and ``status.conditions`` only)."""
        return self._trainjob.get(ref, (None, False))

    def newest(self, ref: TrainJobRef) -> int:
        """The newest resourceVersion of the records filed for ``ref`` (0: none readable)."""
        return self._newest.get(ref, 0)

    def may_be_queued(self, ref: TrainJobRef) -> bool:
        """Whether Kueue may manage ``ref``, so that a Workload of it may exist: a state filed
        showed it (``api.kinds.kueue_may_manage``), or no state of it is filed yet."""
        return ref in self._queued or ref not in self._trainjob

    def may_be_ganged(self, ref: TrainJobRef) -> bool:
        """Whether a PodGroup of ``ref`` may exist (gang scheduling): a PodGroup of it was
        filed, or one of its pods names a group (coscheduling's label, Volcano's annotation),
        or no pod of it is filed yet (a gang that never formed leaves pods unscheduled, or
        none)."""
        return ref in self._ganged or ref not in self._with_pods

    def job_label(self, ref: TrainJobRef) -> str:
        """dispatch's job label on the TrainJob as last filed ("" when not known)."""
        labels = dig(self._trainjob.get(ref, ({}, False))[0], "metadata", "labels")
        return text_of(labels.get(LABEL_JOB)) if isinstance(labels, Mapping) else ""

    # --- filing -----------------------------------------------------------------------------

    def seed(self, ref: TrainJobRef, records: Iterable[Evidence]) -> None:
        """Evidence recorded earlier (e.g. by a previous process) for this TrainJob."""
        for record in records:
            self._file(ref, record, fresh=False)

    def seen(self, obj: Mapping[str, Any], *, deleted: bool = False) -> list[TrainJobRef]:
        """File one observed object state (``deleted``: its last state before deletion);
        returns the TrainJobs it was filed for."""
        at = self.clock.now()
        kind = text_of(obj.get("kind"))
        name = text_of(dig(obj, "metadata", "name"))
        if kind == "Node":
            self._nodes[name] = obj
        refs = self.attribution.assign(obj)
        if not refs and kind != "Node":
            self.attribution.keep_orphan(obj)
        record = object_evidence(obj, at, deleted=deleted)
        for ref in refs:
            self._file(ref, record)
        if self.attribution.new_trainjob:
            for ref, orphan in self.attribution.adopt_orphans():
                self._file(ref, object_evidence(orphan, at))
                self._claim(ref, orphan)
                self._node_of(ref, orphan, at)
        for ref in refs:
            self._node_of(ref, obj, at)
        return refs

    def _file(self, ref: TrainJobRef, record: Evidence, *, fresh: bool = True) -> None:
        keys = self._keys.setdefault(ref, {})
        records = self._records.setdefault(ref, [])
        place = keys.get(record.key)
        if place is not None:
            self._same_state(ref, place, record)
            return
        keys[record.key] = len(records)
        records.append(record)
        if record.kind == "trainjob":
            self._trainjob[ref] = (record.data, record.key.endswith(DELETED_SUFFIX))
        if ref not in self._queued and (
            record.kind == "workload"
            or (record.kind == "trainjob" and kueue_may_manage(record.data))
        ):
            self._queued.add(ref)  # for good: later states do not undo what one showed
        if record.kind == "podgroup" or (record.kind == "pod" and _names_group(record.data)):
            self._ganged.add(ref)  # for good, as above
        if record.kind == "pod":
            self._with_pods.add(ref)
        version = version_of(record.data)
        if version.isdigit() and int(version) > self._newest.get(ref, 0):
            self._newest[ref] = int(version)
        if fresh:
            self._fresh.setdefault(ref, []).append(record)
            self.changed.set()

    def _same_state(self, ref: TrainJobRef, place: int, record: Evidence) -> None:
        """A state filed before comes again (its key names the object and its version): the
        TrainJob stream delivering the TrainJob whose creation's answer was filed, or a list
        made again. The record keeps its first sighting's time and takes the new copy, which
        a stream shares with the object's later states (``laststate.share``): the first copy
        is let go instead of being kept beside it while the attempt runs. ``place``: where
        the record is in ``_records``."""
        records = self._records[ref]
        kept = records[place]
        if kept.data is record.data:
            return
        records[place] = replace(kept, data=record.data)
        trainjob = self._trainjob.get(ref)
        if trainjob is not None and trainjob[0] is kept.data:
            self._trainjob[ref] = (record.data, trainjob[1])

    def _node_of(self, ref: TrainJobRef, obj: Mapping[str, Any], at: float) -> None:
        """A pod's node, filed for its TrainJob the first time the pod is seen on it."""
        if text_of(obj.get("kind")) != "Pod":
            return
        node = text_of(dig(obj, "spec", "nodeName"))
        version = text_of(dig(self._nodes.get(node), "metadata", "resourceVersion"))
        sent = self._node_sent.setdefault(ref, set())
        if node in self._nodes and (node, version) not in sent:
            sent.add((node, version))
            self._file(ref, object_evidence(self._nodes[node], at))

    # --- letting go -------------------------------------------------------------------------

    def release(self, ref: TrainJobRef) -> None:
        """The attempt of TrainJob ``ref`` has its final outcome: drop the records kept for it
        (keys stay: nothing is filed twice). Records filed afterwards are kept again (re-run
        detection reads them) until the next release. Of the TrainJob only what retirement
        reads stays (``latest_trainjob``)."""
        records = self._records.pop(ref, None)
        if records is None and ref in self._viewed:
            return  # released before, nothing filed since
        pods = {r.key.partition("@")[0]: r.data for r in records or () if r.kind == "pod"}
        if pods:  # the last words of its failed ranks are chosen among them (``final_pods``)
            self._final_pods[ref] = list(pods.values())
            self._final_pods.move_to_end(ref)
            while len(self._final_pods) > FINAL_PODS_KEPT:
                self._final_pods.popitem(last=False)
        self._keys.pop(ref, None)  # a record filed twice is harmless now: stored once by key
        self._newest.pop(ref, None)
        trainjob = self._trainjob.get(ref)
        if trainjob is not None:
            self._trainjob[ref] = (_retirement_view(trainjob[0]), trainjob[1])
            self._viewed.add(ref)

    def final_pods(self, ref: TrainJobRef) -> list[Mapping[str, Any]]:
        """The last state of each pod of ``ref`` kept when its outcome became final (taken
        once; the ``FINAL_PODS_KEPT`` latest TrainJobs' are kept)."""
        return self._final_pods.pop(ref, [])

    def forget(self, ref: TrainJobRef) -> None:
        """Drop everything kept for a TrainJob dispatch no longer follows."""
        self._final_pods.pop(ref, None)
        for table in (self._records, self._keys, self._fresh, self._trainjob, self._newest):
            table.pop(ref, None)
        self._queued.discard(ref)
        self._ganged.discard(ref)
        self._with_pods.discard(ref)
        self._viewed.discard(ref)
        self._node_sent.pop(ref, None)
        self.attribution.forget(ref)


def _names_group(pod: Mapping[str, Any]) -> bool:
    """The pod belongs to a gang: coscheduling's label or Volcano's annotation names one."""
    labels = dig(pod, "metadata", "labels")
    annotations = dig(pod, "metadata", "annotations")
    return (isinstance(labels, Mapping) and bool(labels.get(COSCHEDULING_LABEL))) or (
        isinstance(annotations, Mapping) and bool(annotations.get(VOLCANO_ANNOTATION))
    )


def _retirement_view(trainjob: Mapping[str, Any]) -> Mapping[str, Any]:
    """The parts of a TrainJob that retirement reads (``verdict.Verdicts.must_retire``), kept
    for every TrainJob ever followed (so as small as that allows)."""
    spec, status = trainjob.get("spec"), trainjob.get("status")
    metadata = trainjob.get("metadata")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    kept = _only(metadata, RETIREMENT_METADATA)
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    marks = _only(annotations, RETIREMENT_MARKS) if isinstance(annotations, Mapping) else {}
    if marks:  # the refused-resume inference reads them (``refusals``)
        kept = {**kept, "annotations": marks}
    return {
        "kind": trainjob.get("kind"),
        "metadata": kept,
        "spec": {"suspend": spec.get("suspend")} if isinstance(spec, Mapping) else {},
        "status": {
            "conditions": [_only(c, RETIREMENT_CONDITION) for c in conditions]
            if isinstance(conditions, list)
            else conditions
        },
    }


def _only(obj: Any, keys: tuple[str, ...]) -> Any:
    """``obj``'s ``keys`` alone, if it is a mapping (anything else as it is)."""
    return {k: obj[k] for k in keys if k in obj} if isinstance(obj, Mapping) else obj

"""The evidence of one attempt: every Kubernetes object seen, each with its history over time.

An ``EvidenceSet`` indexes raw objects (dicts, as the API or ``kubectl get -o yaml`` gives
them) by (kind, namespace, name). Each entry is a ``ObjectHistory``: the object as seen at each
observation, in the order observed, and whether it was seen deleted. It is built either from
recorded evidence (``from_evidence``: ``model.Evidence`` records whose ``data`` is the raw
object and whose ``observed_at`` says when it was seen, written by ``object_evidence``) or from
a dump (``from_objects``: one observation per object, with no observation time).

Nothing here raises on malformed input: an item that is not an object with a kind and a name
is skipped, a timestamp that does not parse reads as absent.

Time: Kubernetes timestamps (RFC 3339, seconds or microseconds) are read as float seconds
since the epoch by ``parse_time``. The cause function orders facts by these object
timestamps, which say when something happened; ``observed_at`` (when dispatch saw it) is only
a fallback for facts that carry no time of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.objects import dig, text_of
from dispatch.model import Evidence

#: the key suffix of a record saying the object was deleted (its ``data`` is the last state)
DELETED_SUFFIX = "#deleted"

#: kinds the cause function reads, by the lower-case name a record's ``kind`` may use
KINDS = {
    kind.lower(): kind
    for kind in (
        *("TrainJob", "JobSet", "Job", "Pod", "Event", "Workload", "Node"),
        *("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"),
    )
}


def object_kind(obj: Any, fallback: str = "") -> str:
    """The object's kind as Kubernetes spells it (``Pod``), from ``kind`` or a record's kind."""
    kind = dig(obj, "kind")
    if isinstance(kind, str) and kind:
        return KINDS.get(kind.lower(), kind)
    return KINDS.get(fallback.lower(), fallback)


@dataclass(frozen=True, slots=True)
class Ref:
    """Which object: kind, namespace ("" for cluster-scoped objects) and name."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}


def ref_of(obj: Any, fallback_kind: str = "") -> Ref | None:
    """The object's reference, or None when it has no kind or no name."""
    kind = object_kind(obj, fallback_kind)
    name = dig(obj, "metadata", "name")
    if not kind or not isinstance(name, str) or not name:
        return None
    return Ref(kind, text_of(dig(obj, "metadata", "namespace")), name)


@dataclass(frozen=True, slots=True)
class Sighting:
    """The object as seen once: when (None in a dump), its content, and if it was deleted."""

    obj: Mapping[str, Any]
    at: float | None = None
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class ObjectHistory:
    """Every sighting of one object, oldest first. Never empty."""

    ref: Ref
    sightings: tuple[Sighting, ...]

    @property
    def latest(self) -> Mapping[str, Any]:
        """The object as last seen (a deletion record carries its last state)."""
        return self.sightings[-1].obj

    @property
    def deleted_at(self) -> float | None:
        """When the object was seen deleted (observation time), else None."""
        for sighting in self.sightings:
            if sighting.deleted:
                return sighting.at
        return None

    @property
    def was_deleted(self) -> bool:
        return any(s.deleted for s in self.sightings)

    @property
    def first_seen(self) -> float | None:
        times = [s.at for s in self.sightings if s.at is not None]
        return min(times) if times else None

    def objects(self) -> list[Mapping[str, Any]]:
        """Each distinct state seen, oldest first."""
        return [s.obj for s in self.sightings]


class EvidenceSet:
    """Objects by reference, each with its history. Build with ``from_evidence``/``from_objects``."""

    def __init__(self, histories: Iterable[ObjectHistory] = ()) -> None:
        self._by_ref: dict[Ref, ObjectHistory] = {}
        for history in histories:
            self._by_ref[history.ref] = history

    @classmethod
    def from_objects(cls, objects: Iterable[Any]) -> EvidenceSet:
        """A dump: each object seen once, at no known observation time."""
        return cls._build((ref, Sighting(obj)) for ref, obj in _refs(objects))

    @classmethod
    def from_evidence(cls, records: Iterable[Evidence]) -> EvidenceSet:
        """Recorded evidence; records whose ``data`` is not an object with a name are skipped."""
        pairs: list[tuple[Ref, Sighting]] = []
        ordered = sorted(
            (r for r in records if isinstance(r, Evidence)), key=lambda r: r.observed_at
        )
        for record in ordered:
            ref = ref_of(record.data, record.kind)
            if ref is None:
                continue
            deleted = record.key.endswith(DELETED_SUFFIX)
            pairs.append((ref, Sighting(dict(record.data), record.observed_at, deleted)))
        return cls._build(pairs)

    @classmethod
    def _build(cls, pairs: Iterable[tuple[Ref, Sighting]]) -> EvidenceSet:
        grouped: dict[Ref, list[Sighting]] = {}
        for ref, sighting in pairs:
            grouped.setdefault(ref, []).append(sighting)
        return cls(ObjectHistory(ref, tuple(s)) for ref, s in grouped.items())

    def __len__(self) -> int:
        return len(self._by_ref)

    def histories(self, kind: str | None = None) -> list[ObjectHistory]:
        """Every history, or those of one kind, in a stable order (by name)."""
        items = [h for h in self._by_ref.values() if kind is None or h.ref.kind == kind]
        return sorted(items, key=lambda h: (h.ref.kind, h.ref.namespace, h.ref.name))

    def get(self, kind: str, name: str, namespace: str | None = None) -> ObjectHistory | None:
        for history in self.histories(kind):
            if history.ref.name == name and namespace in (None, history.ref.namespace):
                return history
        return None

    def trainjob_names(self) -> list[str]:
        return [h.ref.name for h in self.histories("TrainJob")]

    @property
    def is_dump(self) -> bool:
        """No sighting has an observation time: a dump, not a record of watching."""
        return all(s.at is None for h in self._by_ref.values() for s in h.sightings)


def event_subject(event: Any) -> tuple[str, str] | None:
    """(kind, name) of what an Event (``core/v1`` or ``events.k8s.io/v1``) is about."""
    subject = dig(event, "involvedObject")
    if not isinstance(subject, Mapping):
        subject = dig(event, "regarding")
    kind, name = dig(subject, "kind"), dig(subject, "name")
    if isinstance(kind, str) and isinstance(name, str) and kind and name:
        return kind, name
    return None


def _refs(objects: Iterable[Any]) -> Iterable[tuple[Ref, Mapping[str, Any]]]:
    for obj in objects:
        if isinstance(obj, Mapping):
            ref = ref_of(obj)
            if ref is not None:
                yield ref, obj


def object_evidence(
    obj: Mapping[str, Any], observed_at: float, *, deleted: bool = False
) -> Evidence:
    """The record of one sighting of ``obj``, as ``EvidenceSet.from_evidence`` reads it back.

    The key names the object and its resourceVersion, so the same state seen twice is one
    record; a deletion gets its own key (``DELETED_SUFFIX``).
    """
    ref = ref_of(obj)
    kind = ref.kind if ref else object_kind(obj) or "object"
    where = f"{ref.namespace}/{ref.name}" if ref else "?"
    version = text_of(dig(obj, "metadata", "resourceVersion")) or "?"
    key = f"{kind}/{where}@{version}" + (DELETED_SUFFIX if deleted else "")
    summary = f"{kind} {ref.name if ref else '?'} {'deleted' if deleted else 'seen'}"
    return Evidence(kind=kind.lower(), key=key, observed_at=observed_at, summary=summary, data=obj)

"""The last state of each object the evidence streams showed, kept only while it may matter.

A stream needs, per object it listed or watched, its resourceVersion (a list again files only
what changed) and, for the objects of attempts still followed, the last state itself (a list
after a 410 files the objects it no longer has as deleted, with that state). Guarantees:

* ``share(new, old)``: successive states of one object differ in a few fields; every part of
  ``new`` equal to the same part of ``old`` is ``old``'s, so the states kept (the capture's
  records, this table) hold each unchanged part once. Filed objects are never changed
  afterwards (the cause function only reads them), which makes the sharing safe.
* **An object's first state shares with its neighbour** (``LastStates.like``): a state with
  no state of its own before it is shared, the same way, with the last state kept in its
  stream. Objects of one kind made from one template (the pods, Jobs and JobSets of jobs
  submitted alike) hold their equal parts (a container's resources, a volume, an
  environment variable) once for them all.
* Every other part is compacted (``compact``): its keys, and its strings of up to
  ``INTERN_UP_TO`` characters, are interned (``sys.intern``). Each decoded object brings its
  own copy of every key and label (``"metadata"``, ``"jobset.sigs.k8s.io/jobset-name"``,
  ``"True"``...), about 40 % of what an open attempt's records held; interned, all objects
  share one copy, freed when no object uses it any more.
* **Who wrote an object, not what each writer owns** (``trim``): of each
  ``metadata.managedFields`` entry only the writer, the operation, the API version, the time
  and the subresource are kept; ``fieldsV1`` (a tree of every field that writer set, as big
  as the object itself, on every object a real API server stores) is dropped, as client-go's
  and controller-runtime's caches drop managedFields whole (``TransformStripManagedFields``).
  The cause function never reads it; a post-mortem still sees who wrote the object, and when.
* ``LastStates.keep`` keeps the state of an object while a TrainJob it is evidence for is not
  released, or while no TrainJob claims it yet; otherwise only its version.
* ``LastStates.release(ref)``: the states kept for TrainJob ``ref`` alone are dropped (their
  versions stay); memory for an ended attempt does not stay with the streams.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from typing import Any

from dispatch import jsontext
from dispatch.adapters.kubeflow.live.attribution import TrainJobRef
from dispatch.adapters.kubeflow.objects import dig, text_of

#: one entry: (resourceVersion, the last state or None, the TrainJobs it is evidence for)
Entry = tuple[str, Mapping[str, Any] | None, tuple[TrainJobRef, ...]]


#: strings up to this length are interned by ``compact`` (names, labels, states, reasons);
#: longer ones (messages, JSON in annotations) are seldom repeated
INTERN_UP_TO = 64


def compact(value: Any) -> Any:
    """``value`` (decoded JSON) rebuilt with its keys and short strings interned: equal to
    ``value``, sharing every key and short string with the other objects kept."""
    if isinstance(value, dict):
        return {sys.intern(key): compact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [compact(item) for item in value]
    if type(value) is str and len(value) <= INTERN_UP_TO:
        return sys.intern(value)
    return value


#: what is kept of each ``metadata.managedFields`` entry (``trim``)
MANAGED_FIELDS_KEPT = ("manager", "operation", "apiVersion", "time", "subresource")
_KEPT = frozenset(MANAGED_FIELDS_KEPT)


def trim(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (decoded JSON) without what each of its writers owns: every entry of its
    ``metadata.managedFields`` with ``MANAGED_FIELDS_KEPT`` alone (see the module).
    ``obj`` itself is not changed; it is returned as it is when there is nothing to drop."""
    metadata = obj.get("metadata")
    managed = metadata.get("managedFields") if isinstance(metadata, dict) else None
    if not isinstance(metadata, dict) or not isinstance(managed, list):
        return obj
    if all(not isinstance(e, dict) or e.keys() <= _KEPT for e in managed):
        return obj
    entries = [
        {k: e[k] for k in MANAGED_FIELDS_KEPT if k in e} if isinstance(e, dict) else e
        for e in managed
    ]
    return {**obj, "metadata": {**metadata, "managedFields": entries}}


def share(new: Any, old: Any) -> Any:
    """``new`` (decoded JSON) as it is kept: each part equal to the same part of ``old`` (a
    state kept before, or None) is ``old``'s (``old`` itself when all is equal), every other
    part is compacted (``compact``). ``new`` itself is not changed. An unchanged part (most
    of a new state: its spec above all) is found by comparing it whole, not walked: equal,
    and written as the same JSON text (Python's ``==`` takes ``1``, ``1.0`` and ``true`` for
    one another; JSON does not)."""
    if (
        type(new) is type(old)
        and new == old
        and (not isinstance(new, dict | list) or jsontext.same(new, old))
    ):
        return old
    if isinstance(new, dict) and isinstance(old, dict):
        kept: dict[str, Any] = {}
        same = len(new) == len(old)
        for key, value in new.items():
            if key in old:
                part = share(value, old[key])
                same = same and part is old[key]
            else:
                part, same = compact(value), False
            kept[sys.intern(key)] = part
        return old if same else kept
    if isinstance(new, list) and isinstance(old, list):
        items = [share(v, old[i]) if i < len(old) else compact(v) for i, v in enumerate(new)]
        if len(items) == len(old) and all(a is b for a, b in zip(items, old, strict=True)):
            return old
        return items
    return compact(new)


def version_of(obj: Mapping[str, Any] | None) -> str:
    return text_of(dig(obj, "metadata", "resourceVersion"))


class LastStates:
    """Per stream and object key: the entry of the last state seen (see the module docstring)."""

    def __init__(self) -> None:
        self._tables: dict[Hashable, dict[str, Entry]] = {}
        self._kept_for: dict[TrainJobRef, set[tuple[Hashable, str]]] = {}
        self._released: set[TrainJobRef] = set()
        self._like: dict[Hashable, Mapping[str, Any]] = {}  # per stream: the last state kept

    def keys(self, stream: Hashable) -> set[str]:
        return set(self._tables.get(stream, ()))

    def size(self, stream: Hashable) -> int:
        return len(self._tables.get(stream, ()))

    def keys_of(
        self, stream: Hashable, refs: set[TrainJobRef], label: str, values: set[str]
    ) -> set[str]:
        """The keys of ``stream`` kept for one of ``refs`` (not released), or whose last state
        kept has ``label`` set to one of ``values``."""
        table = self._tables.get(stream, {})
        found = {key for ref in refs for s, key in self._kept_for.get(ref, ()) if s == stream}
        for key, (_, state, _) in table.items():
            labels = dig(state, "metadata", "labels")
            if isinstance(labels, Mapping) and labels.get(label) in values:
                found.add(key)
        return found & table.keys()

    def like(self, stream: Hashable) -> Mapping[str, Any] | None:
        """The last state kept in ``stream`` (of any object): what the first state of an
        object new to the stream shares its equal parts with (see the module)."""
        return self._like.get(stream)

    def version(self, stream: Hashable, key: str) -> str | None:
        entry = self._tables.get(stream, {}).get(key)
        return entry[0] if entry is not None else None

    def state(self, stream: Hashable, key: str) -> Mapping[str, Any] | None:
        entry = self._tables.get(stream, {}).get(key)
        return entry[1] if entry is not None else None

    def keep(
        self,
        stream: Hashable,
        key: str,
        state: Mapping[str, Any],
        refs: list[TrainJobRef],
    ) -> None:
        held = [ref for ref in refs if ref not in self._released]
        kept = state if held or not refs else None
        self._tables.setdefault(stream, {})[key] = (version_of(state), kept, tuple(refs))
        if kept is not None:
            self._like[stream] = kept
        for ref in held:
            self._kept_for.setdefault(ref, set()).add((stream, key))

    def claim(self, stream: Hashable, key: str, ref: TrainJobRef) -> None:
        """The object ``key``, kept while no TrainJob claimed it, is evidence for ``ref``."""
        table = self._tables.get(stream, {})
        entry = table.get(key)
        if entry is None or ref in entry[2]:
            return
        table[key] = (entry[0], entry[1], (*entry[2], ref))
        if entry[1] is not None and ref not in self._released:
            self._kept_for.setdefault(ref, set()).add((stream, key))

    def drop(self, stream: Hashable, key: str) -> None:
        self._tables.get(stream, {}).pop(key, None)

    def release(self, ref: TrainJobRef) -> None:
        """Keep no state for ``ref`` any more (states another followed TrainJob needs stay)."""
        self._released.add(ref)
        for stream, key in self._kept_for.pop(ref, ()):
            table = self._tables.get(stream, {})
            entry = table.get(key)
            if entry is None or entry[1] is None:
                continue
            if all(other in self._released for other in entry[2]):
                table[key] = (entry[0], None, entry[2])

"""The last state of each object the evidence streams showed, kept only while it may matter.

A stream needs, per object it listed or watched, its resourceVersion (a list again files only
what changed) and, for the objects of attempts still followed, the last state itself (a list
after a 410 files the objects it no longer has as deleted, with that state). Guarantees:

* ``share(new, old)``: successive states of one object differ in a few fields; every part of
  ``new`` equal to the same part of ``old`` is replaced by ``old``'s, so the states kept (the
  capture's records, this table) hold each unchanged part once. Filed objects are never
  changed afterwards (the cause function only reads them), which makes the sharing safe.
* ``LastStates.keep`` keeps the state of an object while a TrainJob it is evidence for is not
  released, or while no TrainJob claims it yet; otherwise only its version.
* ``LastStates.release(ref)``: the states kept for TrainJob ``ref`` alone are dropped (their
  versions stay); memory for an ended attempt does not stay with the streams.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from dispatch.adapters.kubeflow.attribution import TrainJobRef
from dispatch.adapters.kubeflow.causes_evidence import text_of
from dispatch.adapters.kubeflow.shape import dig

#: one entry: (resourceVersion, the last state or None, the TrainJobs it is evidence for)
Entry = tuple[str, Mapping[str, Any] | None, tuple[TrainJobRef, ...]]


def share(new: Any, old: Any) -> Any:
    """``new`` with each part equal to the same part of ``old`` replaced by ``old``'s (``old``
    itself when all is equal). ``new`` is changed in place: pass a freshly decoded object."""
    if isinstance(new, dict) and isinstance(old, dict):
        same = len(new) == len(old)
        for key, value in new.items():
            if key not in old:
                same = False
                continue
            shared = share(value, old[key])
            if shared is not value:
                new[key] = shared
            same = same and shared is old[key]
        return old if same else new
    if isinstance(new, list) and isinstance(old, list):
        same = len(new) == len(old)
        for i, value in enumerate(new):
            if i >= len(old):
                same = False
                continue
            new[i] = shared = share(value, old[i])
            same = same and shared is old[i]
        return old if same else new
    if type(new) is type(old) and new == old:
        return old
    return new


def version_of(obj: Mapping[str, Any] | None) -> str:
    return text_of(dig(obj, "metadata", "resourceVersion"))


class LastStates:
    """Per stream and object key: the entry of the last state seen (see the module docstring)."""

    def __init__(self) -> None:
        self._tables: dict[Hashable, dict[str, Entry]] = {}
        self._kept_for: dict[TrainJobRef, set[tuple[Hashable, str]]] = {}
        self._released: set[TrainJobRef] = set()

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

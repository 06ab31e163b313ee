"""A structural diff of two JSON values that names every changed path (pure, bounded work).

The guard judges an update by *where* it changes an object: Kueue may write ``spec.suspend``
and its own entry of ``spec.runtimePatches``, nobody else may write anything in the spec. So
the diff yields one ``Change`` per changed leaf, with its path, lazily (the caller stops at
the first change it refuses, or after the few it shows).

* Mappings are compared key by key; a key present on one side only is compared against an
  empty container of the other side's type, so an added sub-object names its leaves
  (``spec.runtimePatches[manager=x].time``), not just its root.
* Lists are compared index by index, except lists Kubernetes keys by a field
  (``listType=map``; ``KEYED``: ``runtimePatches`` by ``manager``), compared by that key
  when every item is a mapping with a distinct string key (otherwise by index).
* Leaves are scalars, empty containers and values whose types differ. Scalars are equal only
  when their types are (JSON ``true`` is not ``1``).
* Beyond ``MAX_DEPTH`` levels a sub-tree is one leaf, changed unless equal: the work is
  bounded by the size of the input, never by its nesting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ABSENT", "KEYED", "MAX_DEPTH", "Change", "Keyed", "changes", "render_path", "same"]

#: lists compared by a key field, by the name of the field holding them
KEYED: Mapping[str, str] = {"runtimePatches": "manager"}
#: levels below which a sub-tree is compared whole
MAX_DEPTH = 64


class _Absent:
    """The value of a key that is not there (distinct from JSON null)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


@dataclass(frozen=True, slots=True)
class Keyed:
    """A path step into a keyed list: the item whose ``field`` is ``value``."""

    field: str
    value: str


PathPart = str | int | Keyed


@dataclass(frozen=True, slots=True)
class Change:
    """One changed leaf: where, and its old and new values (``ABSENT`` when not there)."""

    path: tuple[PathPart, ...]
    old: Any
    new: Any


def changes(old: Any, new: Any, path: tuple[PathPart, ...] = ()) -> Iterator[Change]:
    """Every changed leaf between ``old`` and ``new``, in key order, lazily."""
    yield from _diff(old, new, path, None)


def _diff(old: Any, new: Any, path: tuple[PathPart, ...], key: str | None) -> Iterator[Change]:
    if len(path) >= MAX_DEPTH:
        if not same(old, new):
            yield Change(path, old, new)
        return
    if isinstance(old, Mapping) or isinstance(new, Mapping):
        yield from _diff_mappings(old, new, path)
    elif isinstance(old, list) or isinstance(new, list):
        yield from _diff_lists(old, new, path, key)
    elif not _equal_scalars(old, new):
        yield Change(path, old, new)


def _diff_mappings(old: Any, new: Any, path: tuple[PathPart, ...]) -> Iterator[Change]:
    if not _container_pair(old, new, Mapping):
        yield Change(path, old, new)
        return
    old_map: Mapping[Any, Any] = {} if old is ABSENT else old
    new_map: Mapping[Any, Any] = {} if new is ABSENT else new
    if not old_map and not new_map:  # an empty mapping added or removed
        if old is ABSENT or new is ABSENT:
            yield Change(path, old, new)
        return
    for name in sorted(set(old_map) | set(new_map), key=str):
        step = name if isinstance(name, str) else str(name)
        yield from _diff(old_map.get(name, ABSENT), new_map.get(name, ABSENT), (*path, step), step)


def _diff_lists(
    old: Any, new: Any, path: tuple[PathPart, ...], key: str | None
) -> Iterator[Change]:
    if not _container_pair(old, new, list):
        yield Change(path, old, new)
        return
    old_list: list[Any] = [] if old is ABSENT else old
    new_list: list[Any] = [] if new is ABSENT else new
    if not old_list and not new_list:
        if old is ABSENT or new is ABSENT:
            yield Change(path, old, new)
        return
    field = KEYED.get(key or "")
    old_keyed = _by_key(old_list, field)
    new_keyed = _by_key(new_list, field)
    if field is not None and old_keyed is not None and new_keyed is not None:
        for value in sorted(set(old_keyed) | set(new_keyed)):
            yield from _diff(
                old_keyed.get(value, ABSENT),
                new_keyed.get(value, ABSENT),
                (*path, Keyed(field, value)),
                None,
            )
        return
    for index in range(max(len(old_list), len(new_list))):
        yield from _diff(
            old_list[index] if index < len(old_list) else ABSENT,
            new_list[index] if index < len(new_list) else ABSENT,
            (*path, index),
            None,
        )


def _container_pair(old: Any, new: Any, kind: type) -> bool:
    """Both sides are containers of ``kind``, or one is and the other is absent."""
    return (old is ABSENT or isinstance(old, kind)) and (new is ABSENT or isinstance(new, kind))


def _by_key(items: list[Any], field: str | None) -> dict[str, Any] | None:
    """The items by their ``field``, or None when they cannot be keyed by it."""
    if field is None:
        return None
    keyed: dict[str, Any] = {}
    for item in items:
        value = item.get(field) if isinstance(item, Mapping) else None
        if not isinstance(value, str) or value in keyed:
            return None
        keyed[value] = item
    return keyed


def _equal_scalars(old: Any, new: Any) -> bool:
    return type(old) is type(new) and bool(old == new)


def same(old: Any, new: Any) -> bool:
    """Strict equality of two values (types too); too deep to compare means different."""
    try:
        return type(old) is type(new) and bool(old == new)
    except RecursionError:
        return False


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,100}$")
#: characters of one key a rendered path shows
_KEY_LIMIT = 80


def render_path(path: tuple[PathPart, ...]) -> str:
    """``spec.runtimePatches[manager=x].trainingRuntimeSpec``, ``metadata.labels["a/b"]``,
    ``spec.replicatedJobs[0]``; bounded: long keys are cut."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif isinstance(part, Keyed):
            text += f"[{part.field}={_cut(part.value)}]"
        elif _PLAIN.match(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(_cut(part))}]"
    return text


def _cut(text: str) -> str:
    return text if len(text) <= _KEY_LIMIT else text[: _KEY_LIMIT - 3] + "..."

"""Reading raw Kubernetes objects (dicts, as the API, a dump or a YAML file gives them), safely.

The shape helpers every part of the adapter reads objects with: fields (``dig``), text and
numbers, labels, conditions, times, and the strategic merge Trainer applies to runtime patches.
Nothing here raises on a malformed object: a missing or wrongly typed field reads as absent
(``dig`` returns None), a timestamp that does not parse reads as absent, and the places that
matter say what they found instead. Typed models are not used on purpose: they drop unknown
fields and reject shapes that must be described rather than crashed on.

Time: Kubernetes timestamps (RFC 3339, seconds or microseconds) are read as float seconds
since the epoch by ``parse_time``.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

_SHOW = reprlib.Repr()
_SHOW.maxlevel = 3
_SHOW.maxstring = 60
_SHOW.maxother = 60
_SHOW.maxdict = 4
_SHOW.maxlist = 4


def show(value: Any) -> str:
    """A short, safe repr for messages (bounded in depth and length, never raises)."""
    try:
        return _SHOW.repr(value)
    except (RecursionError, ValueError, TypeError):
        return f"<{type(value).__name__}>"


def dig(value: Any, *keys: str) -> Any:
    """``value[k1][k2]…`` through mappings, or None when any step is missing or not a mapping.

    A plain ``dict`` (what JSON gives) is known by its exact type first: the ``isinstance``
    against the ``Mapping`` ABC made a two-key dig about three times slower (684 against 243
    ns, bench/README.md), and the supervisor digs through every state its streams deliver."""
    for key in keys:
        if type(value) is not dict and not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def as_list(value: Any) -> list[Any] | None:
    """The value as a list when it is a sequence (not a string), else None (a plain ``list``
    known by its exact type first, as in ``dig``)."""
    if type(value) is list or (isinstance(value, Sequence) and not isinstance(value, str | bytes)):
        return list(value)
    return None


def is_int(value: Any) -> bool:
    """True for a whole number as YAML/JSON gives it (a bool is not a number here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def names_of(items: Any) -> list[str]:
    """The ``name`` of each mapping in a list (containers, init containers), skipping others."""
    return [
        item["name"]
        for item in as_list(items) or []
        if isinstance(item, Mapping) and isinstance(item.get("name"), str)
    ]


def parse_time(value: Any) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch; None when absent or unreadable.

    A ``datetime`` (what a YAML loader makes of an unquoted timestamp) is accepted too.
    """
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            return moment.timestamp()
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def format_time(at: float | None) -> str | None:
    """Seconds since the epoch as RFC 3339 UTC (what Kubernetes writes), None for None."""
    if at is None:
        return None
    try:
        return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


def text_of(value: Any) -> str:
    """A string field, or "" when absent or not a string."""
    return value if isinstance(value, str) else ""


# --- labels, numbers, conditions ---------------------------------------------------------


def conditions(obj: Any) -> Iterator[Mapping[str, Any]]:
    """``status.conditions`` entries that are mappings."""
    for item in as_list(dig(obj, "status", "conditions")) or []:
        if isinstance(item, Mapping):
            yield item


def condition(obj: Any, kind: str) -> Mapping[str, Any] | None:
    """The condition of type ``kind``, or None."""
    for item in conditions(obj):
        if item.get("type") == kind:
            return item
    return None


def true_condition(obj: Any, kind: str) -> Mapping[str, Any] | None:
    """The first condition of type ``kind`` whose status is ``True``, or None."""
    for item in conditions(obj):
        if item.get("type") == kind and is_true(item):
            return item
    return None


def is_true(cond: Mapping[str, Any] | None) -> bool:
    return cond is not None and cond.get("status") == "True"


def when(cond: Any, *keys: str) -> float | None:
    """The first of ``keys`` (default ``lastTransitionTime``) that holds a readable time."""
    for key in keys or ("lastTransitionTime",):
        at = parse_time(dig(cond, key))
        if at is not None:
            return at
    return None


def labels_of(obj: Any) -> Mapping[str, Any]:
    labels = dig(obj, "metadata", "labels")
    return labels if isinstance(labels, Mapping) else {}


def annotations_of(obj: Any) -> Mapping[str, Any]:
    annotations = dig(obj, "metadata", "annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def as_int(value: Any) -> int | None:
    """An int, or a string of digits, as int; None otherwise."""
    if is_int(value):
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def created(obj: Any) -> float | None:
    return parse_time(dig(obj, "metadata", "creationTimestamp"))


def latest_condition_time(obj: Any) -> float | None:
    times = [t for t in (when(c) for c in conditions(obj)) if t is not None]
    return max(times) if times else None


# --- strategic merge -----------------------------------------------------------------------

#: the merge key of each list field that Kubernetes' Go types tag ``patchStrategy: merge``
#: (``patchMergeKey``), by field name; every other list is replaced by the patch's (lists of
#: strings tagged ``merge``, such as ``finalizers``, are replaced too: a known difference)
MERGE_KEYS = {
    "replicatedJobs": "name",
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
}


def clone(value: Any) -> Any:
    """A deep copy of a JSON value (faster than ``copy.deepcopy`` for plain JSON)."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def without_nulls(value: Any) -> Any:
    """``value`` with every ``null`` field dropped, at any depth (a new value).

    What the API server stores of a custom resource whose structural schema marks no field
    ``nullable`` (Trainer's CRDs: a null is pruned before defaulting, it never reaches the
    controller), and what a Go controller sees after reading a JSON ``null`` into its types.
    Nulls inside lists stay (the API server rejects them)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def strategic_merge(
    base: Any, patch: Any, field: str | None = None, *, keys: Mapping[str, str] = MERGE_KEYS
) -> Any:
    """``patch`` merged onto ``base`` as a Kubernetes strategic merge patch; a new value, the
    inputs are not changed.

    Maps merge and ``null`` deletes a key; a list under a field of ``MERGE_KEYS`` merges item
    by item on its key, ordered as apimachinery orders it (``_merged_list``: items the patch
    adds come before the original's later items; ``{"$patch": "delete", <key>: ...}``
    removes its match); ``{"$patch": "replace", ...}`` replaces a map whole; every other list
    and every scalar is replaced. Other ``$`` directives are dropped. ``keys`` is the merge-key
    table of the object's type (a Service's ``ports`` merge by ``port``).
    """
    return _merged(clone(base), patch, field, keys)


def _merged(own: Any, patch: Any, field: str | None, keys: Mapping[str, str]) -> Any:
    """``strategic_merge`` onto ``own``, a copy this call may change."""
    if isinstance(patch, dict):
        if patch.get("$patch") == "replace":
            return {k: clone(v) for k, v in patch.items() if k != "$patch"}
        out = own if isinstance(own, dict) else {}
        for key, value in patch.items():
            if key.startswith("$"):
                continue
            if value is None:
                out.pop(key, None)
            else:
                out[key] = _merged(out.get(key), value, key, keys)
        return out
    if not isinstance(patch, list):
        return clone(patch)
    merge_key = keys.get(field or "")
    if not merge_key or not isinstance(own, list):
        return [clone(v) for v in patch if not (isinstance(v, dict) and "$patch" in v)]
    return _merged_list(own, patch, merge_key, keys)


def _merged_list(own: list[Any], patch: list[Any], key: str, keys: Mapping[str, str]) -> list[Any]:
    """A list merged on ``key`` as apimachinery's ``mergeSlice`` does: ``$patch: delete``
    items remove their match, ``$patch: replace`` makes the patch the list; matching items
    merge; then the order: the patch's items in the patch's order, the others in their own,
    interleaved by their places in the original (``normalizeElementOrder``), so items the
    patch adds come before the original's items that follow them. Linear in the lists'
    lengths (items are found by their key, not searched for)."""
    special = [i for i in patch if isinstance(i, dict) and "$patch" in i]
    items = [i for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if any(i.get("$patch") == "replace" for i in special):
        return [clone(i) for i in items]
    deleted = {_key(i, key) for i in special if i.get("$patch") == "delete"}
    original = [o for o in own if not (isinstance(o, dict) and _key(o, key) in deleted)]
    order: dict[Any, int] = {}
    for index, old in enumerate(original):
        if isinstance(old, dict):
            order.setdefault(_key(old, key), index)
    merged = list(original)
    at_key = dict(order)  # where the first item of each key is in ``merged``
    for item in items:
        if not isinstance(item, dict):
            merged.append(clone(item))
            continue
        at = at_key.get(_key(item, key))
        if at is None:
            at_key[_key(item, key)] = len(merged)
            merged.append(_merged({}, item, None, keys))
        else:
            merged[at] = _merged(merged[at], item, None, keys)
    in_patch: dict[Any, int] = {}
    for index, item in enumerate(i for i in items if isinstance(i, dict)):
        in_patch.setdefault(_key(item, key), index)
    patched = sorted(
        (m for m in merged if isinstance(m, dict) and _key(m, key) in in_patch),
        key=lambda m: in_patch[_key(m, key)],
    )
    server_only = [m for m in merged if not (isinstance(m, dict) and _key(m, key) in in_patch)]
    return _interleave(server_only, patched, order, key)


def _key(item: Mapping[str, Any], key: str) -> Any:
    """An item's merge-key value as a dictionary key (one that cannot be, in a malformed
    object, by its text)."""
    value = item.get(key)
    return value if isinstance(value, str | int | float | bool | None) else repr(value)


def _interleave(left: list[Any], right: list[Any], order: Mapping[Any, int], key: str) -> list[Any]:
    """apimachinery's ``mergeSortedSlice``: ``left`` (server-only) and ``right`` (patched)
    keep their own orders; a left item goes first only when both are in the original and it
    came earlier there."""

    def place(item: Any) -> int:
        return order.get(_key(item, key), -1) if isinstance(item, dict) else -1

    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if j >= len(right):
            out.append(left[i])
            i += 1
        elif i >= len(left):
            out.append(right[j])
            j += 1
        else:
            li, ri = place(left[i]), place(right[j])
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out

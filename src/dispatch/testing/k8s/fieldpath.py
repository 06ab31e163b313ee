"""Field paths and the walks over objects that field ownership needs, as
``sigs.k8s.io/structured-merge-diff`` (``fieldpath``, ``typed``) does them without schemas.

A path is a tuple of ``FieldsV1`` elements: ``f:<field>``, ``k:<json of the key fields>`` (an
item of an associative list), ``v:<json value>`` (an item of a set). :func:`field_set` is what
an applied configuration sets, :func:`compare` what changed between two objects,
:func:`merge` a configuration merged onto an object, :func:`remove` the pruning of fields.

Fidelity limits (the emulator has no OpenAPI schemas): lists are atomic except the
associative lists the Kubernetes and JobSet Go types declare (``ASSOCIATIVE``; the key of
``ports`` is ``containerPort`` or ``port`` with ``protocol``, defaulted to ``TCP``) and the set
``finalizers``; a non-empty object is never itself a member of an applied set (as a struct
field), so the entries of a map of objects carry no ``"."``; list nodes are never members.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.adapters.kubeflow.objects import clone

JsonObj = dict[str, Any]
Path = tuple[str, ...]
FieldSet = set[Path]

#: list field -> the key fields of its items (``+listType=map`` / ``+listMapKey`` of the Go
#: types of k8s.io/api and of JobSet; the same lists where a CRD embeds those types)
ASSOCIATIVE: Mapping[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "schedulingGates": ("name",),
    "resourceClaims": ("name",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "replicatedJobs": ("name",),
    "replicatedJobsStatus": ("name",),
}
#: lists whose items are unique scalars (``+listType=set``)
SETS = frozenset({"finalizers"})
#: metadata the server sets itself, left out of comparisons
_SYSTEM = frozenset(
    {"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp", "selfLink"}
)
_MISSING: Any = object()


# ------------------------------------------------------------------------- paths


def _list_keys(name: str, items: Iterable[Any]) -> tuple[str, ...] | None:
    """The key fields of list ``name`` when it is associative and every item has them."""
    items = list(items)
    if name == "ports":
        first = next((i for i in items if isinstance(i, dict)), {})
        keys: tuple[str, ...] = (
            ("containerPort", "protocol") if "containerPort" in first else ("port", "protocol")
        )
    else:
        found = ASSOCIATIVE.get(name)
        if found is None:
            return None
        keys = found
    for item in items:
        if not isinstance(item, dict):
            return None
        if any(k not in item for k in keys if k != "protocol"):
            return None
    return keys


def _key_element(keys: tuple[str, ...], item: JsonObj) -> str:
    values = {k: item.get(k, "TCP" if k == "protocol" else None) for k in sorted(keys)}
    return "k:" + json.dumps(values, separators=(",", ":"))


def _value_element(item: Any) -> str:
    return "v:" + json.dumps(item, separators=(",", ":"))


def _is_set(name: str, items: list[Any]) -> bool:
    return name in SETS and all(not isinstance(i, dict | list) for i in items)


def path_text(path: Path) -> str:
    """A path as structured-merge-diff prints it: ``.spec.containers[name="c"].image``."""
    out = ""
    for element in path:
        kind, text = element[0], element[2:]
        if kind == "f":
            out += "." + text
        elif kind == "k":
            key = json.loads(text)
            out += "[" + ",".join(f"{k}={_go_value(v)}" for k, v in key.items()) + "]"
        else:
            out += f"[={_go_value(json.loads(text))}]"
    return out


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


# ------------------------------------------------------------------------- FieldsV1


def to_fields_v1(paths: Iterable[Path]) -> JsonObj:
    """The ``fieldsV1`` tree: a member with children carries ``"."``, children sorted."""
    tree: JsonObj = {}
    members: set[Path] = set()
    for path in paths:
        node = tree
        for element in path:
            node = node.setdefault(element, {})
        members.add(path)
    return _sorted_tree(tree, (), members)


def _sorted_tree(node: JsonObj, path: Path, members: set[Path]) -> JsonObj:
    out: JsonObj = {}
    if node and path in members:
        out["."] = {}
    for element in sorted(node):
        out[element] = _sorted_tree(node[element], (*path, element), members)
    return out


def from_fields_v1(tree: Any, prefix: Path = ()) -> FieldSet:
    """The paths of a ``fieldsV1`` tree (a node with ``"."`` or no children is a member)."""
    out: FieldSet = set()
    if not isinstance(tree, dict):
        return out
    for element, child in tree.items():
        if element == ".":
            continue
        path = (*prefix, element)
        if not isinstance(child, dict) or not child or "." in child:
            out.add(path)
        out |= from_fields_v1(child, path)
    return out


# ------------------------------------------------------------------------- walks


def field_set(config: JsonObj) -> FieldSet:
    """The fields an applied configuration sets (``TypedValue.ToFieldSet``)."""
    out: FieldSet = set()
    _set_of_map(config, (), out)
    return out


def _set_of_map(obj: JsonObj, path: Path, out: FieldSet) -> None:
    for name, value in obj.items():
        _set_of_value(value, (*path, f"f:{name}"), name, out)


def _set_of_value(value: Any, path: Path, name: str, out: FieldSet) -> None:
    if isinstance(value, dict):
        if value:
            _set_of_map(value, path, out)
        else:
            out.add(path)
        return
    if isinstance(value, list):
        keys = _list_keys(name, value)
        if keys is not None and value:
            for item in value:
                item_path = (*path, _key_element(keys, item))
                out.add(item_path)
                _set_of_map(item, item_path, out)
        elif _is_set(name, value) and value:
            out.update((*path, _value_element(item)) for item in value)
        elif keys is None and not _is_set(name, value):
            out.add(path)
        return
    out.add(path)


@dataclass
class Comparison:
    """What changed between two objects (``typed.Comparison``)."""

    added: FieldSet = field(default_factory=set)
    modified: FieldSet = field(default_factory=set)
    removed: FieldSet = field(default_factory=set)

    def changed(self) -> FieldSet:
        return self.added | self.modified


def compare(old: JsonObj, new: JsonObj) -> Comparison:
    """Leaves added, modified or removed, and object or list-item nodes added or removed."""
    out = Comparison()
    _compare(_comparable(old), _comparable(new), (), "", out)
    return out


def _comparable(obj: JsonObj) -> JsonObj:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k not in _SYSTEM}}


def _leaf(lhs: Any, rhs: Any, path: Path, out: Comparison) -> None:
    if lhs is _MISSING:
        out.added.add(path)
    elif rhs is _MISSING:
        out.removed.add(path)
    elif lhs != rhs:
        out.modified.add(path)


def _node(lhs: Any, rhs: Any, path: Path, out: Comparison) -> None:
    if lhs is _MISSING:
        out.added.add(path)
    elif rhs is _MISSING:
        out.removed.add(path)


def _compare(lhs: Any, rhs: Any, path: Path, name: str, out: Comparison) -> None:
    present = [v for v in (lhs, rhs) if v is not _MISSING]
    if all(isinstance(v, dict) for v in present):
        left = lhs if lhs is not _MISSING else {}
        right = rhs if rhs is not _MISSING else {}
        if not left and not right:
            _leaf(lhs, rhs, path, out)
            return
        for key in {**left, **right}:
            _compare(
                left.get(key, _MISSING), right.get(key, _MISSING), (*path, f"f:{key}"), key, out
            )
        if path:
            _node(lhs, rhs, path, out)
        return
    if all(isinstance(v, list) for v in present):
        left_items = lhs if lhs is not _MISSING else []
        right_items = rhs if rhs is not _MISSING else []
        both = left_items + right_items
        keys = _list_keys(name, both)
        if keys is not None and both:
            left_by = {_key_element(keys, i): i for i in left_items}
            right_by = {_key_element(keys, i): i for i in right_items}
            for element in {**left_by, **right_by}:
                item_path = (*path, element)
                a, b = left_by.get(element, _MISSING), right_by.get(element, _MISSING)
                for key in {**(a if a is not _MISSING else {}), **(b if b is not _MISSING else {})}:
                    _compare(
                        a.get(key, _MISSING) if a is not _MISSING else _MISSING,
                        b.get(key, _MISSING) if b is not _MISSING else _MISSING,
                        (*item_path, f"f:{key}"),
                        key,
                        out,
                    )
                _node(a, b, item_path, out)
            return
        if _is_set(name, both) and both:
            left_set = {_value_element(i) for i in left_items}
            right_set = {_value_element(i) for i in right_items}
            out.added |= {(*path, e) for e in right_set - left_set}
            out.removed |= {(*path, e) for e in left_set - right_set}
            return
    _leaf(lhs, rhs, path, out)


def merge(live: Any, config: Any, name: str = "") -> Any:
    """``config`` merged onto ``live`` (``TypedValue.Merge``): objects field by field,
    associative lists item by item on their keys (live order, new items after), sets as a
    union, everything else replaced; a ``null`` in the configuration removes the field."""
    if isinstance(live, dict) and isinstance(config, dict):
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge(live.get(key, _MISSING), value, key)
        return out
    if isinstance(live, list) and isinstance(config, list):
        keys = _list_keys(name, live + config)
        if keys is not None:
            merged = {_key_element(keys, i): i for i in live}
            for item in config:
                element = _key_element(keys, item)
                merged[element] = merge(merged.get(element, _MISSING), item)
            return list(merged.values())
        if _is_set(name, live + config):
            return live + [i for i in config if i not in live]
    return clone(config) if config is not _MISSING else live


def remove(obj: JsonObj, paths: Iterable[Path], keep: FieldSet) -> JsonObj:
    """``obj`` without ``paths`` and without the objects and lists their removal empties,
    unless a path in ``keep`` lies at or under them (a new value; ``obj`` is unchanged)."""
    out: JsonObj = clone(obj)
    kept_prefixes = {p[:n] for p in keep for n in range(1, len(p) + 1)}
    for path in sorted(paths, key=len, reverse=True):
        if path in kept_prefixes:
            continue
        _remove_path(out, path)
        for n in range(len(path) - 1, 0, -1):
            parent = path[:n]
            container = _find(out, parent)
            if parent in kept_prefixes or container is _MISSING or container:
                break
            _remove_path(out, parent)
    return out


def _find(obj: Any, path: Path) -> Any:
    node = obj
    for element in path:
        node = _child(node, element)
        if node is _MISSING:
            break
    return node


def _child(node: Any, element: str) -> Any:
    kind, text = element[0], element[2:]
    if kind == "f" and isinstance(node, dict):
        return node.get(text, _MISSING)
    if isinstance(node, list):
        for item in node:
            if _matches(item, kind, text):
                return item
    return _MISSING


def _matches(item: Any, kind: str, text: str) -> bool:
    if kind == "v":
        return bool(item == json.loads(text))
    if kind == "k" and isinstance(item, dict):
        key = json.loads(text)
        return all(item.get(k, "TCP" if k == "protocol" else None) == v for k, v in key.items())
    return False


def _remove_path(obj: JsonObj, path: Path) -> None:
    parent = _find(obj, path[:-1])
    kind, text = path[-1][0], path[-1][2:]
    if kind == "f" and isinstance(parent, dict):
        parent.pop(text, None)
    elif isinstance(parent, list):
        parent[:] = [i for i in parent if not _matches(i, kind, text)]

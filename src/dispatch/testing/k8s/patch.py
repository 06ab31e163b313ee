"""Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch.

Strategic merge patch is the one Trainer's runtime patches use too
(``dispatch.adapters.kubeflow.objects.strategic_merge``): the lists Kubernetes' Go types tag
with a merge key (containers, env, volumes and ports; conditions by ``type``; ownerReferences
by ``uid``) merge item by item, ``$patch: delete`` on an item removes it, ``$patch: replace``
replaces; every other list is replaced, as in merge patch.
All functions return a new document and never modify their inputs. Errors raise ``ApiError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.objects import MERGE_KEYS, clone, strategic_merge
from dispatch.testing.k8s.errors import ApiError, bad_request

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    out = clone(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for part in parts:
        if isinstance(cur, dict):
            if part not in cur:
                raise _missing(parts)
            cur = cur[part]
        elif isinstance(cur, list):
            cur = cur[_index(cur, part, parts, allow_end=False)]
        else:
            raise _missing(parts)
    return cur


def _missing(parts: list[str]) -> ApiError:
    return ApiError(
        422,
        "Invalid",
        f"the server rejected our request due to an error in our request: "
        f"jsonpatch: path not found: /{'/'.join(parts)}",
    )


def _index(lst: list[Any], part: str, parts: list[str], *, allow_end: bool) -> int:
    if allow_end and part == "-":
        return len(lst)
    if not part.isdigit():
        raise _missing(parts)
    n = int(part)
    if n > len(lst) or (n == len(lst) and not allow_end):
        raise _missing(parts)
    return n


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return clone(value)
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = clone(value)
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, parts, allow_end=True), clone(value))
    else:
        raise _missing(parts)
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise bad_request("jsonpatch: cannot remove the whole document")
    parent = _resolve(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _missing(parts)
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, parts, allow_end=False)]
    else:
        raise _missing(parts)
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 operations ``add``, ``remove``, ``replace``, ``move``, ``copy``, ``test``."""
    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    doc = clone(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation: {op!r}")
        parts = _pointer(op["path"])
        kind = op["op"]
        if kind == "add":
            doc = _add(doc, parts, op.get("value"))
        elif kind == "remove":
            doc = _remove(doc, parts)
        elif kind == "replace":
            _resolve(doc, parts)
            doc = (
                _add(_remove(doc, parts), parts, op.get("value"))
                if parts
                else clone(op.get("value"))
            )
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = clone(_resolve(doc, source))
            if kind == "move":
                doc = _remove(doc, source)
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _resolve(doc, parts) != op.get("value"):
                raise ApiError(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an error in our "
                    f"request: testing value {op['path']} failed",
                )
        else:
            raise bad_request(f"unknown json patch operation: {kind!r}")
    return doc


def apply_patch(
    patch_type: str,
    current: Any,
    body: Any,
    *,
    builtin: bool,
    merge_keys: Mapping[str, str] = MERGE_KEYS,
) -> Any:
    """``current`` patched with ``body`` of ``patch_type`` (a Content-Type). Custom resources
    refuse strategic merge patch with 415, as a real server does. ``merge_keys``: the
    strategic merge keys of the object's type."""
    if patch_type == JSON_PATCH:
        return json_patch(current, body)
    if patch_type in (MERGE_PATCH, APPLY_PATCH):
        return merge_patch(current, body)
    accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
    if patch_type == STRATEGIC_MERGE_PATCH and builtin:
        return strategic_merge(current, body, keys=merge_keys)
    if builtin:
        accepted.append(STRATEGIC_MERGE_PATCH)
    raise ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )

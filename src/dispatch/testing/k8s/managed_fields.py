"""Field ownership (``metadata.managedFields``) and server-side apply, as the API server's
field manager (``k8s.io/apimachinery/pkg/util/managedfields/internal``) runs
``sigs.k8s.io/structured-merge-diff`` (``merge/update.go``).

Field sets are sets of :mod:`~dispatch.testing.k8s.fieldpath` paths. Guarantees:

- ``update`` (create, PUT, non-apply patch): the writer's ``Update`` entry gains the fields it
  added or changed; every manager loses the fields that were removed, and the other managers
  lose the ones it changed. An object that has no managed fields gains none on update, only
  on create (as ``skipNonAppliedManager``). A request may replace the entries outright (kubectl
  does, migrating client-side apply), or reset them with ``[]``.
- ``apply``: the configuration is merged onto the live object; the applier owns exactly the
  fields of its configuration; a field it applied before and now omits is removed unless
  another manager owns it; changing a field another manager owns is a 409 ``Conflict`` with
  the exact ``Apply failed with N conflict(s)`` text, unless ``force`` takes it over. An
  object without entries first gets one for ``before-first-apply`` owning what it holds.
- Entries are sorted and written as the API server writes them (``Apply`` before ``Update``,
  then by time, manager, apiVersion, subresource; ``time`` at second precision).

Fidelity limits: those of :mod:`~dispatch.testing.k8s.fieldpath` (no schemas); writes by
the emulator's own controllers (no manager) leave the entries as they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.objects import clone
from dispatch.testing.k8s.errors import ApiError, status_details
from dispatch.testing.k8s.fieldpath import (
    Comparison,
    FieldSet,
    JsonObj,
    Path,
    compare,
    field_set,
    from_fields_v1,
    merge,
    path_text,
    remove,
    to_fields_v1,
)
from dispatch.testing.k8s.meta import parse_rfc3339

APPLY = "Apply"
UPDATE = "Update"
BEFORE_FIRST_APPLY = "before-first-apply"
#: the manager ``kubectl apply --server-side`` uses; it inherits client-side apply's fields
KUBECTL = "kubectl"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

#: fields no manager owns (``stripMetaManager``)
_STRIPPED_META = (
    "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation",
    "managedFields", "resourceVersion",
)  # fmt: skip
_STRIPPED: frozenset[Path] = frozenset(
    {("f:apiVersion",), ("f:kind",), ("f:metadata",)}
    | {("f:metadata", f"f:{name}") for name in _STRIPPED_META}
)


# ------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class Manager:
    """A manager's identity: the same name applying and updating owns two entries."""

    name: str
    operation: str
    api_version: str  # of Update entries; an applier is one manager across versions
    subresource: str = ""


@dataclass
class Owned:
    fields: FieldSet
    api_version: str
    time: str | None


Managed = dict[Manager, Owned]


def decode(entries: Any) -> Managed | None:
    """The ownership in ``metadata.managedFields``, or None when it cannot be read (an entry
    with another operation, no apiVersion, or a fieldsType other than ``FieldsV1``)."""
    if not isinstance(entries, list):
        return None
    out: Managed = {}
    for entry in entries:
        if not isinstance(entry, dict):
            return None
        operation, version = entry.get("operation"), entry.get("apiVersion")
        if operation not in (APPLY, UPDATE) or not version or entry.get("fieldsType") != "FieldsV1":
            return None
        who = Manager(
            str(entry.get("manager", "")),
            operation,
            "" if operation == APPLY else str(version),
            str(entry.get("subresource", "")),
        )
        out[who] = Owned(from_fields_v1(entry.get("fieldsV1")), str(version), entry.get("time"))
    return out


def encode(managed: Managed) -> list[JsonObj]:
    """``metadata.managedFields`` in the server's order and field order."""
    entries = []
    for who, owned in managed.items():
        entry: JsonObj = {"manager": who.name, "operation": who.operation}
        entry["apiVersion"] = owned.api_version
        if owned.time:
            entry["time"] = owned.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = to_fields_v1(owned.fields)
        if who.subresource:
            entry["subresource"] = who.subresource
        entries.append(entry)

    def order(e: JsonObj) -> tuple[str, float, str, str, str]:
        seconds = parse_rfc3339(e["time"]) if e.get("time") else 0.0
        return (e["operation"], seconds, e["manager"], e["apiVersion"], e.get("subresource", ""))

    return sorted(entries, key=order)


def _is_reset(entries: Any) -> bool:
    return bool(entries == [] or entries == [{}])


@dataclass(frozen=True)
class Scope:
    """What one write may own: the request's version and subresource, and whether the
    resource has a status subresource (then the main resource owns no ``status`` field and
    ``/status`` only those)."""

    api_version: str
    subresource: str = ""
    has_status: bool = False
    builtin: bool = True

    def owns(self, path: Path) -> bool:
        if not path or path in _STRIPPED:
            return False
        if self.subresource == "status":
            return path[0] == "f:status"
        return not (self.has_status and path[0] == "f:status")

    def keep(self, paths: Iterable[Path]) -> FieldSet:
        return {p for p in paths if self.owns(p)}

    def changes(self, old: JsonObj, new: JsonObj) -> Comparison:
        found = compare(old, new)
        return Comparison(self.keep(found.added), self.keep(found.modified), found.removed)

    def empty_like(self, obj: JsonObj) -> JsonObj:
        """What the field manager compares a new object with: a zero object of its kind.
        A built-in kind's zero value has its ``spec`` struct (so ``f:spec`` is no member of
        a creator's entry, as on a real Pod); a custom resource's has nothing."""
        empty: JsonObj = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind")}
        empty["metadata"] = {}
        if self.builtin and isinstance(obj.get("spec"), dict):
            empty["spec"] = {}
        return empty


def _conflicts(
    managed: Managed, skip: Manager | None, found: Comparison
) -> dict[Manager, FieldSet]:
    """The fields of other managers that ``found`` changed."""
    conflicts: dict[Manager, FieldSet] = {}
    for who, owned in managed.items():
        lost = owned.fields & found.changed()
        if lost and who != skip:
            conflicts[who] = lost
    return conflicts


def _take(managed: Managed, skip: Manager | None, found: Comparison) -> Managed:
    """Other managers lose what was removed and what was changed (``update`` forced)."""
    conflicts = _conflicts(managed, skip, found)
    out: Managed = {}
    for who, owned in managed.items():
        fields = owned.fields if who == skip else owned.fields - found.removed
        fields = fields - conflicts.get(who, set())
        if fields:
            out[who] = Owned(fields, owned.api_version, owned.time)
    return out


def conflict_error(conflicts: Mapping[Manager, FieldSet]) -> ApiError:
    """409 as ``NewConflictError``: one cause per conflicting field."""
    listed = [(who, path) for who in conflicts for path in sorted(conflicts[who])]
    listed.sort(key=lambda c: (_identifier(c[0]), c[1]))
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_printed(who)}",
            "field": path_text(path),
        }
        for who, path in listed
    ]
    if len(listed) == 1:
        who, path = listed[0]
        message = f"Apply failed with 1 conflict: conflict with {_printed(who)}: {path_text(path)}"
    else:
        lines: list[str] = []
        for who in sorted(conflicts, key=_identifier):
            lines.append(f"conflicts with {_printed(who)}:")
            lines += [f"- {path_text(p)}" for p in sorted(conflicts[who])]
        message = f"Apply failed with {len(listed)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, status_details(causes=causes))


def _identifier(who: Manager) -> str:
    """``BuildManagerIdentifier``: the JSON the managers are sorted by."""
    entry = {"manager": who.name, "operation": who.operation}
    if who.api_version:
        entry["apiVersion"] = who.api_version
    if who.subresource:
        entry["subresource"] = who.subresource
    return json.dumps(entry, separators=(",", ":"))


def _printed(who: Manager) -> str:
    text = json.dumps(who.name)
    if who.subresource:
        text += f" with subresource {json.dumps(who.subresource)}"
    if who.operation == UPDATE:
        text += f" using {who.api_version}"
    return text


def track_update(
    live: JsonObj | None, new: JsonObj, manager: str, scope: Scope, now: str
) -> list[JsonObj] | None:
    """The ``managedFields`` to store with ``new`` after a create (``live`` None) or an update
    by ``manager``; None: store none. ``new``'s own entries, when it brings readable ones,
    replace the live ones (``[]`` clears them)."""
    sent = new.get("metadata", {}).get("managedFields")
    current = (live or {}).get("metadata", {}).get("managedFields")
    managed: Managed = {}
    if scope.subresource:  # a subresource write cannot set them
        managed = decode(current) or {}
    elif not _is_reset(sent):
        managed = (decode(sent) if sent else None) or decode(current) or {}
    if not managed and live is not None:
        return None  # an object that has no managed fields gains none on update
    found = scope.changes(live or scope.empty_like(new), new)
    managed = _take(managed, None, found)
    mine = scope.keep(found.changed())
    if mine:
        who = Manager(manager, UPDATE, scope.api_version, scope.subresource)
        before = managed.get(who)
        fields = mine | (before.fields if before else set())
        managed[who] = Owned(fields, scope.api_version, now)
    return encode(managed) or None


def apply(
    live: JsonObj | None, config: JsonObj, manager: str, scope: Scope, now: str, *, force: bool
) -> tuple[JsonObj, list[JsonObj]]:
    """Server-side apply of ``config`` by ``manager`` onto ``live`` (None: create). Returns
    the object to store, without its ``managedFields``, and those. Raises the 409 of
    :func:`conflict_error`."""
    base = live if live is not None else scope.empty_like(config)
    managed = decode(base.get("metadata", {}).get("managedFields")) or {}
    if not managed and live is not None:
        found = scope.changes(scope.empty_like(live), live)
        first = Manager(BEFORE_FIRST_APPLY, UPDATE, scope.api_version, scope.subresource)
        fields = scope.keep(found.changed())
        if fields:
            managed[first] = Owned(fields, scope.api_version, now)
    plain = {**base, "metadata": dict(base.get("metadata", {}))}
    plain["metadata"].pop("managedFields", None)
    merged = merge(plain, config)
    who = Manager(manager, APPLY, "", scope.subresource)
    last = managed.get(who)
    applied = scope.keep(field_set(config))
    managed[who] = Owned(applied, scope.api_version, last.time if last else None)
    if last is not None:
        owned = set().union(*(o.fields for o in managed.values()))
        merged = remove(merged, last.fields - owned, owned)
    changes = scope.changes(plain, merged)
    conflicts = {} if force else _conflicts(managed, who, changes)
    if conflicts and manager == KUBECTL:  # fields kubectl's client-side apply set: taken over
        allowed = _last_applied_fields(plain)
        conflicts = {w: f - allowed for w, f in conflicts.items() if f - allowed}
    if conflicts:
        raise conflict_error(conflicts)
    managed = _take(managed, who, changes)
    annotations = merged.get("metadata", {}).get("annotations") or {}
    if manager == KUBECTL and annotations.get(LAST_APPLIED):
        merged["metadata"]["annotations"] = {**annotations, LAST_APPLIED: _last_applied(config)}
    if who in managed and (merged != plain or live is None):
        managed[who].time = now
    if not applied:
        managed.pop(who, None)
    return merged, encode(managed)


def _last_applied_fields(live: JsonObj) -> FieldSet:
    """The fields of ``live``'s client-side apply annotation that still hold its values
    (``lastAppliedManager``): ``kubectl`` may take them without a conflict."""
    text = (live.get("metadata", {}).get("annotations") or {}).get(LAST_APPLIED)
    try:
        last = json.loads(text) if text else None
    except ValueError:
        return set()
    if not isinstance(last, dict) or last.get("apiVersion") != live.get("apiVersion"):
        return set()
    differ = compare(last, live)
    return field_set(last) - differ.modified - differ.added - differ.removed


def _last_applied(config: JsonObj) -> str:
    """The annotation ``kubectl`` server-side apply keeps in step (``lastAppliedUpdater``):
    the applied configuration without the annotation, as Go encodes an unstructured object."""
    out = clone(config)
    annotations = out.get("metadata", {}).get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(LAST_APPLIED, None)
    return json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n"

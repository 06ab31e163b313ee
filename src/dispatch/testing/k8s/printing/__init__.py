"""Server-side printing: ``meta.k8s.io`` Tables, what ``kubectl get`` asks for and prints.

kubectl sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...,application/json``
on ``get`` and ``list``; the API server answers a ``Table`` whose columns it chose and whose
cells it rendered, so kubectl prints whatever the server says. Three kinds of printers exist on
a real server and here:

* built-in resources with a handler in ``pkg/printers/internalversion/printers.go`` (pods,
  nodes, jobs, services, events, ...): their columns and cell rules, written again here
  (:mod:`.builtin`, :mod:`.cells`); the server always renders the wide (priority 1) columns too, kubectl hides
  them unless ``-o wide``;
* other built-in resources: the API server's default table convertor
  (``apiserver/pkg/registry/rest/table.go``): ``Name`` and ``Created At`` (RFC 3339);
* custom resources: the CRD's ``additionalPrinterColumns`` for the served version
  (:mod:`.crds`, copied from the projects' CRD manifests), evaluated by a simple JSONPath
  as ``apiextensions-apiserver``'s table convertor does; a CRD that declares none gets ``Age``.

Ages (``Age``, ``Duration``, ``date`` columns) are computed on the server against *its* clock,
here the emulated clock passed as ``now``: with ``time_scale`` above 1 they are emulated ages,
consistent with every timestamp the cluster writes (docs/design/0009-emulator-fidelity.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from dispatch.testing.k8s import errors
from dispatch.testing.k8s.meta import parse_rfc3339
from dispatch.testing.k8s.printing.builtin import BUILTIN
from dispatch.testing.k8s.printing.columns import CREATED_DOC, NAME, Column, Printer
from dispatch.testing.k8s.printing.crds import CRD_COLUMNS, crd_cell, jsonpath
from dispatch.testing.k8s.resources import ResourceType

JsonObj = dict[str, Any]
TABLE_VERSIONS = ("v1", "v1beta1")  # meta.k8s.io versions of Table, preferred first
INCLUDE_OBJECT = ("", "Metadata", "Object", "None")

# ---------------------------------------------------------------------------- negotiation


def table_version(accept: str) -> str | None:
    """The ``meta.k8s.io`` Table version an ``Accept`` header asks for, or None for plain
    objects. Media ranges are read in order: a plain JSON range first means plain objects; a
    Table range of a served version wins; other ranges (another ``as=``, an unknown Table
    version) are passed over, as the API server's negotiation passes over what it cannot
    answer."""
    for media in accept.split(","):
        kind, *params = (part.strip() for part in media.split(";"))
        named = dict(p.partition("=")[::2] for p in params)
        if kind not in ("application/json", "*/*", "application/*"):
            continue
        if "as" not in named:
            return None
        table = named.get("as") == "Table" and named.get("g") == "meta.k8s.io"
        if table and named.get("v") in TABLE_VERSIONS:
            return named["v"]
    return None


def _rfc3339(timestamp: str | None) -> str:
    """The default convertor's ``Created At``: UTC, second precision (zero time if unset)."""
    if not timestamp:
        return "0001-01-01T00:00:00Z"
    return datetime.fromtimestamp(int(parse_rfc3339(timestamp)), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------- the Table


def printer_for(rtype: ResourceType) -> Printer:
    """Built-in handler, CRD printer columns, or the default convertor, in that order."""
    if rtype.builtin:
        found = BUILTIN.get(rtype.storage)
        if found is not None:
            return found
        return Printer(
            (NAME, Column("Created At", "date", CREATED_DOC)),
            lambda o, now: [_meta(o).get("name", ""), _rfc3339(_meta(o).get("creationTimestamp"))],
        )
    declared = CRD_COLUMNS.get((rtype.group, rtype.version, rtype.plural))
    columns = declared or (Column("Age", "date", CREATED_DOC, path=".metadata.creationTimestamp"),)
    return Printer(
        (NAME, *columns),
        lambda o, now: [_meta(o).get("name", ""), *(crd_cell(c, o, now) for c in columns)],
    )


def table(
    rtype: ResourceType,
    objects: Iterable[JsonObj],
    now: float,
    *,
    version: str,
    include_object: str | None,
    list_meta: JsonObj,
) -> JsonObj:
    """The ``Table`` for ``objects`` (wire representation of ``rtype``), as the API server's
    ``asTable`` writes it: column definitions, one row per object with its cells and the
    object as ``includeObject`` asks (``Metadata``, the default: a PartialObjectMetadata)."""
    include = include_policy(include_object)
    printer = printer_for(rtype)
    api_version = f"meta.k8s.io/{version}"
    rows = []
    for obj in objects:
        row: JsonObj = {"cells": printer.cells(obj, now)}
        conditions = printer.conditions(obj) if printer.conditions else []
        if conditions:
            row["conditions"] = conditions
        row["object"] = _included(rtype, obj, include, api_version)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": list_meta,
        "columnDefinitions": [c.to_json() for c in printer.columns],
        "rows": rows,
    }


def include_policy(value: str | None) -> str:
    """``includeObject``: ``Metadata`` (the default), ``Object`` or ``None``; else a 400."""
    include = value or ""
    if include not in INCLUDE_OBJECT:
        raise errors.bad_request(f'unrecognized includeObject value: "{include}"')
    return include


def _included(rtype: ResourceType, obj: JsonObj, include: str, api_version: str) -> Any:
    if include == "None":
        return None
    if include == "Object":
        return {"kind": rtype.kind, "apiVersion": rtype.api_version, **obj}
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": _meta(obj)}


def _meta(obj: JsonObj) -> JsonObj:
    meta: JsonObj = obj.get("metadata") or {}
    return meta


__all__ = ["include_policy", "jsonpath", "printer_for", "table", "table_version"]

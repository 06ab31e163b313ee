"""Conversion between the versions of one stored resource.

The store keeps the storage version's representation; a request at another version sees the
object converted. Implemented pairs: ``events.k8s.io/v1`` Event <-> core ``v1`` Event (field
renames as in ``k8s.io/kubernetes/pkg/apis/events/v1``), and Kueue Workload ``v1beta1`` <->
``v1beta2`` (only ``apiVersion`` changes: a fidelity limit, see the design note).
"""

from __future__ import annotations

from typing import Any

from dispatch.testing.k8s.resources import ResourceType

JsonObj = dict[str, Any]

# events.k8s.io/v1 field -> core/v1 field
_EVENT_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}
_EVENT_RENAMES_BACK = {v: k for k, v in _EVENT_RENAMES.items()}


def _rename(obj: JsonObj, renames: dict[str, str]) -> JsonObj:
    return {renames.get(key, key): value for key, value in obj.items()}


def to_storage(rtype: ResourceType, storage: ResourceType, obj: JsonObj) -> JsonObj:
    """``obj`` (as sent at ``rtype``) in the representation of ``storage``."""
    if rtype is storage:
        return obj
    if rtype.group == "events.k8s.io":
        obj = _rename(obj, _EVENT_RENAMES)
    out = dict(obj)
    out["apiVersion"] = storage.api_version
    out["kind"] = storage.kind
    return out


def from_storage(rtype: ResourceType, storage: ResourceType, obj: JsonObj) -> JsonObj:
    """A stored object as a client of ``rtype`` sees it."""
    if rtype is storage:
        return obj
    if rtype.group == "events.k8s.io":
        obj = _rename(obj, _EVENT_RENAMES_BACK)
    out = dict(obj)
    out["apiVersion"] = rtype.api_version
    out["kind"] = rtype.kind
    return out

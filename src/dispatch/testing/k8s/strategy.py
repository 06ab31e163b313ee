"""What the server itself does to an object on create and update (Kubernetes "REST
strategies"): system metadata, status handling, generation, and the checks that go with them.

``prepare_create`` and ``prepare_update`` work on storage-representation objects and raise
:class:`~dispatch.testing.k8s.errors.ApiError` for requests a real server refuses.
"""

from __future__ import annotations

from typing import Any

from dispatch.adapters.kubeflow.objects import clone
from dispatch.testing.k8s import errors
from dispatch.testing.k8s.errors import FieldError
from dispatch.testing.k8s.meta import Identity, body_of, meta, rfc3339
from dispatch.testing.k8s.resources import ResourceType

JsonObj = dict[str, Any]
SYSTEM_META = (
    "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
    "generation", "resourceVersion", "namespace", "name",
)  # fmt: skip
PODS = ("", "pods")
NAMESPACES = ("", "namespaces")
DISRUPTION_BUDGETS = ("policy", "poddisruptionbudgets")


def check_kind(rtype: ResourceType, body: JsonObj) -> None:
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if api_version and api_version != rtype.api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            f"version ({rtype.api_version})"
        )
    if kind and kind != rtype.kind:
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})"
        )


def set_namespace(rtype: ResourceType, obj: JsonObj, namespace: str | None) -> None:
    m = meta(obj)
    if not rtype.namespaced:
        m.pop("namespace", None)
        return
    if m.get("namespace") and namespace and m["namespace"] != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    m["namespace"] = namespace or m.get("namespace") or "default"


def prepare_create(
    rtype: ResourceType, stype: ResourceType, obj: JsonObj, identity: Identity, now: float
) -> None:
    """System fields of a new object; status reset for resources with a status subresource."""
    obj["apiVersion"], obj["kind"] = stype.api_version, stype.kind
    m = meta(obj)
    if m.get("resourceVersion"):
        raise errors.internal("resourceVersion should not be set on objects to be created")
    if not m.get("name"):
        if not m.get("generateName"):
            raise errors.invalid(
                rtype.group,
                rtype.kind,
                "",
                [FieldError.required("metadata.name", "name or generateName is required")],
            )
        m["name"] = identity.generated_name(m["generateName"])
    for field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        m.pop(field, None)
    m["uid"] = identity.uid()
    m["creationTimestamp"] = rfc3339(now)
    if stype.has_generation:
        m["generation"] = 1
    if stype.status:
        obj.pop("status", None)
        if stype.storage == PODS:
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        if stype.storage == NAMESPACES:
            obj["status"] = {"phase": "Active"}
        if stype.storage == DISRUPTION_BUDGETS:  # the numbers have no omitempty
            obj["status"] = dict.fromkeys(
                ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"), 0
            )
    if stype.storage == NAMESPACES:
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        m.setdefault("labels", {})["kubernetes.io/metadata.name"] = m["name"]


def prepare_update(
    rtype: ResourceType,
    stype: ResourceType,
    new: JsonObj,
    existing: JsonObj,
    subresource: str | None,
    *,
    unconditional: bool,
) -> JsonObj:
    """The object to store for a PUT of ``new`` over ``existing`` (checks preconditions)."""
    m = meta(new)
    old_meta = existing["metadata"]
    name = old_meta["name"]
    if m.get("name", name) != name:
        raise errors.bad_request(
            f"the name of the object ({m['name']}) does not match the name on the URL ({name})"
        )
    rv = str(m.get("resourceVersion") or "")
    if not rv and not (unconditional or rtype.builtin):
        raise errors.invalid(
            rtype.group,
            rtype.kind,
            name,
            [
                FieldError.invalid(
                    "metadata.resourceVersion", "0x0", "must be specified for an update"
                )
            ],
        )
    if rv and rv != old_meta["resourceVersion"]:
        raise errors.conflict(rtype.group, rtype.plural, name, errors.STALE)
    uid = str(m.get("uid") or "")
    if uid and uid != old_meta.get("uid"):  # as ValidateObjectMetaUpdate: a patch cannot swap it
        raise errors.invalid(
            rtype.group,
            rtype.kind,
            name,
            [FieldError.invalid("metadata.uid", uid, "field is immutable")],
        )
    if subresource == "status":
        # the stored object with the new status; its other parts are shared with the stored
        # version (stored objects are never modified in place, and no admission plugin
        # changes a status write), its metadata is its own (the write sets fields there)
        status = new.get("status")
        new = {**existing, "metadata": clone(old_meta)}
        if status is None:
            new.pop("status", None)
        else:
            new["status"] = clone(status)
        return new
    if stype.status:
        new.pop("status", None)
        if "status" in existing:
            new["status"] = clone(existing["status"])
    new["apiVersion"], new["kind"] = stype.api_version, stype.kind
    for field in SYSTEM_META:
        if field in old_meta:
            m[field] = clone(old_meta[field])
        else:
            m.pop(field, None)
    if stype.has_generation and body_of(new) != body_of(existing):
        m["generation"] = int(old_meta.get("generation", 0)) + 1
    if old_meta.get("deletionTimestamp"):
        added = set(m.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
        if added:
            raise errors.invalid(
                rtype.group,
                rtype.kind,
                name,
                [
                    FieldError.forbidden(
                        "metadata.finalizers",
                        "no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers {sorted(added)}",
                    )
                ],
            )
    return new


def finished_deleting(obj: JsonObj) -> bool:
    """Deletion started, no finalizer left and no grace period pending: remove it now."""
    m = obj["metadata"]
    return (
        bool(m.get("deletionTimestamp"))
        and not m.get("finalizers")
        and not m.get("deletionGracePeriodSeconds")
    )

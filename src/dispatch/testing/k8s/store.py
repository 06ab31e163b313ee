"""The in-memory object store with the semantics of the Kubernetes API server.

Guarantees (every public method runs synchronously on the emulator's event-loop thread and is
therefore atomic):

- One global resourceVersion counter; every write bumps it and records one watch change.
- ``uid``, ``creationTimestamp``, ``generation`` (bumped when anything but metadata or status
  changes, and when deletion starts), ``generateName`` and namespace handling as a real server.
- Resources with a status subresource: ``create`` and main-resource writes keep the stored
  status; ``/status`` writes change only the status.
- Optimistic concurrency: a write naming a stale ``metadata.resourceVersion`` is a 409 Conflict.
- A write that changes nothing is not a change (no new resourceVersion, no watch event).
- Deletion honours finalizers, preconditions and propagation (``Background``, ``Foreground``,
  ``Orphan``); dependents are collected by :mod:`dispatch.testing.k8s.gc`.
- Admission plugins (:mod:`dispatch.testing.k8s.admission`) run on every create and update;
  then, only if all of them accepted the object, the validating admission of ``validating``
  (ValidatingAdmissionPolicies, then validating webhooks), which refuses by raising. Every
  plugin is told who writes (the ``user`` argument, else the user of :meth:`Store.acting_as`,
  else None) and whether it is a dry run.
- ``dry_run`` writes run every step (defaulting, admission, validation, conflicts) and answer
  what would be stored, but store nothing: no resourceVersion, no watch event, no deletion.
- Writes that name a field manager (every request through the HTTP front) keep
  ``metadata.managedFields`` and server-side apply semantics
  (:mod:`dispatch.testing.k8s.managed_fields`); the emulator's own controllers write without
  one and leave the entries as they are.
- Objects handed out are copies; callers may modify them freely.
"""

from __future__ import annotations

import base64
import bisect
import builtins
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dispatch.adapters.kubeflow.objects import MERGE_KEYS, clone
from dispatch.clock import Clock
from dispatch.testing.k8s import errors, workloads
from dispatch.testing.k8s import managed_fields as fieldmanager
from dispatch.testing.k8s.admission import AdmissionChain, AdmissionRequest
from dispatch.testing.k8s.conversion import from_storage, to_storage
from dispatch.testing.k8s.errors import FieldError
from dispatch.testing.k8s.gc import GarbageCollector
from dispatch.testing.k8s.meta import Identity, rfc3339
from dispatch.testing.k8s.patch import APPLY_PATCH, apply_patch
from dispatch.testing.k8s.resources import ResourceCatalog, ResourceType
from dispatch.testing.k8s.selectors import FieldSelector, LabelSelector
from dispatch.testing.k8s.services import MERGE_KEYS as SERVICE_MERGE_KEYS
from dispatch.testing.k8s.services import SERVICES
from dispatch.testing.k8s.strategy import (
    check_kind,
    finished_deleting,
    prepare_create,
    prepare_update,
    set_namespace,
)
from dispatch.testing.k8s.tables import Key, Tables
from dispatch.testing.k8s.validation import metadata_errors
from dispatch.testing.k8s.watch import Change, Selection, Subscription

if TYPE_CHECKING:
    from dispatch.testing.k8s.rbac import UserInfo

JsonObj = dict[str, Any]
_SYSTEM_META = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
    "namespace",
    "name",
)


@dataclass
class ValidatingRequest(AdmissionRequest):
    """What validating admission sees: an :class:`AdmissionRequest` and the resource type the
    client asked at (``rtype`` is the storage version), which webhooks' rules match first."""

    requested: ResourceType | None = None


@dataclass(frozen=True)
class ObjectList:
    items: list[JsonObj]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


class Store:
    """Objects of every served resource, their history, and the operations on them."""

    def __init__(
        self,
        catalog: ResourceCatalog,
        clock: Clock,
        identity: Identity,
        *,
        history_window: float = 300.0,
        history_limit: int = 200_000,
    ) -> None:
        self.catalog = catalog
        self.clock = clock
        self.identity = identity
        self.admission = AdmissionChain()
        #: validating admission, run after ``admission`` accepted: policies, then webhooks
        self.validating = AdmissionChain()
        #: warnings of the current request's admission (the HTTP front sends them as
        #: ``Warning`` headers and clears the list before each request)
        self.warnings: builtins.list[str] = []
        self._actor: UserInfo | None = None
        self.tables = Tables(clock, history_window, history_limit)
        self.history = self.tables.history
        self.gc = GarbageCollector(self)
        # storage key -> grace seconds for a deletion, or None to delete at once (the kubelet
        # registers pods here so that deleting a running pod waits for the kubelet).
        self.graceful_deletion: dict[tuple[str, str], Callable[[JsonObj], int | None]] = {}

    # ----------------------------------------------------------------- reading

    @property
    def resource_version(self) -> int:
        return self.tables.rv

    def _storage(self, rtype: ResourceType) -> ResourceType:
        return self.catalog.storage_type(rtype)

    def _table(self, stype: ResourceType) -> dict[Key, JsonObj]:
        return self.tables.table(stype)

    def _key(self, rtype: ResourceType, namespace: str | None, name: str) -> Key:
        return ((namespace or "") if rtype.namespaced else "", name)

    def _stored(self, rtype: ResourceType, namespace: str | None, name: str) -> JsonObj:
        obj = self._table(self._storage(rtype)).get(self._key(rtype, namespace, name))
        if obj is None:
            raise errors.not_found(rtype.group, rtype.plural, name)
        return obj

    def _out(self, rtype: ResourceType, obj: JsonObj, copy: bool = True) -> JsonObj:
        """``obj`` as a client of ``rtype`` sees it: a copy of its own, or with ``copy`` False
        the stored object itself (read-only, as :meth:`peek`; shallow-converted when ``rtype``
        is not its storage version)."""
        out: JsonObj = from_storage(rtype, self._storage(rtype), obj)
        return clone(out) if copy else out

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> JsonObj:
        return self._out(rtype, self._stored(rtype, namespace, name))

    def peek(self, rtype: ResourceType, namespace: str | None, name: str) -> JsonObj | None:
        """The stored object (storage representation, read-only: never modify it) or None.
        For in-process controllers, which read far more than they write."""
        return self._table(self._storage(rtype)).get(self._key(rtype, namespace, name))

    def find_uid(self, uid: str) -> tuple[ResourceType, JsonObj] | None:
        """The stored object with ``uid`` (storage representation, read-only) or None."""
        return self.tables.find_uid(uid)

    def dependents(self, uid: str) -> builtins.list[tuple[ResourceType, JsonObj]]:
        return self.tables.dependents(uid)

    def objects(self, rtype: ResourceType) -> builtins.list[JsonObj]:
        """Every stored object of ``rtype``'s storage, read-only, in (namespace, name) order."""
        table = self._table(self._storage(rtype))
        return [table[k] for k in sorted(table)]

    def list(
        self,
        rtype: ResourceType,
        namespace: str | None = None,
        *,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        metadata_only: bool = False,
    ) -> ObjectList:
        """Matching objects in (namespace, name) order; ``limit``/``continue`` page through
        the current objects (not a snapshot: a fidelity limit). ``metadata_only``: each item
        is ``{"metadata": ...}`` alone, the stored metadata itself (not copied: read it at
        once, before the store changes, and never change it), as an API server serves a
        PartialObjectMetadataList from its cache."""
        sel = Selection(
            None,
            namespace if rtype.namespaced else None,
            labels or LabelSelector(),
            fields or FieldSelector(),
        )
        stype = self._storage(rtype)
        table = self._table(stype)
        list_rv, start = self.tables.rv, None
        if continue_token:
            list_rv, start = _decode_continue(continue_token)
            if list_rv < self.history.compacted_rv:
                raise errors.gone(
                    "The provided continue parameter is too old to display a "
                    "consistent list result. You can start a new list without "
                    "the continue parameter."
                )
        order = self.tables.keys_in_order(stype)
        # one namespace's keys are a range of the order: (namespace, "") sorts before them
        first = (sel.namespace, "") if sel.namespace else None
        low = bisect.bisect_right(order, start) if start is not None else 0
        if first is not None and (start is None or start < first):
            low = bisect.bisect_left(order, first)
        matched: list[JsonObj] = []
        for key in itertools.islice(order, low, None):
            if first is not None and key[0] != first[0]:
                break
            obj = table[key]
            if sel.matches_object(stype, obj):
                matched.append(obj)
        token, remaining = "", None
        if limit and len(matched) > limit:
            last = matched[limit - 1]["metadata"]
            token = _encode_continue(list_rv, (last.get("namespace", ""), last["name"]))
            remaining = len(matched) - limit
            matched = matched[:limit]
        if metadata_only:
            items = [{"metadata": o["metadata"]} for o in matched]
            return ObjectList(items, list_rv, token, remaining)
        return ObjectList([self._out(rtype, o) for o in matched], list_rv, token, remaining)

    # ----------------------------------------------------------------- watching

    def subscribe(
        self,
        rtypes: Iterable[ResourceType] | None = None,
        *,
        namespace: str | None = None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        since: int | None = None,
    ) -> Subscription:
        """Changes to the selected objects after ``since`` (None: current objects first).
        Events carry storage-representation objects; 410 if ``since`` is compacted."""
        types = list(rtypes) if rtypes is not None else None
        storages = frozenset(t.storage for t in types) if types is not None else None
        sel = Selection(storages, namespace, labels or LabelSelector(), fields or FieldSelector())
        initial = (
            [(self._storage(t), o) for t in (types or list(self.catalog)) for o in self.objects(t)]
            if not since
            else []
        )
        return self.history.subscribe(sel, since, initial)

    def on_change(self, hook: Callable[[Change], None]) -> None:
        """Call ``hook`` synchronously after every change (internal reactions)."""
        self.tables.hooks.append(hook)

    def compact(self) -> None:
        """Forget history: any watch from an older resourceVersion now gets 410 Gone."""
        self.history.compact(self.tables.rv)

    # ----------------------------------------------------------------- who writes

    @contextmanager
    def acting_as(self, user: UserInfo | None) -> Iterator[None]:
        """Writes in this block are ``user``'s (admission sees it) unless they name another.
        For the in-process controllers: hold it only around synchronous code (never across an
        ``await``: another task's writes would run as ``user``)."""
        previous, self._actor = self._actor, user
        try:
            yield
        finally:
            self._actor = previous

    # ----------------------------------------------------------------- writing

    def _admit(
        self,
        op: str,
        rtype: ResourceType,
        obj: JsonObj,
        old: JsonObj | None,
        subresource: str | None,
        user: UserInfo | None,
        dry_run: bool,
    ) -> None:
        stype = self._storage(rtype)
        found = [] if subresource else metadata_errors(stype, obj)
        if not subresource:  # Job and Pod strategies (selector, restartPolicy, pod updates)
            found += workloads.admit(op, stype, obj, old)
        who = user or self._actor
        request = AdmissionRequest(op, stype, obj, old, subresource, self, who, dry_run)
        found += self.admission.admit(request)
        if not found and self.validating.plugins:
            found += self.validating.admit(
                ValidatingRequest(op, stype, obj, old, subresource, self, who, dry_run, rtype)
            )
        if found:
            name = str(obj["metadata"].get("name", ""))
            raise errors.invalid(rtype.group, rtype.kind, name, found)

    def create(
        self,
        rtype: ResourceType,
        namespace: str | None,
        body: JsonObj,
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
        managed_fields: builtins.list[JsonObj] | None = None,
        user: UserInfo | None = None,
        owned: bool = False,
        copy: bool = True,
    ) -> JsonObj:
        """Create. ``field_manager``: who writes (its ``Update`` entry in ``managedFields``;
        None for the emulator's own controllers); ``managed_fields``: the entries server-side
        apply computed; ``dry_run``: everything but the write (the object as it would be
        stored, without a resourceVersion, as ``dryRun=All`` answers); ``user``: who asks, as
        admission sees it (default: the user of :meth:`acting_as`). ``owned``: ``body`` is
        given away (a request's own decoded body: stored as it is, not copied; the caller
        never touches it again); ``copy`` False: the answer is the stored object itself,
        read-only (for callers that only read or serialize it; copying every answer was the
        emulator's largest cost)."""
        stype = self._storage(rtype)
        check_kind(rtype, body)
        obj = to_storage(rtype, stype, body if owned else clone(body))
        set_namespace(rtype, obj, namespace)
        m = obj["metadata"]
        if rtype.namespaced:
            self._check_namespace(rtype, m["namespace"], m.get("name", ""))
        prepare_create(rtype, stype, obj, self.identity, self.clock.now())
        table = self._table(stype)
        while self._key(rtype, m.get("namespace"), m["name"]) in table:
            if not m.get("generateName"):
                raise errors.already_exists(rtype.group, rtype.plural, m["name"])
            m["name"] = self.identity.generated_name(m["generateName"])
        workloads.prepare_create(stype, obj)  # after the final name: Job labels carry it
        if managed_fields is not None or field_manager:
            entries = managed_fields
            if entries is None and field_manager:
                entries = fieldmanager.track_update(
                    None, obj, field_manager, self._scope(rtype, None), self._now()
                )
            _set_managed_fields(obj, entries)
        self._admit("CREATE", rtype, obj, None, None, user, dry_run)
        if dry_run:
            return self._out(rtype, obj, copy)
        self.tables.commit(stype, "ADDED", obj, None)
        self.gc.created(obj)
        self.gc.drain()
        return self._out(rtype, obj, copy)

    def update(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: JsonObj,
        *,
        subresource: str | None = None,
        unconditional: bool = False,
        field_manager: str | None = None,
        dry_run: bool = False,
        managed_fields: builtins.list[JsonObj] | None = None,
        user: UserInfo | None = None,
        owned: bool = False,
        copy: bool = True,
    ) -> JsonObj:
        """PUT. ``unconditional`` (used by patches) allows a body without resourceVersion.
        ``field_manager``, ``managed_fields``, ``dry_run``, ``user``, ``owned`` and ``copy``
        as for :meth:`create`; without a manager the stored ``managedFields`` stay as they
        are. A ``status`` write copies only the body's status (``prepare_update`` keeps the
        rest of the stored object)."""
        stype = self._storage(rtype)
        existing = self._stored(rtype, namespace, name)
        check_kind(rtype, body)
        if owned:
            given = body
        elif subresource == "status":
            given = dict(body)  # its metadata is only read; its status is copied
        else:
            given = clone(body)
        new = to_storage(rtype, stype, given)
        new = prepare_update(rtype, stype, new, existing, subresource, unconditional=unconditional)
        entries = managed_fields
        if entries is None and field_manager:
            scope = self._scope(rtype, subresource)
            entries = fieldmanager.track_update(existing, new, field_manager, scope, self._now())
        elif entries is None:
            entries = existing["metadata"].get("managedFields")
        _set_managed_fields(new, entries)
        self._admit("UPDATE", rtype, new, existing, subresource, user, dry_run)
        new["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        if new == existing:
            return self._out(rtype, existing, copy)
        if dry_run:
            return self._out(rtype, new, copy)
        if finished_deleting(new):
            self.tables.commit(stype, "DELETED", new, existing)
            self.gc.removed(new)
        else:
            self.tables.commit(stype, "MODIFIED", new, existing)
            self.gc.updated(new)
        self.gc.drain()
        return self._out(rtype, new, copy)

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        user: UserInfo | None = None,
        owned: bool = False,
        copy: bool = True,
    ) -> JsonObj:
        """Patch (merge, JSON, strategic merge) then write as :meth:`update`, or server-side
        apply (:mod:`~dispatch.testing.k8s.managed_fields`: field ownership, 409 on another
        manager's field unless ``force``; a missing object is created). ``user``, ``owned``
        (the patch document) and ``copy`` as for :meth:`create` (an apply's answer is
        always a copy)."""
        if patch_type == APPLY_PATCH:
            return self._apply(
                rtype, namespace, name, body, subresource, field_manager, force, dry_run, user
            )
        current = self.get(rtype, namespace, name)
        keys = SERVICE_MERGE_KEYS if rtype.storage == SERVICES else MERGE_KEYS
        patched = apply_patch(patch_type, current, body, builtin=rtype.builtin, merge_keys=keys)
        if not isinstance(patched, dict):
            raise errors.bad_request("patch did not produce an object")
        return self.update(
            rtype,
            namespace,
            name,
            patched,
            subresource=subresource,
            unconditional=True,
            field_manager=field_manager,
            dry_run=dry_run,
            user=user,
            owned=owned,  # made of a copy of the stored object and the patch document
            copy=copy,
        )

    def _apply(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None,
        field_manager: str | None,
        force: bool,
        dry_run: bool,
        user: UserInfo | None = None,
    ) -> JsonObj:
        if not field_manager:
            raise errors.invalid(
                "meta.k8s.io",
                "PatchOptions",
                "",
                [FieldError.required("fieldManager", "is required for apply patch")],
            )
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        if isinstance(body.get("metadata"), dict) and "managedFields" in body["metadata"]:
            raise errors.bad_request("metadata.managedFields must be nil")
        scope, now = self._scope(rtype, subresource), self._now()
        if self.peek(rtype, namespace, name) is None:
            created, entries = fieldmanager.apply(
                None, body, field_manager, scope, now, force=force
            )
            return self.create(
                rtype, namespace, created, managed_fields=entries, dry_run=dry_run, user=user
            )
        current = self.get(rtype, namespace, name)
        merged, entries = fieldmanager.apply(current, body, field_manager, scope, now, force=force)
        return self.update(
            rtype,
            namespace,
            name,
            merged,
            subresource=subresource,
            unconditional=True,
            managed_fields=entries,
            dry_run=dry_run,
            user=user,
        )

    def _scope(self, rtype: ResourceType, subresource: str | None) -> fieldmanager.Scope:
        stype = self._storage(rtype)
        return fieldmanager.Scope(
            rtype.api_version, subresource or "", stype.status, builtin=rtype.builtin
        )

    def _now(self) -> str:
        return rfc3339(self.clock.now())

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        *,
        propagation: str | None = None,
        preconditions: JsonObj | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> tuple[JsonObj, bool]:
        """Delete; returns the object and whether it is gone now (False: deletion pending on
        finalizers, dependents in the foreground, or graceful termination). ``dry_run``: the
        same answer, but nothing is written and no deletion starts."""
        stype = self._storage(rtype)
        existing = self._stored(rtype, namespace, name)
        pre = preconditions or {}
        m = existing["metadata"]
        if pre.get("uid") and pre["uid"] != m["uid"]:
            raise errors.conflict(
                rtype.group,
                rtype.plural,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, "
                f"UID in object meta: {m['uid']}",
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != m["resourceVersion"]:
            raise errors.conflict(
                rtype.group,
                rtype.plural,
                name,
                "Precondition failed: ResourceVersion in precondition: "
                f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                f"{m['resourceVersion']}",
            )
        policy = propagation or rtype.default_propagation
        state, gone = self.gc.delete(stype, existing, policy, grace_period_seconds, dry_run=dry_run)
        if dry_run:
            return self._out(rtype, state), gone
        self.gc.drain()
        return self._out(rtype, state), self.find_uid(m["uid"]) is None

    def delete_collection(
        self,
        rtype: ResourceType,
        namespace: str | None,
        *,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
        propagation: str | None = None,
        dry_run: bool = False,
    ) -> builtins.list[JsonObj]:
        listed = self.list(rtype, namespace, labels=labels, fields=fields)
        out = []
        for item in listed.items:
            m = item["metadata"]
            obj, _ = self.delete(
                rtype, m.get("namespace"), m["name"], propagation=propagation, dry_run=dry_run
            )
            out.append(obj)
        return out

    # ----------------------------------------------------------------- system writes (GC)

    def system_write(self, stype: ResourceType, obj: JsonObj, *, remove: bool = False) -> None:
        """Write ``obj`` (storage representation) without admission: for the garbage
        collector and namespace lifecycle only."""
        key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        old = self._table(stype).get(key)
        self.tables.commit(
            stype, "DELETED" if remove else ("MODIFIED" if old else "ADDED"), obj, old
        )

    # ----------------------------------------------------------------- checks

    def _check_namespace(self, rtype: ResourceType, namespace: str, name: str) -> None:
        ns_type = self.catalog.find("", "v1", "namespaces")
        if ns_type is None:
            return
        ns = self._table(ns_type).get(("", namespace))
        if ns is None:
            raise errors.not_found("", "namespaces", namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.forbidden(
                rtype.group,
                rtype.plural,
                name,
                f"unable to create new content in namespace {namespace} "
                "because it is being terminated",
            )


def _set_managed_fields(obj: JsonObj, entries: builtins.list[JsonObj] | None) -> None:
    if entries:
        obj["metadata"]["managedFields"] = entries
    else:
        obj["metadata"].pop("managedFields", None)


def _encode_continue(rv: int, start: Key) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(start)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[int, Key]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc

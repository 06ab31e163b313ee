"""Deletion, finalizers, cascading (garbage collection) and namespace termination.

Mirrors the API server's deletion path and the garbage-collector controller:

- An object with finalizers, or deleted with ``Foreground``/``Orphan`` propagation, or whose
  storage has a graceful-deletion policy (pods on a kubelet), gets ``deletionTimestamp`` and
  ``deletionGracePeriodSeconds`` and stays until its finalizers are gone and the grace period
  was confirmed with a delete of grace 0.
- ``Background``: the owner goes at once; then every dependent whose owners are all gone is
  deleted (recursively); a dependent that still has a live owner only loses the reference.
- ``Foreground``: the owner gets finalizer ``foregroundDeletion``; its dependents are deleted in
  the foreground; the finalizer is removed when no dependent with ``blockOwnerDeletion`` is left.
- ``Orphan``: the owner gets finalizer ``orphan``; the references to it are removed from its
  dependents, then the finalizer.
- An object created, or updated, with owner references that all point to absent uids is
  collected (the real collector adds a "virtual" node for an owner it has not seen, finds it
  absent with a live read, and deletes its dependents that have no other owner); one that
  also names a live owner only loses the dangling references (``attemptToDeleteItem``: with
  a solid owner, the dangling ones are patched away).
- Deleting a namespace marks it ``Terminating``, deletes its contents and removes it once empty.

Work is queued and drained at the end of each store operation, so the resulting watch events
come in the order a real cluster produces them (owner first for background, last for foreground).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from dispatch.adapters.kubeflow.objects import clone
from dispatch.testing.k8s.meta import owner_uids, rfc3339
from dispatch.testing.k8s.resources import ResourceType

if TYPE_CHECKING:
    from dispatch.testing.k8s.store import Store

JsonObj = dict[str, Any]
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
_NAMESPACES = ("", "namespaces")


class GarbageCollector:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._queue: deque[Callable[[], None]] = deque()
        self._draining = False

    # ------------------------------------------------------------ entry points

    def delete(
        self,
        stype: ResourceType,
        obj: JsonObj,
        policy: str,
        grace: int | None,
        *,
        dry_run: bool = False,
    ) -> tuple[JsonObj, bool]:
        """Start deleting ``obj``; returns its state and whether it is gone. ``dry_run``: the
        state it would have, with nothing written or queued (``dryRun=All``)."""
        m = obj["metadata"]
        if stype.storage == _NAMESPACES:
            if dry_run:
                return self._terminating(obj), False
            return self._delete_namespace(stype, obj)
        if m.get("deletionTimestamp"):
            if grace == 0 and m.get("deletionGracePeriodSeconds"):
                new = clone(obj)
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                if not new["metadata"].get("finalizers"):
                    if not dry_run:
                        self._remove(stype, new)
                    return new, True
                if not dry_run:
                    self._store.system_write(stype, new)
                return new, False
            return obj, False
        finalizers = list(m.get("finalizers") or [])
        if policy == "Foreground":
            finalizers.append(FOREGROUND)
        elif policy == "Orphan":
            finalizers.append(ORPHAN)
        if grace is None:
            hook = self._store.graceful_deletion.get(stype.storage)
            grace = hook(obj) if hook else None
        if not finalizers and not grace:
            if not dry_run:
                self._remove(stype, obj)
            return obj, True
        new = clone(obj)
        nm = new["metadata"]
        now = self._store.clock.now()
        nm["deletionTimestamp"] = rfc3339(now + (grace or 0))
        nm["deletionGracePeriodSeconds"] = grace or 0
        if finalizers:
            nm["finalizers"] = finalizers
        if stype.has_generation:
            nm["generation"] = int(nm.get("generation", 0)) + 1
        if dry_run:
            return new, False
        self._store.system_write(stype, new)
        uid = nm["uid"]
        if policy == "Foreground":
            self._queue.append(lambda: self._collect(uid, "Foreground"))
            self._queue.append(lambda: self._check_owner(uid))
        elif policy == "Orphan":
            self._queue.append(lambda: self._orphan(uid))
        return new, False

    def created(self, obj: JsonObj) -> None:
        self._collect_dangling(obj)

    def updated(self, obj: JsonObj) -> None:
        for owner in owner_uids(obj):
            self._queue.append(partial(self._check_owner, owner))
        self._collect_dangling(obj)

    def _collect_dangling(self, obj: JsonObj) -> None:
        """Queue the deletion of ``obj`` when every owner it names is absent, or the removal
        of the references to absent owners when another owner is live."""
        owners = owner_uids(obj)
        absent = {o for o in owners if self._store.find_uid(o) is None}
        if not absent:
            return
        uid = obj["metadata"]["uid"]
        if len(absent) == len(set(owners)):
            self._queue.append(lambda: self._delete_uid(uid, "Background"))
        else:
            self._queue.append(lambda: self._drop_dangling(uid, absent))

    def _drop_dangling(self, uid: str, absent: set[str]) -> None:
        """The references to ``absent`` owners that ``uid`` still names and that are still
        absent go (no write when none is left)."""
        found = self._store.find_uid(uid)
        if found is None:
            return
        still = {o for o in owner_uids(found[1]) if o in absent and self._store.find_uid(o) is None}
        if still:
            self._drop_reference(found[0], found[1], *still)

    def removed(self, obj: JsonObj) -> None:
        m = obj["metadata"]
        uid = m["uid"]
        self._queue.append(lambda: self._collect(uid, "Background"))
        for owner in owner_uids(obj):
            self._queue.append(partial(self._check_owner, owner))
        if m.get("namespace"):
            ns = m["namespace"]
            self._queue.append(lambda: self._check_namespace(ns))

    def drain(self) -> None:
        if self._draining:
            return
        self._draining = True
        try:
            while self._queue:
                self._queue.popleft()()
        finally:
            self._draining = False

    # ------------------------------------------------------------ steps

    def _remove(self, stype: ResourceType, obj: JsonObj) -> None:
        self._store.system_write(stype, obj, remove=True)
        self.removed(obj)

    def _delete_uid(self, uid: str, policy: str) -> None:
        found = self._store.find_uid(uid)
        if found is not None and not found[1]["metadata"].get("deletionTimestamp"):
            self.delete(found[0], found[1], policy, None)

    def _collect(self, owner_uid: str, policy: str) -> None:
        """Delete the dependents of ``owner_uid`` that have no other live owner."""
        for dtype, dep in self._store.dependents(owner_uid):
            others = [o for o in owner_uids(dep) if o != owner_uid]
            if any(self._store.find_uid(o) is not None for o in others):
                self._drop_reference(dtype, dep, owner_uid)
            elif not dep["metadata"].get("deletionTimestamp"):
                # as the real GC: foreground only for dependents that have dependents
                has_own = bool(self._store.dependents(dep["metadata"]["uid"]))
                self.delete(
                    dtype,
                    dep,
                    "Foreground" if policy == "Foreground" and has_own else "Background",
                    None,
                )

    def _drop_reference(self, dtype: ResourceType, dep: JsonObj, *owners: str) -> None:
        new = clone(dep)
        refs = [
            r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") not in owners
        ]
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        self._store.system_write(dtype, new)

    def _orphan(self, owner_uid: str) -> None:
        for dtype, dep in self._store.dependents(owner_uid):
            self._drop_reference(dtype, dep, owner_uid)
        self._drop_finalizer(owner_uid, ORPHAN)

    def _check_owner(self, owner_uid: str) -> None:
        found = self._store.find_uid(owner_uid)
        if found is None or FOREGROUND not in (found[1]["metadata"].get("finalizers") or []):
            return
        for _dtype, dep in self._store.dependents(owner_uid):
            for ref in dep["metadata"].get("ownerReferences") or []:
                if ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion"):
                    return
        self._drop_finalizer(owner_uid, FOREGROUND)

    def _drop_finalizer(self, uid: str, finalizer: str) -> None:
        found = self._store.find_uid(uid)
        if found is None:
            return
        stype, obj = found
        new = clone(obj)
        rest = [f for f in new["metadata"].get("finalizers") or [] if f != finalizer]
        if rest:
            new["metadata"]["finalizers"] = rest
        else:
            new["metadata"].pop("finalizers", None)
        if not rest and not new["metadata"].get("deletionGracePeriodSeconds"):
            self._remove(stype, new)
        else:
            self._store.system_write(stype, new)

    # ------------------------------------------------------------ namespaces

    def _terminating(self, obj: JsonObj) -> JsonObj:
        if obj["metadata"].get("deletionTimestamp"):
            return obj
        new: JsonObj = clone(obj)
        new["metadata"]["deletionTimestamp"] = rfc3339(self._store.clock.now())
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        new["status"] = {"phase": "Terminating"}
        return new

    def _delete_namespace(self, stype: ResourceType, obj: JsonObj) -> tuple[JsonObj, bool]:
        if not obj["metadata"].get("deletionTimestamp"):
            obj = self._terminating(obj)
            self._store.system_write(stype, obj)
        name = obj["metadata"]["name"]
        for rtype, member in self._contents(name):
            if not member["metadata"].get("deletionTimestamp"):
                self.delete(rtype, member, "Background", None)
        self._check_namespace(name)
        return obj, self._store.find_uid(obj["metadata"]["uid"]) is None

    def _contents(self, namespace: str) -> list[tuple[ResourceType, JsonObj]]:
        out = []
        for rtype in self._store.catalog:
            if rtype.namespaced and rtype.storage_version:
                out += [
                    (rtype, o)
                    for o in self._store.objects(rtype)
                    if o["metadata"].get("namespace") == namespace
                ]
        return out

    def _check_namespace(self, namespace: str) -> None:
        ns_type = self._store.catalog.find("", "v1", "namespaces")
        if ns_type is None:
            return
        ns = next(
            (o for o in self._store.objects(ns_type) if o["metadata"]["name"] == namespace), None
        )
        if ns is None or not ns["metadata"].get("deletionTimestamp") or self._contents(namespace):
            return
        self._remove(ns_type, clone(ns))

"""The storage layer under :class:`~dispatch.testing.k8s.store.Store`: objects by key, by uid
and by owner, the resourceVersion counter, and the change history.

``commit`` is the only way objects change: it assigns the next resourceVersion, updates the
indexes, records the :class:`~dispatch.testing.k8s.watch.Change` (feeding watches) and calls
the change hooks, in that order. Stored objects are never modified in place after commit.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from dispatch.clock import Clock
from dispatch.testing.k8s.meta import owner_uids
from dispatch.testing.k8s.resources import ResourceType
from dispatch.testing.k8s.watch import Change, ChangeLog

JsonObj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


class Tables:
    def __init__(self, clock: Clock, history_window: float, history_limit: int) -> None:
        self.clock = clock
        self.rv = 1
        self._tables: dict[tuple[str, str], dict[Key, JsonObj]] = {}
        #: each table's keys in order, kept as keys come and go (a list reads a range of it
        #: instead of sorting every key of a kind for every request)
        self._order: dict[tuple[str, str], list[Key]] = {}
        self._by_uid: dict[str, tuple[ResourceType, Key]] = {}
        self._dependents: dict[str, set[str]] = {}
        self.history = ChangeLog(history_window, history_limit, start_rv=self.rv)
        self.hooks: list[Callable[[Change], None]] = []

    def table(self, stype: ResourceType) -> dict[Key, JsonObj]:
        return self._tables.setdefault(stype.storage, {})

    def keys_in_order(self, stype: ResourceType) -> list[Key]:
        """The table's keys, sorted; the list itself (read it at once and never change it)."""
        order = self._order.get(stype.storage)
        if order is None:
            order = self._order[stype.storage] = sorted(self.table(stype))
        return order

    def find_uid(self, uid: str) -> tuple[ResourceType, JsonObj] | None:
        found = self._by_uid.get(uid)
        if found is None:
            return None
        stype, key = found
        return stype, self.table(stype)[key]

    def dependents(self, uid: str) -> list[tuple[ResourceType, JsonObj]]:
        found = (self.find_uid(u) for u in sorted(self._dependents.get(uid, ())))
        return [d for d in found if d is not None]

    def commit(self, stype: ResourceType, kind: str, obj: JsonObj, old: JsonObj | None) -> JsonObj:
        """Store (ADDED/MODIFIED) or remove (DELETED) ``obj``; returns it."""
        self.rv += 1
        m = obj["metadata"]
        m["resourceVersion"] = str(self.rv)
        key = (m.get("namespace", ""), m["name"])
        table = self.table(stype)
        uid = m["uid"]
        for owner in owner_uids(old) if old else []:
            self._dependents.get(owner, set()).discard(uid)
        order = self._order.get(stype.storage)
        if kind == "DELETED":
            if table.pop(key, None) is not None and order is not None:
                del order[bisect.bisect_left(order, key)]
            self._by_uid.pop(uid, None)
        else:
            if order is not None and key not in table:
                bisect.insort(order, key)
            table[key] = obj
            self._by_uid[uid] = (stype, key)
            for owner in owner_uids(obj):
                self._dependents.setdefault(owner, set()).add(uid)
        change = Change(kind, stype, obj, self.rv, self.clock.now(), old)
        self.history.record(change)
        for hook in self.hooks:
            hook(change)
        return obj

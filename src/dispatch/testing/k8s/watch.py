"""Change history and subscriptions: what watches (HTTP and in-process controllers) consume.

Guarantees:

- Every change to the store is one :class:`Change` with a strictly increasing resourceVersion.
- A :class:`Subscription` delivers, in resourceVersion order and without gaps, every change to
  the objects it selects after its starting point. Starting from ``None`` (or ``0``) it first
  delivers a synthetic ``ADDED`` for each existing selected object (the "initial events").
- A subscription starting from a resourceVersion older than the compaction point fails with
  410 Expired (``too old resource version: N (M)``).
- With a selector, an object that stops matching is delivered as ``DELETED`` and one that starts
  matching as ``ADDED``, as the API server's watch cache does.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from dispatch import jsontext
from dispatch.testing.k8s.errors import too_old
from dispatch.testing.k8s.resources import ResourceType
from dispatch.testing.k8s.selectors import FieldSelector, LabelSelector

JsonObj = dict[str, Any]


@dataclass(frozen=True, eq=False)
class Change:
    """One change to one stored object. ``obj`` and ``old`` are read-only snapshots."""

    type: str  # ADDED, MODIFIED, DELETED
    rtype: ResourceType  # the storage version
    obj: JsonObj
    rv: int
    time: float
    old: JsonObj | None = None
    _wire: dict[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace", ""))

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    def wire(self, key: str, event_type: str, render: Callable[[JsonObj], JsonObj]) -> bytes:
        """The JSON line of this change for one representation, encoded once and cached."""
        cache_key = f"{key}/{event_type}"
        line = self._wire.get(cache_key)
        if line is None:
            payload = {"type": event_type, "object": render(self.obj)}
            line = jsontext.encode(payload) + b"\n"
            self._wire[cache_key] = line
        return line


@dataclass
class Selection:
    """Which objects a subscription wants: storage types, namespace, selectors."""

    storages: frozenset[tuple[str, str]] | None = None  # None = every resource
    namespace: str | None = None
    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)

    def matches_object(self, rtype: ResourceType, obj: JsonObj) -> bool:
        if self.storages is not None and rtype.storage not in self.storages:
            return False
        meta = obj["metadata"]
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta.get("labels")) and self.fields.matches(obj)

    def translate(self, change: Change) -> str | None:
        """The event type this subscription sees for ``change``, or None to skip it."""
        now = self.matches_object(change.rtype, change.obj)
        if change.type != "MODIFIED" or change.old is None:
            return change.type if now else None
        before = self.matches_object(change.rtype, change.old)
        if now and before:
            return "MODIFIED"
        if now:
            return "ADDED"
        return "DELETED" if before else None


class Subscription:
    """A stream of (event type, change) for one selection. Iterate with ``async for``."""

    def __init__(self, selection: Selection, on_close: Callable[[Subscription], None]) -> None:
        self.selection = selection
        self._queue: asyncio.Queue[tuple[str, Change] | None] = asyncio.Queue()
        self._on_close = on_close
        self.closed = False

    def offer(self, change: Change) -> None:
        event_type = self.selection.translate(change)
        if event_type is not None and not self.closed:
            self._queue.put_nowait((event_type, change))

    def offer_initial(self, change: Change) -> None:
        self._queue.put_nowait(("ADDED", change))

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    async def next(self) -> tuple[str, Change] | None:
        """The next event, or None once closed."""
        if self.closed and self._queue.empty():
            return None
        return await self._queue.get()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)
            self._on_close(self)

    def __aiter__(self) -> AsyncIterator[tuple[str, Change]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[tuple[str, Change]]:
        while True:
            item = await self.next()
            if item is None:
                return
            yield item


class ChangeLog:
    """Recent changes, compacted by age (``window`` seconds of emulator time) and count."""

    def __init__(self, window: float, limit: int, start_rv: int = 1) -> None:
        self.window = window
        self.limit = limit
        self._changes: deque[Change] = deque()
        self.compacted_rv = start_rv  # a watch from an rv below this is 410 Gone
        self._subscriptions: list[Subscription] = []

    def record(self, change: Change) -> None:
        self._changes.append(change)
        for sub in list(self._subscriptions):
            sub.offer(change)
        self.compact_older_than(change.time - self.window)
        while len(self._changes) > self.limit:
            self.compacted_rv = self._changes.popleft().rv

    def compact_older_than(self, cutoff: float) -> None:
        while self._changes and self._changes[0].time < cutoff:
            self.compacted_rv = self._changes.popleft().rv

    def compact(self, current_rv: int) -> None:
        """Forget every change: watches must start from ``current_rv`` or later."""
        self._changes.clear()
        self.compacted_rv = current_rv

    def subscribe(
        self, selection: Selection, since: int | None, initial: list[tuple[ResourceType, JsonObj]]
    ) -> Subscription:
        """Start a subscription. ``initial`` are the current objects, used when ``since`` is
        None or 0; otherwise changes after ``since`` are replayed from history."""
        if since and since < self.compacted_rv:
            raise too_old(since, self.compacted_rv)
        sub = Subscription(selection, self._subscriptions.remove)
        if not since:
            for rtype, obj in initial:
                if selection.matches_object(rtype, obj):
                    rv = int(obj["metadata"]["resourceVersion"])
                    sub.offer_initial(Change("ADDED", rtype, obj, rv, 0.0))
        else:
            for change in self._changes:
                if change.rv > since:
                    sub.offer(change)
        self._subscriptions.append(sub)
        return sub

    @property
    def subscriptions(self) -> int:
        return len(self._subscriptions)

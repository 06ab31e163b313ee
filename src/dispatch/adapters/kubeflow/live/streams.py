"""The evidence streams: one list+watch per object kind (and namespace), for every attempt.

``Streams`` runs a stream for each kind of ``api.kinds.watched_kinds`` in each namespace it is
asked to ``cover`` (Nodes once for the cluster) and hands every object state it sees to
``seen`` (the ledger). Guarantees:

* **One stream per kind and namespace**, label-selected where the labels allow
  (``api.kinds``), however many attempts are followed. No per-job request.
* **Resumed by resourceVersion**: a stream the server ends (its ``timeoutSeconds``) or that
  drops or fails continues from the last version seen, bookmarks included, so every change in
  between is still delivered. A **410 Gone** (that version is compacted) **lists again**;
  objects the new list lacks are handed over as deleted (their last state), because their
  deletion happened while nobody watched; what was created and deleted in that gap is lost.
  Failures back off exponentially (``BACKOFF``, with the injected ``sleep``) and never end the
  streams; a kind the cluster does not serve (404) or may not be read (403) is skipped, and
  the refusal is logged as a warning.
* Each object's version and last state are kept per stream (``last``, compacted and sharing
  unchanged parts with the state before, its writers' field ownership dropped: ``trim``), so
  a re-list hands over only what changed, and a deletion carries the object's last state.
  Lists are read in pages.
* How far each stream got (``version``), whether its watch is open (``is_open``) and when it
  last delivered (``delivered_at``) are what ``catchup`` proves positions with.
* ``behind()``: how late the streams run, measured on what dispatch itself creates: an
  object announced with ``created`` is timed until its stream delivers it.
* ``synced`` is set once every stream has made its first list (or was skipped), so a first
  judgement is not made on half the evidence.

Stream starts, resumptions, lists and stops are logged (``logging``, this module's logger):
debug for the routine, info for a re-list, warning for a kind refused or not served.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dispatch.adapters.kubeflow.api.client import Connection, Gone, Session
from dispatch.adapters.kubeflow.api.kinds import WatchedKind
from dispatch.adapters.kubeflow.api.listwatch import list_pages, watch_raw
from dispatch.adapters.kubeflow.live.attribution import TrainJobRef
from dispatch.adapters.kubeflow.live.laststate import LastStates, share, trim, version_of
from dispatch.adapters.kubeflow.objects import dig, text_of
from dispatch.aio import Sleep, stop
from dispatch.clock import Clock
from dispatch.log import logger
from dispatch.model import Forbidden, NotFound, SchedulerUnavailable, TransientError

log = logger(__name__)

#: objects created waiting to be delivered by their stream, at most (``created``)
MAX_CREATED = 4096
#: seconds a lag measured counts (``behind``)
LAG_KEPT = 1.0
#: seconds a watch request lasts on the server before it is resumed
WATCH_SECONDS = 300
#: first and longest pause (real seconds) after a failed list or watch
BACKOFF = (0.2, 5.0)

#: one stream: the watched kind's name and its namespace (None: cluster-scoped)
Stream = tuple[str, str | None]
#: where an observed object state goes (``deleted``: its last state before deletion)
Seen = Callable[..., list[TrainJobRef]]


def key_of(obj: Mapping[str, Any]) -> str:
    """An object's key in a stream: ``namespace/name``."""
    return text_of(dig(obj, "metadata", "namespace")) + "/" + text_of(dig(obj, "metadata", "name"))


class Streams:
    """The list+watch streams of one cluster (see the module docstring)."""

    def __init__(
        self,
        connection: Connection,
        clock: Clock,
        kinds: tuple[WatchedKind, ...],
        seen: Seen,
        *,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.connection = connection
        self.clock = clock
        self.kinds = kinds
        self.sleep = sleep
        self.synced = asyncio.Event()
        #: per stream: each object's version and last state
        self.last = LastStates()
        self._seen = seen
        self._tasks: list[asyncio.Task[None]] = []
        self._streams: dict[Stream, tuple[WatchedKind, asyncio.Task[None]]] = {}
        self._versions: dict[Stream, int | None] = {}  # per live stream; None while listing
        self._open: set[Stream] = set()  # streams whose watch is open
        self._delivered_at: dict[Stream, float] = {}
        self._pending_sync = 0
        self._namespaces: set[str] = set()
        self._session: Session | None = None
        self._session_ready = asyncio.Event()
        self._opened: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._created: dict[tuple[str, str], float] = {}  # see ``created``
        self._lag = (0.0, -math.inf)  # the last lag measured, and when

    # --- what catch-up reads ----------------------------------------------------------------

    def positions(self) -> Mapping[Stream, int | None]:
        """Every live stream's version (None while it lists); read-only."""
        return self._versions

    def followed(self) -> list[tuple[Stream, WatchedKind]]:
        """Every stream started, with its kind (a skipped one too)."""
        return [(stream, entry[0]) for stream, entry in self._streams.items()]

    def kind(self, stream: Stream) -> WatchedKind | None:
        entry = self._streams.get(stream)
        return entry[0] if entry is not None else None

    def version(self, stream: Stream) -> int | None:
        """The newest version ``stream`` delivered (None: listing, skipped or unknown)."""
        return self._versions.get(stream)

    def is_open(self, stream: Stream) -> bool:
        return stream in self._open

    def delivered_at(self, stream: Stream) -> float | None:
        """When ``stream`` last delivered anything (an event or a bookmark), if ever."""
        return self._delivered_at.get(stream)

    def proved(self, stream: Stream, version: int) -> None:
        """A check proved ``stream`` has delivered everything up to ``version``."""
        before = self._versions.get(stream)
        if before is not None and version > before:
            self._versions[stream] = version

    # --- running ----------------------------------------------------------------------------

    def cover(self, namespaces: Iterable[str]) -> None:
        """Make sure the streams of these namespaces run (Nodes once). Call on the loop that
        will consume them; they live until ``close``."""
        new = set(namespaces) - self._namespaces
        if not new and self._opened is not None:
            return
        if self._opened is None:
            self._opened = asyncio.ensure_future(self._hold_session())
        self._namespaces |= new
        for namespace in sorted(new):
            for kind in self.kinds:
                if kind.resource.namespaced:
                    self._spawn(kind, namespace)
        for kind in self.kinds:
            if not kind.resource.namespaced and (kind.name, None) not in self._streams:
                self._spawn(kind, None)

    def relist(self, stream: Stream) -> None:
        """Replace the stream's watch by a list and a new watch (a watch stuck or lagging)."""
        entry = self._streams.get(stream)
        if entry is None or self._versions.get(stream) is None:
            return  # gone, or listing already
        kind, task = entry
        log.info("%s: the watch did not catch up with a check's list; listing again", kind.name)
        task.cancel()
        self._tasks.remove(task)
        self._spawn(kind, stream[1], relist=True)

    def claim(self, ref: TrainJobRef, obj: Mapping[str, Any]) -> None:
        """An object kept before its TrainJob was known is now evidence for ``ref``."""
        kind, key = text_of(obj.get("kind")), key_of(obj)
        for stream, (watched, _) in self._streams.items():
            if watched.resource.kind == kind:
                self.last.claim(stream, key, ref)

    def created(self, kind: str, key: str) -> None:
        """An object of ``kind`` (a ``WatchedKind.name``) and ``key`` was created now (a
        start's TrainJob): when its stream delivers it, how late it came is the streams' lag
        (``behind``). At most ``MAX_CREATED`` wait, the oldest forgotten first."""
        if len(self._created) >= MAX_CREATED:
            del self._created[next(iter(self._created))]
        self._created[(kind, key)] = self.clock.now()

    def behind(self) -> float:
        """How late the last object ``created`` came in its stream, measured within the last
        ``LAG_KEPT`` seconds; else 0."""
        lag, at = self._lag
        return lag if self.clock.now() - at <= LAG_KEPT else 0.0

    def update(self, stream: Stream, key: str, obj: dict[str, Any]) -> None:
        """Hand over a new state of an object, trimmed and compacted, sharing its unchanged
        parts with the last one (the first, its equal parts with the stream's last state:
        ``laststate``), and keep it as the object's last state."""
        made = self._created.pop((stream[0], key), None) if self._created else None
        if made is not None:
            now = self.clock.now()
            self._lag = (now - made, now)
        last = self.last.state(stream, key)
        obj = share(trim(obj), last if last is not None else self.last.like(stream))
        self.last.keep(stream, key, obj, self._seen(obj))

    async def ready_session(self) -> Session:
        """The API session the streams share, once it is open (raises the connection's
        error, e.g. ``ConfigError``, if it could not be opened)."""
        while self._session is None:
            opened = self._opened
            if opened is None:
                raise SchedulerUnavailable("the evidence streams are not running")
            ready = asyncio.ensure_future(self._session_ready.wait())
            try:
                await asyncio.wait({ready, opened}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await stop(ready)
            if self._session is None and opened.done():
                opened.result()  # the connection's error
                raise SchedulerUnavailable("the evidence streams were closed")
        return self._session

    async def close(self) -> None:
        """Stop every stream and close the session."""
        self._stop.set()
        await stop(*self._tasks, self._opened, also=(TransientError,))
        self._tasks.clear()
        self._streams.clear()
        self._opened = None
        self._session = None
        self._session_ready.clear()
        self._namespaces.clear()

    # --- one stream -------------------------------------------------------------------------

    def _spawn(self, kind: WatchedKind, namespace: str | None, *, relist: bool = False) -> None:
        if not relist:  # a stream listing again was synced before
            self._pending_sync += 1
            self.synced.clear()
        task = asyncio.ensure_future(self._follow(kind, namespace, synced=relist))
        self._tasks.append(task)
        self._streams[(kind.name, namespace)] = (kind, task)

    async def _hold_session(self) -> None:
        async with self.connection.session() as session:
            self._session = session
            self._session_ready.set()
            await self._stop.wait()

    def _mark_synced(self, done: list[bool]) -> None:
        if not done[0]:
            done[0] = True
            self._pending_sync -= 1
            if self._pending_sync <= 0:
                self.synced.set()

    async def _follow(self, kind: WatchedKind, namespace: str | None, *, synced: bool) -> None:
        """List, then watch from the list's version; see the module docstring."""
        session = await self.ready_session()
        res, listed = kind.resource, [synced]
        stream = (kind.name, namespace)
        where = namespace or "the cluster"
        self._versions[stream] = None
        version: str | None = None
        pause = BACKOFF[0]
        log.debug("%s in %s: following", kind.name, where)
        try:
            while True:
                try:
                    if version is None:
                        version = await self._list(session, kind, stream)
                        self._advance(stream, version)
                        self._mark_synced(listed)
                        log.debug("%s in %s: listed at %s", kind.name, where, version)
                    self._open.add(stream)
                    async for event in watch_raw(
                        session,
                        res,
                        namespace,
                        label_selector=kind.selector,
                        resource_version=version,
                        timeout_seconds=WATCH_SECONDS,
                    ):
                        pause = BACKOFF[0]  # the stream works: a later drop starts afresh
                        obj = event.get("object") or {}
                        version = text_of(dig(obj, "metadata", "resourceVersion")) or version
                        if event.get("type") == "BOOKMARK":
                            self._advance(stream, version)
                            continue
                        if event.get("type") == "DELETED":
                            key = key_of(obj)
                            last = self.last.state(stream, key)
                            self.last.drop(stream, key)
                            self._seen(share(trim(obj), last), deleted=True)
                        else:
                            self.update(stream, key_of(obj), obj)
                        self._advance(stream, version)
                    pause = BACKOFF[0]  # the server ended the stream: resume from ``version``
                    log.debug("%s in %s: resumed from %s", kind.name, where, version)
                except Gone:
                    self._open.discard(stream)
                    version = None
                    log.info("%s in %s: its version is gone (410); listing again", kind.name, where)
                except (NotFound, Forbidden) as exc:
                    self._versions.pop(stream, None)
                    log.warning("%s in %s: not followed (%s)", kind.name, where, exc)
                    return
                except TransientError as exc:
                    self._open.discard(stream)
                    # resume from the last version seen: a re-list would miss what was
                    # created and deleted meanwhile; a version too old answers 410 (re-list)
                    log.info("%s in %s: %s; again in %.1fs", kind.name, where, exc, pause)
                    await self.sleep(pause)
                    pause = min(pause * 2, BACKOFF[1])
        finally:
            self._open.discard(stream)
            self._mark_synced(listed)
            log.debug("%s in %s: stopped", kind.name, where)

    def _advance(self, stream: Stream, version: str) -> None:
        self._delivered_at[stream] = self.clock.now()
        number = int(version) if version.isdigit() else None
        before = self._versions.get(stream)
        if number is not None and (before is None or number > before):
            self._versions[stream] = number

    async def _list(self, session: Session, kind: WatchedKind, stream: Stream) -> str:
        """List (page by page): hand over the states not handed over before, and as deleted
        the objects known before and now absent (those whose last state was kept); the
        list's version."""
        present: set[str] = set()
        version = ""
        async for page in list_pages(
            session, kind.resource, stream[1], label_selector=kind.selector
        ):
            version = version or text_of(dig(page, "metadata", "resourceVersion"))
            for item in page.get("items") or []:
                if not isinstance(item, dict):
                    continue
                key = key_of(item)
                present.add(key)
                if self.last.version(stream, key) != version_of(item) or not version_of(item):
                    self.update(stream, key, item)  # a state already filed is not filed again
        for key in self.last.keys(stream) - present:
            last = self.last.state(stream, key)
            self.last.drop(stream, key)
            if last is not None:
                self._seen(last, deleted=True)
        return version

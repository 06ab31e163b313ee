"""Evidence capture: one list+watch stream per object kind (and namespace) for every attempt.

``Capture`` runs the streams of ``api.kinds.watched_kinds`` for the namespaces it is asked to
cover and files every object state it sees, the moment it sees it, as an ``object_evidence``
record under the TrainJob it concerns (``attribution.Attribution``). Guarantees:

* **One stream per kind and namespace**, label-selected where the labels allow (``api.kinds``),
  however many attempts are followed; Nodes once for the cluster. No per-job request.
* **Resumed by resourceVersion**: a stream the server ends (its ``timeoutSeconds``) or that
  drops or fails continues from the last version seen, bookmarks included, so every change in
  between is still delivered. A **410 Gone** (that version is compacted) **lists again**;
  objects the new list lacks are filed as deleted (their last state), because their deletion
  happened while nobody watched; what was created and deleted in that gap is lost. Failures back off exponentially
  (``BACKOFF``, with the injected ``sleep``) and never end the capture; a kind the cluster
  does not serve (404) or may not be read (403) is skipped.
* Records are de-duplicated by key (kind, object, resourceVersion, deleted), so a re-list
  files nothing twice. ``take(ref)`` hands out the records filed since the last take;
  ``records(ref)`` every record kept (the attempt's whole evidence, seeded ones included).
* **Memory follows the attempts still open, not every attempt seen**: ``release(ref)`` (the
  attempt's outcome is final) drops its records and the last states kept for it alone
  (``laststate``; their keys and versions stay, so nothing is filed twice); every state kept
  is compacted (its keys and short strings shared with all other objects) and successive
  states of an object share their unchanged parts; lists are read in pages.
* ``position()``/``caught_up(v, since)``: how far the streams got, so a judgement can wait
  until every kind has delivered what happened before it (streams of different kinds lag
  differently). A stream is caught up with ``v`` once it delivered ``v`` or later. A quiet
  stream delivers nothing (its bookmarks come about once a minute), so an open stream still
  behind ``v`` ``QUIET`` seconds after ``since`` that delivered nothing for ``QUIET`` seconds,
  or a stream still behind ``RELIST_EVERY`` seconds after ``since`` and found resuming (one
  dropped again and again, too soon each time to catch up), is **checked**: a list (a
  consistent read at its version ``L``, of each object's metadata alone: names and versions
  are all it compares) whose every object is exactly the version the stream last delivered,
  with none missing, proves the stream has delivered everything up to ``L``;
  it files nothing and the watch stays open, so no state between is skipped. A stream is
  checked again only after a pause that grows with what its list costs (``QUIET`` to
  ``RELIST_EVERY`` seconds; the lesser of its last two checks' durations, so that one check
  slowed by a busy loop, or by the checks of other streams at the same moment, does not hold
  every outcome waiting on that stream back for the longest pause). A check that finds
  changes the watch has not delivered leaves them to the watch, which delivers within
  milliseconds when healthy; if
  by the next check it has still not reached that list's version, the watch is stuck or lags
  (a half-open connection, or one too slow for the changes) and the stream lists again.
  (Objects created and deleted before a check's list are invisible to it; their events still
  arrive.) Streams still delivering are left to it.
* **Checks for the TrainJobs waiting, not the whole stream**, once a stream knows more than
  ``NARROW_FROM`` objects and its kind has a label naming each object's TrainJob
  (``api.kinds.WatchedKind.narrow``): the check lists only the objects of the TrainJobs whose
  outcome waits on that stream (one request for all of them) and, when it finds each at the
  version last delivered and none missing, proves the stream caught up *for those TrainJobs*
  (``caught_up(..., ref)``); the stream's own position does not move. A TrainJob's outcome
  does not wait on the streams of other namespaces at all, nor on the Workload stream when
  Kueue does not manage its TrainJob (``api.kinds.kueue_may_manage``: no queue label, never
  suspended, no Kueue runtime patch, in every state filed). A check for a few TrainJobs that
  finds a change, or one of their objects missing (not labelled as expected, say), makes
  the stream's next check a whole one.
* **A busy loop is not a quiet stream.** While the event loop runs late (the supervisor's own
  work, a large list being decoded), watch events wait unread in their sockets and every
  stream looks quiet. The loop's lateness is measured (``BEAT``), and each wait above
  (``QUIET``) is lengthened by the lateness seen in the last second or so (``lag``): checks are
  not made, and do not add their own load, just because the supervisor fell behind.
* ``synced`` is set once every stream has made its first list (or was skipped), so a first
  judgement is not made on half the evidence. ``changed`` is set whenever a record is filed,
  a check ends, or a wait above ends (``QUIET``, a check's pause): an outcome waiting on the
  streams is judged again at that moment, not at its consumer's next periodic look.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from dispatch.adapters.kubeflow.api.client import Connection, Gone, Session
from dispatch.adapters.kubeflow.api.kinds import (
    NAME,
    UID,
    WORKLOADS,
    WatchedKind,
    kueue_may_manage,
    watched_kinds,
)
from dispatch.adapters.kubeflow.api.listwatch import list_pages, watch_raw
from dispatch.adapters.kubeflow.build.trainjob import LABEL_JOB
from dispatch.adapters.kubeflow.causes.evidence import DELETED_SUFFIX, object_evidence
from dispatch.adapters.kubeflow.live.attribution import Attribution, TrainJobRef
from dispatch.adapters.kubeflow.live.laststate import LastStates, share, version_of
from dispatch.adapters.kubeflow.objects import dig, text_of
from dispatch.aio import stop
from dispatch.clock import Clock
from dispatch.model import Evidence, Forbidden, NotFound, TransientError

#: seconds a watch request lasts on the server before it is resumed
WATCH_SECONDS = 300
#: first and longest pause (real seconds) after a failed list or watch
BACKOFF = (0.2, 5.0)
#: seconds a terminal outcome waits, and a stream must have delivered nothing, before the
#: stream is checked (a healthy API server delivers watch events within milliseconds)
QUIET = 0.25
#: a stream is checked again at most after this many seconds, or sooner when its list costs
#: less than a ``1/CHECK_SHARE`` of the pause; a stream found resuming is checked once an
#: outcome has waited this long for it
RELIST_EVERY = 2.0
CHECK_SHARE = 10
#: real seconds between the beats that measure how late the event loop runs
BEAT = 0.05
#: share of the loop's lateness still counted one beat later (it fades within a second or so)
LAG_FADE = 0.85
#: lateness below this many seconds is not counted (a loop always runs a little late)
LAG_FLOOR = 0.05
#: a stream that knows more objects than this is checked for the waiting TrainJobs alone
NARROW_FROM = 100

Sleep = Callable[[float], Awaitable[None]]
#: one stream: the watched kind's name and its namespace (None: cluster-scoped)
Stream = tuple[str, str | None]


class Capture:
    """The evidence streams of one cluster (see the module docstring)."""

    def __init__(
        self,
        connection: Connection,
        cluster: str,
        clock: Clock,
        *,
        sleep: Sleep = asyncio.sleep,
        kinds: tuple[WatchedKind, ...] | None = None,
    ) -> None:
        self.connection = connection
        self.clock = clock
        self.sleep = sleep
        self.kinds = kinds if kinds is not None else watched_kinds(cluster)
        self.attribution = Attribution()
        self.synced = asyncio.Event()
        self.changed = asyncio.Event()
        self.errors: list[str] = []  # the latest stream failures, for diagnostics
        self._records: dict[TrainJobRef, list[Evidence]] = {}
        self._keys: dict[TrainJobRef, set[str]] = {}
        self._fresh: dict[TrainJobRef, list[Evidence]] = {}
        self._trainjob: dict[TrainJobRef, tuple[Mapping[str, Any], bool]] = {}
        self._newest: dict[TrainJobRef, int] = {}  # the newest resourceVersion filed per ref
        self._queued: set[TrainJobRef] = set()  # Kueue may manage them (a Workload may exist)
        self._nodes: dict[str, Mapping[str, Any]] = {}
        self._node_sent: set[tuple[TrainJobRef, str, str]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._pending_sync = 0
        self._namespaces: set[str] = set()
        self._session: Session | None = None
        self._opened: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._versions: dict[Stream, int | None] = {}  # per live stream
        self._open: set[Stream] = set()  # streams whose watch is open
        self._streams: dict[Stream, tuple[WatchedKind, asyncio.Task[None]]] = {}
        self._last = LastStates()  # per stream: each object's version and last state
        self._delivered_at: dict[Stream, float] = {}
        self._checks: dict[Stream, asyncio.Task[None]] = {}  # checks in flight
        self._check_due: dict[Stream, float] = {}  # when a stream may be checked again
        self._check_cost: dict[Stream, float] = {}  # how long its last check took
        self._short_of: dict[Stream, int] = {}  # a check's list the watch had not reached
        self._waiting: dict[Stream, set[TrainJobRef]] = {}  # to check for these alone
        self._whole: set[Stream] = set()  # a check of the whole stream is wanted
        self._proven: dict[TrainJobRef, dict[Stream, int]] = {}  # caught up for one ref
        self.lag = 0.0  # how late the event loop ran lately, in seconds (see ``_beat``)
        self._beating: asyncio.Task[None] | None = None
        self._wake: asyncio.TimerHandle | None = None  # sets ``changed`` when a wait ends
        self._wake_due = math.inf

    # --- records ----------------------------------------------------------------------------

    def seed(self, ref: TrainJobRef, records: Iterable[Evidence]) -> None:
        """Evidence recorded earlier (e.g. by a previous process) for this TrainJob."""
        for record in records:
            self._file(ref, record, fresh=False)

    def records(self, ref: TrainJobRef) -> list[Evidence]:
        return list(self._records.get(ref, ()))

    def take(self, ref: TrainJobRef) -> tuple[Evidence, ...]:
        return tuple(self._fresh.pop(ref, ()))

    def give_back(self, ref: TrainJobRef, records: Iterable[Evidence]) -> None:
        """Undo a ``take`` whose records were not delivered: the next take returns them first."""
        returned = list(records)
        if returned:
            self._fresh[ref] = [*returned, *self._fresh.get(ref, ())]
            self.changed.set()

    def fresh_refs(self) -> list[TrainJobRef]:
        """The TrainJobs with records filed since their last ``take``."""
        return list(self._fresh)

    def latest_trainjob(self, ref: TrainJobRef) -> tuple[Mapping[str, Any] | None, bool]:
        """The TrainJob as last filed, and whether that record is its deletion (once
        released: its metadata, ``spec.suspend`` and ``status.conditions`` only)."""
        return self._trainjob.get(ref, (None, False))

    def _file(self, ref: TrainJobRef, record: Evidence, *, fresh: bool = True) -> None:
        keys = self._keys.setdefault(ref, set())
        if record.key in keys:
            return
        keys.add(record.key)
        self._records.setdefault(ref, []).append(record)
        if record.kind == "trainjob":
            self._trainjob[ref] = (record.data, record.key.endswith(DELETED_SUFFIX))
        if ref not in self._queued and (
            record.kind == "workload"
            or (record.kind == "trainjob" and kueue_may_manage(record.data))
        ):
            self._queued.add(ref)  # for good: later states do not undo what one showed
        version = version_of(record.data)
        if version.isdigit() and int(version) > self._newest.get(ref, 0):
            self._newest[ref] = int(version)
        if fresh:
            self._fresh.setdefault(ref, []).append(record)
            self.changed.set()

    def release(self, ref: TrainJobRef) -> None:
        """The attempt of TrainJob ``ref`` has its final outcome: drop the records kept for it
        and the last states kept for it alone (keys stay: nothing is filed twice). Records
        filed afterwards are kept again (re-run detection reads them) until the next release.
        Of the TrainJob only what retirement reads stays (``latest_trainjob``)."""
        self._records.pop(ref, None)
        self._keys.pop(ref, None)  # a record filed twice is harmless now: stored once by key
        self._newest.pop(ref, None)
        self._stop_waiting(ref)
        self._last.release(ref)
        trainjob = self._trainjob.get(ref)
        if trainjob is not None:
            self._trainjob[ref] = (_retirement_view(trainjob[0]), trainjob[1])

    def forget(self, ref: TrainJobRef) -> None:
        """Drop everything kept for a TrainJob dispatch no longer follows."""
        for table in (self._records, self._keys, self._fresh, self._trainjob, self._newest):
            table.pop(ref, None)
        self._queued.discard(ref)
        self._stop_waiting(ref)
        self._node_sent = {k for k in self._node_sent if k[0] != ref}
        self.attribution.forget(ref)

    def _stop_waiting(self, ref: TrainJobRef) -> None:
        """No outcome of ``ref`` waits on the streams any more: drop its checks and proofs."""
        self._proven.pop(ref, None)
        for waiting in self._waiting.values():
            waiting.discard(ref)

    def seen(self, obj: Mapping[str, Any], *, deleted: bool = False) -> list[TrainJobRef]:
        """File one observed object state (``deleted``: its last state before deletion);
        returns the TrainJobs it was filed for."""
        at = self.clock.now()
        kind = text_of(obj.get("kind"))
        name = text_of(dig(obj, "metadata", "name"))
        if kind == "Node":
            self._nodes[name] = obj
        refs = self.attribution.assign(obj)
        if not refs and kind != "Node":
            self.attribution.keep_orphan(obj)
        record = object_evidence(obj, at, deleted=deleted)
        for ref in refs:
            self._file(ref, record)
        if self.attribution.new_trainjob:
            for ref, orphan in self.attribution.adopt_orphans():
                self._file(ref, object_evidence(orphan, at))
                self._claim(ref, orphan)
                self._node_of(ref, orphan, at)
        for ref in refs:
            self._node_of(ref, obj, at)
        return refs

    def _claim(self, ref: TrainJobRef, obj: Mapping[str, Any]) -> None:
        """An object kept before its TrainJob was known is now evidence for ``ref``."""
        kind, key = text_of(obj.get("kind")), _key_of(obj)
        for stream, (watched, _) in self._streams.items():
            if watched.resource.kind == kind:
                self._last.claim(stream, key, ref)

    def _node_of(self, ref: TrainJobRef, obj: Mapping[str, Any], at: float) -> None:
        """A pod's node, filed for its TrainJob the first time the pod is seen on it."""
        if text_of(obj.get("kind")) != "Pod":
            return
        node = text_of(dig(obj, "spec", "nodeName"))
        version = text_of(dig(self._nodes.get(node), "metadata", "resourceVersion"))
        if node in self._nodes and (ref, node, version) not in self._node_sent:
            self._node_sent.add((ref, node, version))
            self._file(ref, object_evidence(self._nodes[node], at))

    # --- streams ----------------------------------------------------------------------------

    def cover(self, namespaces: Iterable[str]) -> None:
        """Make sure the streams of these namespaces run (Nodes once). Call on the loop that
        will consume the capture; the streams live until ``close``."""
        new = set(namespaces) - self._namespaces
        if not new and self._opened is not None:
            return
        if self._opened is None:
            self._opened = asyncio.ensure_future(self._hold_session())
            self._beating = asyncio.ensure_future(self._beat())
        self._namespaces |= new
        for namespace in sorted(new):
            for kind in self.kinds:
                if kind.resource.namespaced:
                    self._spawn(kind, namespace)
        for kind in self.kinds:
            if not kind.resource.namespaced and (kind.name, None) not in self._streams:
                self._spawn(kind, None)

    def _spawn(self, kind: WatchedKind, namespace: str | None, *, relist: bool = False) -> None:
        if not relist:  # a stream listing again was synced before
            self._pending_sync += 1
            self.synced.clear()
        task = asyncio.ensure_future(self._follow(kind, namespace, synced=relist))
        self._tasks.append(task)
        self._streams[(kind.name, namespace)] = (kind, task)

    def _check_behind(self, position: int, since: float, ref: TrainJobRef | None) -> None:
        """Check the streams behind ``position`` that are open and quiet, or that have kept an
        outcome waiting since ``since`` for ``RELIST_EVERY`` seconds while resuming again and
        again (see the module docstring); for ``ref`` alone where the stream allows."""
        now = self.clock.now()
        overdue = now - since >= RELIST_EVERY
        proven = self._proven.get(ref, {}) if ref is not None else {}
        for stream, (kind, _) in list(self._streams.items()):
            version = self._versions.get(stream)
            if version is None or version >= position or proven.get(stream, -1) >= position:
                continue  # listing already, or caught up
            if not self._may_hold(stream, ref):
                continue
            if stream in self._open:
                quiet_at = self._delivered_at.get(stream, -math.inf) + QUIET + self._late()
                if now < quiet_at:
                    self._wake_in(quiet_at - now)
                    continue  # delivering: it gets past ``position`` by itself
            elif not overdue:
                self._wake_in(since + RELIST_EVERY - now)
                continue  # resuming: it gets past ``position`` by itself, normally
            if ref is not None and self._narrow_value(kind, stream, ref):
                self._waiting.setdefault(stream, set()).add(ref)
            else:
                self._whole.add(stream)
            if stream in self._checks:
                continue  # its end wakes the waiting judgements
            due = self._check_due.get(stream, -math.inf)
            if now < due:
                self._wake_in(due - now)
                continue
            self._checks[stream] = asyncio.ensure_future(self._check(kind, stream))

    def _narrow_value(self, kind: WatchedKind, stream: Stream, ref: TrainJobRef) -> str:
        """The value of ``kind``'s narrow label on ``ref``'s objects, if ``stream`` is worth
        checking for ``ref`` alone (empty: check it whole)."""
        if not kind.narrow or self._last.size(stream) <= NARROW_FROM:
            return ""
        if kind.narrow_by == NAME:
            return ref[1]
        if kind.narrow_by == UID:
            return self.attribution.trainjobs.get(ref, "")
        labels = dig(self._trainjob.get(ref, ({}, False))[0], "metadata", "labels")
        return text_of(labels.get(LABEL_JOB)) if isinstance(labels, Mapping) else ""

    async def _check(self, kind: WatchedKind, stream: Stream) -> None:
        began = self.clock.now()
        waiting = self._waiting.pop(stream, set())
        values = {ref: self._narrow_value(kind, stream, ref) for ref in waiting}
        if stream in self._whole or not all(values.values()):
            self._whole.discard(stream)  # a whole check serves the waiting TrainJobs too
            values = {}
        refs = set(values)
        try:
            unchanged, listed = await self._unchanged_until(kind, stream, values)
        except TransientError as exc:
            self._note(f"{kind.name}: check failed ({exc})")
            return
        finally:
            self._checks.pop(stream, None)
            now = self.clock.now()
            cost = now - began  # the lesser of the last two: one check slowed by a busy
            least = min(cost, self._check_cost.get(stream, cost))  # loop holds back no other
            self._check_cost[stream] = cost
            pause = min(RELIST_EVERY, max(QUIET, CHECK_SHARE * least))
            self._check_due[stream] = now + pause
            self.changed.set()  # what waited on this stream may be caught up now
        before = self._versions.get(stream)
        if unchanged and listed is not None:
            self._short_of.pop(stream, None)
            for ref in refs:
                proven = self._proven.setdefault(ref, {})
                proven[stream] = max(listed, proven.get(stream, listed))
            if not refs and before is not None and listed > before:
                self._versions[stream] = listed
            return
        if refs:
            self._whole.add(stream)  # changes, or objects not labelled as expected: check whole
        short_of = self._short_of.get(stream)
        if short_of is not None and (before is None or before < short_of):
            self._short_of.pop(stream, None)  # still short of the last check's list: stuck
            self._relist(kind, stream)
        elif listed is not None:
            self._short_of[stream] = listed

    async def _unchanged_until(
        self, kind: WatchedKind, stream: Stream, values: Mapping[TrainJobRef, str]
    ) -> tuple[bool, int | None]:
        """(whether the stream has delivered every change up to its list's version, that
        version): every object of the list at the version last delivered, none missing; of
        the objects of the TrainJobs in ``values`` alone (their narrow label values) if any.
        Files nothing."""
        session = await self._ready_session()
        present: set[str] = set()
        listed: int | None = None
        differs = False
        selector = kind.selector
        known = self._last.keys(stream)
        if values:
            selector = kind.narrowed(values.values())
            known = self._last.keys_of(stream, set(values), kind.narrow, set(values.values()))
        pages = list_pages(
            session, kind.resource, stream[1], label_selector=selector, metadata_only=True
        )
        async for page in pages:
            if listed is None:
                version = text_of(dig(page, "metadata", "resourceVersion"))
                if not version.isdigit():
                    return False, None
                listed = int(version)
            for item in page.get("items") or []:
                if not isinstance(item, dict):
                    continue
                key = _key_of(item)
                present.add(key)
                differs = differs or self._last.version(stream, key) != version_of(item)
        if listed is None:
            return False, None
        reached = self._versions.get(stream)
        if reached is not None and reached >= listed:
            return True, listed  # the watch delivered past the list meanwhile
        return not differs and not known - present, listed

    def _relist(self, kind: WatchedKind, stream: Stream) -> None:
        """Replace the stream's watch by a list and a new watch."""
        entry = self._streams.get(stream)
        if entry is None or self._versions.get(stream) is None:
            return  # gone, or listing already
        task = entry[1]
        task.cancel()
        self._tasks.remove(task)
        self._spawn(kind, stream[1], relist=True)

    async def _beat(self) -> None:
        """Measure how late the loop runs: how much longer than ``BEAT`` a sleep of ``BEAT``
        takes (real time), kept as ``lag`` and fading by ``LAG_FADE`` every beat."""
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            await asyncio.sleep(BEAT)
            late = max(0.0, loop.time() - began - BEAT)
            self.lag = max(late, self.lag * LAG_FADE)

    def _late(self) -> float:
        return self.lag if self.lag >= LAG_FLOOR else 0.0

    async def _hold_session(self) -> None:
        async with self.connection.session() as session:
            self._session = session
            await self._stop.wait()

    async def _ready_session(self) -> Session:
        while self._session is None:
            if self._opened is not None and self._opened.done():
                self._opened.result()  # raise the connection's error (e.g. ConfigError)
            await asyncio.sleep(0.01)
        return self._session

    def _mark_synced(self, done: list[bool]) -> None:
        if not done[0]:
            done[0] = True
            self._pending_sync -= 1
            if self._pending_sync <= 0:
                self.synced.set()

    async def _follow(self, kind: WatchedKind, namespace: str | None, *, synced: bool) -> None:
        """List, then watch from the list's version; see the module docstring."""
        session = await self._ready_session()
        res, listed = kind.resource, [synced]
        stream = (kind.name, namespace)
        self._versions[stream] = None
        version: str | None = None
        pause = BACKOFF[0]
        try:
            while True:
                try:
                    if version is None:
                        version = await self._list(session, kind, stream)
                        self._advance(stream, version)
                        self._mark_synced(listed)
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
                            key = _key_of(obj)
                            last = self._last.state(stream, key)
                            self._last.drop(stream, key)
                            self.seen(share(obj, last), deleted=True)
                        else:
                            self._update(stream, _key_of(obj), obj)
                        self._advance(stream, version)
                    pause = BACKOFF[0]  # the server ended the stream: resume from ``version``
                except Gone:
                    self._open.discard(stream)
                    version = None
                except (NotFound, Forbidden) as exc:
                    self._note(f"{kind.name}: not followed ({exc})")
                    self._versions.pop(stream, None)
                    return
                except TransientError as exc:
                    self._open.discard(stream)
                    # resume from the last version seen: a re-list would miss what was
                    # created and deleted meanwhile; a version too old answers 410 (re-list)
                    self._note(f"{kind.name}: {exc}; again in {pause:.1f}s")
                    await self.sleep(pause)
                    pause = min(pause * 2, BACKOFF[1])
        finally:
            self._open.discard(stream)
            self._mark_synced(listed)

    def _advance(self, stream: Stream, version: str) -> None:
        self._delivered_at[stream] = self.clock.now()
        number = int(version) if version.isdigit() else None
        before = self._versions.get(stream)
        if number is not None and (before is None or number > before):
            self._versions[stream] = number

    def position(self, ref: TrainJobRef | None = None) -> int | None:
        """The newest resourceVersion any stream has reached, or any record of ``ref`` shows
        (those read once, outside the streams, may be newer; None: not comparable)."""
        known = [v for v in self._versions.values() if v is not None]
        if not known:
            return None
        return max(*known, self._newest.get(ref, 0)) if ref is not None else max(known)

    def caught_up(
        self, position: int, since: float | None = None, ref: TrainJobRef | None = None
    ) -> bool:
        """Every stream has delivered everything up to ``position`` (resourceVersions are
        etcd revisions in practice: one counter for all kinds; opaque ones never compare), or
        ``QUIET`` seconds after ``since``, open quiet streams still behind are checked (None:
        never). With ``ref``: every stream that may hold ``ref``'s objects, each caught up
        or proved caught up for ``ref`` (see the module docstring)."""
        proven = self._proven.get(ref, {}) if ref is not None else {}
        for stream, version in self._versions.items():
            if version is not None and (version >= position or proven.get(stream, -1) >= position):
                continue
            if version is not None and not self._may_hold(stream, ref):
                continue
            break
        else:
            return True
        if since is not None:
            wait = since + QUIET + self._late() - self.clock.now()
            if wait > 0:
                self._wake_in(wait)
            else:
                self._check_behind(position, since, ref)
        return False

    def _wake_in(self, seconds: float) -> None:
        """Set ``changed`` in ``seconds`` (one timer, the earliest asked for), so an outcome
        waiting on the streams is judged again the moment a wait of ``caught_up`` ends, not at
        its consumer's next periodic look."""
        due = self.clock.now() + seconds
        if self._wake is not None:
            if self._wake_due <= due:
                return
            self._wake.cancel()
        self._wake_due = due
        self._wake = asyncio.get_running_loop().call_later(max(0.0, seconds), self._woken)

    def _woken(self) -> None:
        self._wake = None
        self.changed.set()

    def _may_hold(self, stream: Stream, ref: TrainJobRef | None) -> bool:
        """Whether ``stream`` may hold objects of ``ref``: none of another namespace, and no
        Workload of a TrainJob Kueue does not manage (``api.kinds.kueue_may_manage`` of every
        state filed; a TrainJob not filed yet may be managed)."""
        if ref is None:
            return True
        if stream[1] not in (None, ref[0]):
            return False
        entry = self._streams.get(stream)
        if entry is None or entry[0].resource != WORKLOADS:
            return True
        return ref in self._queued or ref not in self._trainjob

    def _update(self, stream: Stream, key: str, obj: dict[str, Any]) -> None:
        """File a new state of an object, compacted, sharing its unchanged parts with the
        last one (``laststate``)."""
        obj = share(obj, self._last.state(stream, key))
        self._last.keep(stream, key, obj, self.seen(obj))

    async def _list(self, session: Session, kind: WatchedKind, stream: Stream) -> str:
        """List (page by page): file the states not filed before, and as deleted the objects
        known before and now absent (those whose last state was kept); the list's version."""
        present: set[str] = set()
        version = ""
        async for page in list_pages(
            session, kind.resource, stream[1], label_selector=kind.selector
        ):
            version = version or text_of(dig(page, "metadata", "resourceVersion"))
            for item in page.get("items") or []:
                if not isinstance(item, dict):
                    continue
                key = _key_of(item)
                present.add(key)
                if self._last.version(stream, key) != version_of(item) or not version_of(item):
                    self._update(stream, key, item)  # a state already filed is not filed again
        for key in self._last.keys(stream) - present:
            last = self._last.state(stream, key)
            self._last.drop(stream, key)
            if last is not None:
                self.seen(last, deleted=True)
        return version

    def _note(self, text: str) -> None:
        self.errors = [*self.errors[-19:], text]

    async def close(self) -> None:
        """Stop every stream and close the session."""
        self._stop.set()
        tasks = [*self._tasks, *self._checks.values(), self._opened, self._beating]
        await stop(*tasks, also=(TransientError,))
        self._tasks.clear()
        self._checks.clear()
        self._streams.clear()
        self._opened = self._beating = None
        self._session = None
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        self._namespaces.clear()


#: the metadata and condition fields retirement reads; the rest of a released TrainJob goes
RETIREMENT_METADATA = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")
RETIREMENT_CONDITION = ("type", "status")


def _retirement_view(trainjob: Mapping[str, Any]) -> Mapping[str, Any]:
    """The parts of a TrainJob that retirement reads (``verdict.Verdicts.must_retire``), kept
    for every TrainJob ever followed (so as small as that allows)."""
    spec, status = trainjob.get("spec"), trainjob.get("status")
    metadata = trainjob.get("metadata")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return {
        "kind": trainjob.get("kind"),
        "metadata": _only(metadata, RETIREMENT_METADATA),
        "spec": {"suspend": spec.get("suspend")} if isinstance(spec, Mapping) else {},
        "status": {
            "conditions": [_only(c, RETIREMENT_CONDITION) for c in conditions]
            if isinstance(conditions, list)
            else conditions
        },
    }


def _only(obj: Any, keys: tuple[str, ...]) -> Any:
    """``obj``'s ``keys`` alone, if it is a mapping (anything else as it is)."""
    return {k: obj[k] for k in keys if k in obj} if isinstance(obj, Mapping) else obj


def _key_of(obj: Mapping[str, Any]) -> str:
    return text_of(dig(obj, "metadata", "namespace")) + "/" + text_of(dig(obj, "metadata", "name"))

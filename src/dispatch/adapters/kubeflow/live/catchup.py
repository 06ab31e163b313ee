"""Proving the streams have caught up, so that an outcome is judged on all that happened
before it.

``position()``/``caught_up(v, since)``: how far the streams got, so a judgement can wait until
every kind has delivered what happened before it (streams of different kinds lag
differently). A stream is caught up with ``v`` once it delivered ``v`` or later. A quiet
stream delivers nothing (its bookmarks come about once a minute), so an open stream still
behind ``v`` ``QUIET`` seconds after ``since`` that delivered nothing for ``QUIET`` seconds,
or a stream still behind ``RELIST_EVERY`` seconds after ``since`` and found resuming (one
dropped again and again, too soon each time to catch up), is **checked**: a list (a
consistent read at its version ``L``, of each object's metadata alone: names and versions
are all it compares) whose every object is exactly the version the stream last delivered,
with none missing, proves the stream has delivered everything up to ``L``; it files nothing
and the watch stays open, so no state between is skipped. A stream is checked again only
after a pause that grows with what its list costs (``QUIET`` to ``MAX_CHECK_PAUSE`` seconds; the
lesser of its last two checks' durations, so that one check slowed by a busy loop, or by the
checks of other streams at the same moment, does not hold every outcome waiting on that
stream back for the longest pause; after a check for some TrainJobs alone, at most
``MAX_NARROW_PAUSE``). A check that finds changes the watch has not delivered
leaves them to the watch, which delivers within milliseconds when healthy; if by the next
check it has still not reached that list's version, the watch is stuck or lags (a half-open
connection, or one too slow for the changes) and the stream lists again. (Objects created and
deleted before a check's list are invisible to it; their events still arrive.) Streams still
delivering are left to it.

* **Checks for the TrainJobs waiting, not the whole stream**, once a stream knows more than
  ``NARROW_FROM`` objects and its kind has a label naming each object's TrainJob
  (``api.kinds.WatchedKind.narrow``): the check lists only the objects of the TrainJobs whose
  outcome waits on that stream (one request for all of them) and, when it finds each at the
  version last delivered and none missing, proves the stream caught up *for those TrainJobs*
  (``caught_up(..., ref)``); the stream's own position does not move. A TrainJob's outcome
  does not wait on the streams of other namespaces at all, nor on the Workload stream when
  Kueue does not manage its TrainJob (``api.kinds.kueue_may_manage``: no queue label, never
  suspended, no Kueue runtime patch, in every state filed), nor on the PodGroup streams when
  none of its pods belongs to a gang (``ledger.may_be_ganged``). A check for a few TrainJobs that
  finds a change, or one of their objects missing (not labelled as expected, say), makes
  the stream's next check a whole one. A selector for so many TrainJobs that it would be
  longer than ``MAX_SELECTOR`` is sent in parts (``MAX_PARTS`` lists at most per check, the
  TrainJobs that waited first first; the others wait for the stream's next check).
* **A busy loop is not a quiet stream**: each wait above (``QUIET``) is lengthened by the
  lateness of the event loop in the last second or so (``dispatch.aio.LoopLag``), so checks are not
  made, and do not add their own load, just because the supervisor fell behind.
* ``changed`` (the event given) is set when a check ends and when a wait above ends
  (``QUIET``, a check's pause): an outcome waiting on the streams is judged again at that
  moment, not at its consumer's next periodic look.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping

from dispatch.adapters.kubeflow.api.kinds import NAME, POD_GROUPS, UID, WORKLOADS, WatchedKind
from dispatch.adapters.kubeflow.api.listwatch import list_pages
from dispatch.adapters.kubeflow.live.attribution import TrainJobRef
from dispatch.adapters.kubeflow.live.laststate import version_of
from dispatch.adapters.kubeflow.live.ledger import Ledger
from dispatch.adapters.kubeflow.live.streams import Stream, Streams, key_of
from dispatch.adapters.kubeflow.objects import dig, text_of
from dispatch.aio import LoopLag, stop
from dispatch.clock import Clock
from dispatch.log import logger
from dispatch.model import TransientError

log = logger(__name__)

#: seconds a terminal outcome waits, and a stream must have delivered nothing, before the
#: stream is checked (a healthy API server delivers watch events within milliseconds)
QUIET = 0.25
#: a stream found resuming is checked once an outcome has waited this long for it
RELIST_EVERY = 2.0
#: a stream is checked again after ``CHECK_SHARE`` times what its list cost (the lesser of its
#: last two), at least ``QUIET`` and at most ``MAX_CHECK_PAUSE`` seconds: checks take at most
#: about a tenth of the time of both sides, however big the stream (at 10,000 TrainJobs a
#: whole list of a namespace's Events costs a second; checked every 2 s, the Events of one
#: namespace kept the API server and the supervisor busy listing them)
CHECK_SHARE = 10
MAX_CHECK_PAUSE = 10.0
#: after a check for some TrainJobs alone (a few lists of their objects, each selected by
#: label: little for the API server to send, however big the stream), the pause is at most
#: this many seconds: while thousands of starts keep the supervisor's loop busy, such a
#: check's wall time is mostly the loop's (0.6 to 1.0 s at 3,000 TrainJobs), and ten times
#: that held every end waiting on the stream back 6 to 10 s
MAX_NARROW_PAUSE = 1.0
#: a stream that knows more objects than this is checked for the waiting TrainJobs alone
NARROW_FROM = 100
#: the longest label selector a check for some TrainJobs sends (characters): URLs past ~8 KB
#: are refused by HTTP servers and proxies on the way (aiohttp's limit, nginx's buffers). A
#: check for more TrainJobs lists them in parts, at most ``MAX_PARTS`` lists (the first to
#: wait first; the rest wait for the stream's next check): a list of the whole stream instead
#: costs both sides every object of a busy stream, again and again while outcomes pile up
MAX_SELECTOR = 2000
MAX_PARTS = 4


class CatchUp:
    """Whether the streams have delivered everything up to a position (see the module)."""

    def __init__(
        self,
        streams: Streams,
        ledger: Ledger,
        lag: LoopLag,
        clock: Clock,
        changed: asyncio.Event,
    ) -> None:
        self.streams = streams
        self.ledger = ledger
        self.lag = lag
        self.clock = clock
        self.changed = changed
        self._checks: dict[Stream, asyncio.Task[None]] = {}  # checks in flight
        self._check_due: dict[Stream, float] = {}  # when a stream may be checked again
        self._check_cost: dict[Stream, float] = {}  # how long its last check took
        self._short_of: dict[Stream, int] = {}  # a check's list the watch had not reached
        #: to check for these alone, in the order they came to wait
        self._waiting: dict[Stream, dict[TrainJobRef, None]] = {}
        self._whole: set[Stream] = set()  # a check of the whole stream is wanted
        self._proven: dict[TrainJobRef, dict[Stream, int]] = {}  # caught up for one ref
        self._wake: asyncio.TimerHandle | None = None  # sets ``changed`` when a wait ends
        self._wake_due = math.inf

    # --- asking -----------------------------------------------------------------------------

    def position(self, ref: TrainJobRef | None = None) -> int | None:
        """The newest resourceVersion any stream has reached, or any record of ``ref`` shows
        (those read once, outside the streams, may be newer; None: not comparable)."""
        known = [v for v in self.streams.positions().values() if v is not None]
        if not known:
            return None
        return max(*known, self.ledger.newest(ref)) if ref is not None else max(known)

    def caught_up(
        self, position: int, since: float | None = None, ref: TrainJobRef | None = None
    ) -> bool:
        """Every stream has delivered everything up to ``position`` (resourceVersions are
        etcd revisions in practice: one counter for all kinds; opaque ones never compare), or
        ``QUIET`` seconds after ``since``, open quiet streams still behind are checked (None:
        never). With ``ref``: every stream that may hold ``ref``'s objects, each caught up
        or proved caught up for ``ref`` (see the module docstring)."""
        proven = self._proven.get(ref, {}) if ref is not None else {}
        for stream, version in self.streams.positions().items():
            if version is not None and (version >= position or proven.get(stream, -1) >= position):
                continue
            if version is not None and not self._may_hold(stream, ref):
                continue
            break
        else:
            return True
        if since is not None:
            wait = since + QUIET + self.lag.late() - self.clock.now()
            if wait > 0:
                self._wake_in(wait)
            else:
                self._check_behind(position, since, ref)
        return False

    @property
    def checking(self) -> bool:
        """Whether a check is in flight."""
        return bool(self._checks)

    def next_check(self, stream: Stream) -> float | None:
        """When ``stream`` may be checked again (None: not checked yet)."""
        return self._check_due.get(stream)

    def stop_waiting(self, ref: TrainJobRef) -> None:
        """No outcome of ``ref`` waits on the streams any more: drop its checks and proofs."""
        self._proven.pop(ref, None)
        for waiting in self._waiting.values():
            waiting.pop(ref, None)

    async def close(self) -> None:
        """Stop the checks in flight and the pending wake-up."""
        await stop(*self._checks.values(), also=(TransientError,))
        self._checks.clear()
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None

    # --- waking -----------------------------------------------------------------------------

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
        """Whether ``stream`` may hold objects of ``ref``: none of another namespace, no
        Workload of a TrainJob Kueue does not manage (``api.kinds.kueue_may_manage`` of every
        state filed; a TrainJob not filed yet may be managed), and no PodGroup of a TrainJob
        whose pods belong to no gang (one with no pod filed yet may have one)."""
        if ref is None:
            return True
        if stream[1] not in (None, ref[0]):
            return False
        kind = self.streams.kind(stream)
        if kind is not None and kind.resource == WORKLOADS:
            return self.ledger.may_be_queued(ref)
        if kind is not None and kind.resource in POD_GROUPS:
            return self.ledger.may_be_ganged(ref)
        return True

    # --- checking ---------------------------------------------------------------------------

    def _check_behind(self, position: int, since: float, ref: TrainJobRef | None) -> None:
        """Check the streams behind ``position`` that are open and quiet, or that have kept an
        outcome waiting since ``since`` for ``RELIST_EVERY`` seconds while resuming again and
        again (see the module docstring); for ``ref`` alone where the stream allows."""
        now = self.clock.now()
        overdue = now - since >= RELIST_EVERY
        proven = self._proven.get(ref, {}) if ref is not None else {}
        for stream, kind in self.streams.followed():
            version = self.streams.version(stream)
            if version is None or version >= position or proven.get(stream, -1) >= position:
                continue  # listing already, or caught up
            if not self._may_hold(stream, ref):
                continue
            if self.streams.is_open(stream):
                delivered = self.streams.delivered_at(stream)
                last = delivered if delivered is not None else -math.inf
                quiet_at = last + QUIET + self.lag.late()
                if now < quiet_at:
                    self._wake_in(quiet_at - now)
                    continue  # delivering: it gets past ``position`` by itself
            elif not overdue:
                self._wake_in(since + RELIST_EVERY - now)
                continue  # resuming: it gets past ``position`` by itself, normally
            if ref is not None and self._narrow_value(kind, stream, ref):
                self._waiting.setdefault(stream, {})[ref] = None
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
        if not kind.narrow or self.streams.last.size(stream) <= NARROW_FROM:
            return ""
        if kind.narrow_by == NAME:
            return ref[1]
        if kind.narrow_by == UID:
            return self.ledger.attribution.trainjobs.get(ref, "")
        return self.ledger.job_label(ref)

    async def _check(self, kind: WatchedKind, stream: Stream) -> None:
        began = self.clock.now()
        waiting = self._waiting.pop(stream, {})
        values = {ref: self._narrow_value(kind, stream, ref) for ref in waiting}
        parts: list[dict[TrainJobRef, str]] = [{}]  # a whole check serves the waiting too
        longest = MAX_CHECK_PAUSE
        if stream in self._whole or not all(values.values()):
            self._whole.discard(stream)
        elif values:
            parts = _parts(kind, values)
            later = {ref: None for part in parts[MAX_PARTS:] for ref in part}
            if later:  # the first to wait are checked first; the rest by the next check
                self._waiting[stream] = {**later, **self._waiting.get(stream, {})}
                parts = parts[:MAX_PARTS]
            longest = MAX_NARROW_PAUSE
        try:
            for part in parts:
                unchanged, listed = await self._unchanged_until(kind, stream, part)
                if not self._concluded(stream, set(part), unchanged, listed):
                    break  # the next check is a whole one: it serves the rest
        except TransientError as exc:
            log.info("%s: check failed (%s)", kind.name, exc)
            return
        finally:
            self._checks.pop(stream, None)
            now = self.clock.now()
            cost = now - began  # the lesser of the last two: one check slowed by a busy
            least = min(cost, self._check_cost.get(stream, cost))  # loop holds back no other
            self._check_cost[stream] = cost
            pause = min(longest, max(QUIET, CHECK_SHARE * least))
            self._check_due[stream] = now + pause
            self.changed.set()  # what waited on this stream may be caught up now

    def _concluded(
        self, stream: Stream, refs: set[TrainJobRef], unchanged: bool, listed: int | None
    ) -> bool:
        """File what one list of a check proved (for ``refs`` alone, or the whole stream);
        False when it found changes the watch has not delivered."""
        before = self.streams.version(stream)
        if unchanged and listed is not None:
            self._short_of.pop(stream, None)
            for ref in refs:
                proven = self._proven.setdefault(ref, {})
                proven[stream] = max(listed, proven.get(stream, listed))
            if not refs:
                self.streams.proved(stream, listed)
            return True
        if refs:
            self._whole.add(stream)  # changes, or objects not labelled as expected: check whole
        short_of = self._short_of.get(stream)
        if short_of is not None and (before is None or before < short_of):
            self._short_of.pop(stream, None)  # still short of the last check's list: stuck
            self.streams.relist(stream)
        elif listed is not None:
            self._short_of[stream] = listed
        return False

    async def _unchanged_until(
        self, kind: WatchedKind, stream: Stream, values: Mapping[TrainJobRef, str]
    ) -> tuple[bool, int | None]:
        """(whether the stream has delivered every change up to its list's version, that
        version): every object of the list at the version last delivered, none missing; of
        the objects of the TrainJobs in ``values`` alone (their narrow label values) if any.
        Files nothing."""
        session = await self.streams.ready_session()
        last = self.streams.last
        present: set[str] = set()
        listed: int | None = None
        differs = False
        selector = kind.selector
        known = last.keys(stream)
        if values:
            selector = kind.narrowed(values.values())
            known = last.keys_of(stream, set(values), kind.narrow, set(values.values()))
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
                key = key_of(item)
                present.add(key)
                differs = differs or last.version(stream, key) != version_of(item)
        if listed is None:
            return False, None
        reached = self.streams.version(stream)
        if reached is not None and reached >= listed:
            return True, listed  # the watch delivered past the list meanwhile
        return not differs and not known - present, listed


def _parts(kind: WatchedKind, values: Mapping[TrainJobRef, str]) -> list[dict[TrainJobRef, str]]:
    """``values`` in parts whose selectors are each at most ``MAX_SELECTOR`` long (a value
    longer than that alone makes a part of its own), in their order."""
    parts: list[dict[TrainJobRef, str]] = []
    part: dict[TrainJobRef, str] = {}
    for ref, value in values.items():
        if part and len(kind.narrowed([*part.values(), value])) > MAX_SELECTOR:
            parts.append(part)
            part = {}
        part[ref] = value
    return [*parts, part] if part else parts

"""The store's change feed, read once per tick for the whole server and fanned out to pages.

Every ``interval`` seconds the feed makes ONE store-level query, ``records.logged_after(seq)``
(the jobs with a history entry newer than the last one read), whatever the number of jobs and
of open pages. Only the jobs it names are read again, and each open page receives the rows
that changed. A supervisor writes a job's history entry just before its status
(``supervise.loop``), so a named job is read again on the next ``settle_ticks`` ticks as well:
the status that follows its entry is never missed. A job accepted without any history entry
yet (submitted, no supervisor has seen it) is found by a slower rescan of the newest jobs
every ``rescan_every`` seconds.

Guarantees: a change written to the store is on every open page within about ``interval``
(plus one tick when the status follows the entry); a page that falls behind (its queue full)
is dropped and reconnects, and on reconnecting receives every row changed since the last one
it saw (the SSE ``Last-Event-ID``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from dispatch.clock import Clock
from dispatch.model import DispatchError
from dispatch.records import Records
from dispatch.ui.index import JobIndex
from dispatch.ui.rows import JobRow

log = logging.getLogger(__name__)

#: changes a page may have waiting before it is dropped (it reconnects and catches up)
QUEUE_SIZE = 64


@dataclass(frozen=True, slots=True)
class Change:
    """What one tick found: the rows whose shown values changed, the jobs with new history
    entries (a job's page shows every entry), and the feed's position after it."""

    rows: tuple[JobRow, ...]
    seq: int
    named: frozenset[str] = frozenset()

    def touches(self, job_id: str) -> bool:
        return job_id in self.named or any(r.id == job_id for r in self.rows)


class Feed:
    """One loop per server over the store's change feed; see the module docstring."""

    def __init__(
        self,
        records: Records,
        index: JobIndex,
        clock: Clock,
        *,
        interval: float = 0.5,
        settle_ticks: int = 2,
        rescan_every: float = 10.0,
    ) -> None:
        self.records, self.index, self.clock = records, index, clock
        self.interval, self.settle_ticks, self.rescan_every = interval, settle_ticks, rescan_every
        self._recheck: dict[str, int] = {}  # job id -> ticks left to read it again
        self._pages: set[asyncio.Queue[Change | None]] = set()
        self._last_rescan = clock.now()
        #: store-level queries made by ticks (``logged_after`` and rescans), for tests and bench
        self.queries = 0

    def subscribe(self) -> asyncio.Queue[Change | None]:
        queue: asyncio.Queue[Change | None] = asyncio.Queue(QUEUE_SIZE)
        self._pages.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Change | None]) -> None:
        self._pages.discard(queue)

    def tick(self) -> Change:
        """Read the feed once and refresh the rows it names; returns what changed."""
        named, seq = self.records.logged_after(self.index.seq)
        self.queries += 1
        again = set(self._recheck)
        self._recheck = {j: n - 1 for j, n in self._recheck.items() if n > 1}
        self._recheck.update((j, self.settle_ticks) for j in named)
        changed = self.index.refresh(self.records, named | again, seq)
        self.index.seq = seq
        if self.clock.now() - self._last_rescan >= self.rescan_every:
            self._last_rescan = self.clock.now()
            self.queries += 1
            changed += self.index.add_new(self.records)
        return Change(tuple(changed), seq, frozenset(named))

    def publish(self, change: Change) -> None:
        for queue in list(self._pages):
            try:
                queue.put_nowait(change)
            except asyncio.QueueFull:  # a page that does not read: drop it, it reconnects
                self._pages.discard(queue)
                log.info("a page fell %d changes behind; dropped (it reconnects)", QUEUE_SIZE)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop``; then tell every page to close."""
        log.info("change feed started at entry %d, every %g s", self.index.seq, self.interval)
        try:
            while not stop.is_set():
                try:
                    change = self.tick()
                except DispatchError as exc:  # the store is unavailable: say so, try again
                    log.warning("change feed: the records cannot be read (%s); retrying", exc)
                else:
                    if change.rows or change.named:
                        self.publish(change)
                with contextlib.suppress(TimeoutError):  # the tick's interval, or the stop
                    await asyncio.wait_for(stop.wait(), self.interval)
        finally:
            for queue in list(self._pages):
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)
            self._pages.clear()
            log.info("change feed stopped at entry %d", self.index.seq)

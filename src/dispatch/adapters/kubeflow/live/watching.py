"""Following many attempts at once over the shared evidence streams (``capture.Capture``).

``watch_attempts(capture, verdicts, handles, ...)`` makes sure the capture covers the
handles' namespaces, waits until every stream has listed once, then yields for each handle
its first observation, and afterwards an observation whenever new evidence was filed for it
or its reported outcome (state, cause, summary, presence) changed. Each observation's
``evidence`` carries the records filed since the previous one (nothing is lost between two
yields) and its outcome is derived by ``verdict.Verdicts`` over *all* records kept for the
attempt. Outcomes that can change with time alone (waits measured against the patience,
terminal outcomes settling) are judged again every ``recheck`` seconds; nothing is polled.

An attempt whose TrainJob the streams have not shown yet is read once (``lookup``: the
TrainJob, its JobSet and the attempt's lists) before it is judged, so a lagging or
reconnecting stream is never mistaken for a TrainJob that does not exist; those reads are made
beside the rounds (``Lookups``), so no other attempt waits for them.

Retirement (``verdict.Verdicts.must_retire``) is carried out here through ``retire``, for the
handles watched and for any other TrainJob this adapter judged terminal that runs again. A
resume of an ended attempt that the cluster-side guard refused (``refusals``) is reported in
the attempt's next observation; one found after the attempt stopped being watched waits in
``Verdicts`` for the adapter's ``late_evidence``.
The iteration ends once every handle has a terminal outcome and nothing is left to retire.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dispatch.adapters.kubeflow.live.attribution import TrainJobRef
from dispatch.adapters.kubeflow.live.capture import Capture, Sleep
from dispatch.adapters.kubeflow.live.identity import (
    is_replaced,
    made_before,
    replaced_by,
    replaced_evidence,
    replaced_outcome,
)
from dispatch.adapters.kubeflow.live.verdict import Verdicts
from dispatch.aio import first_of, stop
from dispatch.clock import Clock
from dispatch.log import logger
from dispatch.model import (
    AttemptHandle,
    Cause,
    Evidence,
    Observation,
    Outcome,
    State,
    TransientError,
)

#: real seconds between re-judgements of outcomes that change with time alone
RECHECK = 0.25
#: reads of TrainJobs not shown yet by the streams made at the same time, at most
LOOKUPS_AT_ONCE = 8

#: deletes a TrainJob that must not run again if, read afresh, it still must not; True if done
Retire = Callable[[AttemptHandle | TrainJobRef, str], Awaitable[bool]]
Lookup = Callable[[TrainJobRef], Awaitable[list[Evidence]]]

log = logger(__name__)


def judge(
    capture: Capture,
    verdicts: Verdicts,
    ref: TrainJobRef,
    now: float,
    before: Outcome | None,
    *,
    cancelled_by: str | None = None,
    settled: bool = False,
    uid: str | None = None,
) -> tuple[Outcome, bool]:
    """(the outcome to report, gone) for one TrainJob from what the capture kept; with the
    attempt's recorded ``uid``, a TrainJob of another uid under the name ends it ``unknown``
    (``identity``) and is never judged as the attempt's. While a
    terminal outcome settles the TrainJob is never reported gone, even when it was deleted
    (e.g. retired by a supervisor that died before recording the end): the outcome that
    proves the end is on its way, and ``gone`` with an open outcome would end it ``unknown``."""
    trainjob, deleted = capture.latest_trainjob(ref)
    found = replaced_by(trainjob, uid)
    if found is not None and uid is not None:
        proof = replaced_evidence(ref[0], ref[1], uid, found, now)
        ended = verdicts.replaced(ref[1], replaced_outcome(proof))
        if verdicts.release(ref[1]):
            capture.release(ref)
        return ended, True
    outcome = verdicts.judge(
        ref[1],
        capture.records(ref),
        now,
        cancelled_by=cancelled_by,
        settled=settled,
        position=capture.position(ref),
        caught_up=lambda target, since: capture.caught_up(target, since, ref),
    )
    if verdicts.release(ref[1]):  # final: only records filed from now on are read again
        capture.release(ref)
    if outcome is None:
        return before or Outcome(State.RUNNING, summary="a rank ended; settling"), False
    gone = trainjob is None or deleted
    if gone and not outcome.is_terminal and trainjob is None:
        summary = f"TrainJob {ref[0]}/{ref[1]} does not exist"
        outcome = Outcome(State.FAILED, Cause.UNKNOWN, summary=summary)
    return outcome, gone


class Lookups:
    """The reads of TrainJobs the streams have not shown yet (``lookup``: the TrainJob, its
    JobSet and the attempt's lists), made beside the rounds, at most ``LOOKUPS_AT_ONCE`` at a
    time: a round waits for none of them (each is several requests; made one after another
    they held every other attempt's judgement back for minutes while thousands of jobs were
    submitted)."""

    def __init__(self, capture: Capture, lookup: Lookup) -> None:
        self._capture = capture
        self._lookup = lookup
        self._tasks: dict[TrainJobRef, asyncio.Task[list[Evidence]]] = {}
        self._limit = asyncio.Semaphore(LOOKUPS_AT_ONCE)

    def found(self, unseen: set[TrainJobRef]) -> set[TrainJobRef]:
        """Those of ``unseen`` the streams have shown or a read has filed (a read that failed
        is made again); reads are started for the others."""
        found: set[TrainJobRef] = set()
        for ref in sorted(unseen):
            task = self._tasks.get(ref)
            if task is not None and task.done():
                del self._tasks[ref]
                if self._filed(task):
                    found.add(ref)
                    continue
                task = None  # judged once it could be read: read again
            if self._capture.latest_trainjob(ref)[0] is not None:
                found.add(ref)
            elif task is None:
                self._tasks[ref] = asyncio.ensure_future(self._read(ref))
        for ref in found:
            stale = self._tasks.pop(ref, None)
            if stale is not None:
                stale.cancel()
        return found

    def _filed(self, task: asyncio.Task[list[Evidence]]) -> bool:
        """File what a finished read found; False when it failed transiently or was stopped
        (any other failure is a defect: raised)."""
        if task.cancelled():
            return False
        failed = task.exception()
        if failed is not None:
            if not isinstance(failed, TransientError):
                raise failed
            return False
        for record in task.result():
            self._capture.seen(record.data)
        return True

    async def _read(self, ref: TrainJobRef) -> list[Evidence]:
        try:
            async with self._limit:
                return await self._lookup(ref)
        finally:
            self._capture.changed.set()  # the round that waits for it looks again

    async def close(self) -> None:
        await stop(*self._tasks.values(), also=(TransientError,))
        self._tasks.clear()


@dataclass
class RetireSweep:
    """Which TrainJobs ``watch_attempts`` still checks for retirement, across its calls."""

    swept: bool = False  # every TrainJob known was checked once
    again: set[TrainJobRef] = field(default_factory=set)  # retirement failed: try again


async def watch_attempts(
    capture: Capture,
    verdicts: Verdicts,
    handles: Sequence[AttemptHandle],
    namespace_of: Callable[[AttemptHandle], str],
    clock: Clock,
    retire: Retire,
    lookup: Lookup,
    *,
    cancelled: Mapping[TrainJobRef, str] | None = None,
    uids: Mapping[TrainJobRef, str] | None = None,
    sleep: Sleep = asyncio.sleep,
    recheck: float = RECHECK,
    sweep: RetireSweep | None = None,
) -> AsyncIterator[Observation]:
    """See the module docstring. Each round costs what changed, not what is followed: only
    attempts with new records, never reported, or whose outcome may change with time alone
    (``Verdicts.pending_names``) are judged, and only TrainJobs with new records or a new
    judgement are checked for retirement. Every TrainJob known is checked once, at the first
    round; with ``sweep`` (kept by the caller across calls) only at the first round of the
    first call, and the TrainJobs whose retirement failed are tried again in the next call."""
    refs = {(namespace_of(h), h.native): h for h in handles}
    by_name: dict[str, list[TrainJobRef]] = {}
    for ref in refs:
        by_name.setdefault(ref[1], []).append(ref)
    capture.cover({ref[0] for ref in refs})
    await capture.synced.wait()
    shown: dict[TrainJobRef, tuple[object, ...]] = {}
    reported: dict[TrainJobRef, Outcome] = {}
    unseen = set(refs)  # neither shown by the streams nor read once yet
    unreported, still_open = set(refs), set(refs)
    sweep = sweep if sweep is not None else RetireSweep()
    if not sweep.swept:
        sweep.again |= capture.attribution.trainjobs.keys()
        sweep.swept = True
    recheck_retire = sweep.again
    looking = Lookups(capture, lookup)
    try:
        while True:
            capture.changed.clear()
            now = clock.now()
            changed = set(capture.fresh_refs())
            unseen -= looking.found(unseen)
            pending = {r for name in verdicts.pending_names(now) for r in by_name.get(name, ())}
            guarded = {r for name in verdicts.guarded_names() for r in by_name.get(name, ())}
            due = ((changed & refs.keys()) | pending | guarded | unreported) - unseen
            ready: list[Observation] = []
            taken: list[tuple[TrainJobRef, tuple[Evidence, ...]]] = []
            for ref in sorted(due):
                fresh = capture.take(ref)
                taken.append((ref, fresh))
                who = (cancelled or {}).get(ref)
                holder = capture.latest_trainjob(ref)[0]  # before a final outcome releases it
                outcome, gone = judge(
                    capture,
                    verdicts,
                    ref,
                    now,
                    reported.get(ref),
                    cancelled_by=who,
                    uid=(uids or {}).get(ref),
                )
                if is_replaced(outcome):  # the other owner's objects are not the attempt's
                    fresh = tuple(made_before(fresh, holder))
                reported[ref] = outcome
                unreported.discard(ref)
                if outcome.is_terminal:
                    still_open.discard(ref)
                key = (outcome.state, outcome.cause, outcome.summary, gone)
                refused = tuple(verdicts.take_guard_records(ref[1]))
                if fresh or refused or shown.get(ref) != key:
                    shown[ref] = key
                    rerun = verdicts.rerun(ref[1])
                    extra = (rerun,) if rerun is not None else ()
                    evidence = (*fresh, *extra, *refused)
                    ready.append(
                        Observation(refs[ref], outcome, evidence, observed_at=now, gone=gone)
                    )
            # retire before reporting: a consumer may stop iterating once it has the outcome
            candidates = recheck_retire | changed | due
            try:
                again = await _retire_due(capture, verdicts, refs, candidates, now, retire)
                recheck_retire.clear()
                recheck_retire |= again
            except BaseException:  # cancelled (e.g. the stream is replaced): nothing taken is lost
                for ref, fresh in reversed(taken):
                    capture.give_back(ref, fresh)
                raise
            for observation in ready:
                yield observation
            if not unreported and not still_open:
                latest = {r: capture.latest_trainjob(r)[0] for r in refs}
                if not any(
                    verdicts.must_retire(r[1], t, now) or verdicts.awaits_end(r[1], t, now)
                    for r, t in latest.items()
                ):
                    return
                recheck_retire |= refs.keys()
            await _wait(capture.changed, sleep, recheck)

    finally:
        await looking.close()


async def _retire_due(
    capture: Capture,
    verdicts: Verdicts,
    refs: Mapping[TrainJobRef, AttemptHandle],
    candidates: set[TrainJobRef],
    now: float,
    retire: Retire,
) -> set[TrainJobRef]:
    """Delete every TrainJob among ``candidates`` that must not run again (watched or judged
    before); returns those whose deletion failed, to try again."""
    again: set[TrainJobRef] = set()
    for ref in sorted(candidates):
        standing = verdicts.standings.get(ref[1])
        ended = standing is not None and standing.final is not None
        # the new records of an attempt that ended only matter to notice a re-run (those of
        # attempts still open wait for the stream that follows them)
        if ref not in refs and ended and capture.take(ref):
            judge(capture, verdicts, ref, now, None)
        trainjob, deleted = capture.latest_trainjob(ref)
        if not deleted:
            verdicts.refusal_due(ref[1], trainjob, now)  # a refused resume, recorded
        why = None if deleted else verdicts.must_retire(ref[1], trainjob, now)
        if why is None:
            continue
        try:
            done = await retire(refs.get(ref) or ref, why)
        except TransientError as exc:
            log.info("TrainJob %s/%s: retiring it failed (%s); trying again", *ref, exc)
            again.add(ref)
        else:
            if done:
                log.info("TrainJob %s/%s retired: %s", *ref, why)
                verdicts.retired(ref[1])
    return again


async def _wait(event: asyncio.Event, sleep: Sleep, seconds: float) -> None:
    await first_of(event.wait(), sleep(seconds))

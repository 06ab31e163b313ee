"""Following many attempts at once over the shared evidence streams (``capture.Capture``).

``watch_attempts(capture, verdicts, handles, ...)`` makes sure the capture covers the
handles' namespaces, waits until every stream has listed once, then yields for each handle
its first observation, and afterwards an observation whenever new evidence was filed for it
or its reported outcome (state, cause, summary, presence) changed. Each observation's
``evidence`` carries the records filed since the previous one (nothing is lost between two
yields) and its outcome is derived by ``verdict.Verdicts`` over *all* records kept for the
attempt. Outcomes that can change with time alone (waits measured against the patience,
terminal outcomes settling) are judged again every ``recheck`` seconds; nothing is polled.

An attempt whose TrainJob the streams have not shown yet is read once (``lookup``, one GET
and the attempt's lists) before it is judged, so a lagging or reconnecting stream is never
mistaken for a TrainJob that does not exist.

Retirement (``verdict.Verdicts.must_retire``) is carried out here through ``retire``, for the
handles watched and for any other TrainJob this adapter judged terminal that runs again.
The iteration ends once every handle has a terminal outcome and nothing is left to retire.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from dispatch.adapters.kubeflow.attribution import TrainJobRef
from dispatch.adapters.kubeflow.capture import Capture, Sleep
from dispatch.adapters.kubeflow.causes_evidence import DELETED_SUFFIX
from dispatch.adapters.kubeflow.verdict import Verdicts
from dispatch.clock import Clock
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
RECHECK = 0.5

#: deletes a TrainJob that must not run again if, read afresh, it still must not; True if done
Retire = Callable[[AttemptHandle | TrainJobRef, str], Awaitable[bool]]
Lookup = Callable[[TrainJobRef], Awaitable[list[Evidence]]]


def latest_trainjob(capture: Capture, ref: TrainJobRef) -> tuple[Mapping[str, Any] | None, bool]:
    """The TrainJob as last seen, and whether it was seen deleted."""
    for record in reversed(capture.records(ref)):
        if record.kind == "trainjob":
            return record.data, record.key.endswith(DELETED_SUFFIX)
    return None, False


def judge(
    capture: Capture,
    verdicts: Verdicts,
    ref: TrainJobRef,
    now: float,
    before: Outcome | None,
    *,
    cancelled_by: str | None = None,
    settled: bool = False,
) -> tuple[Outcome, bool]:
    """(the outcome to report, gone) for one TrainJob from what the capture kept."""
    trainjob, deleted = latest_trainjob(capture, ref)
    outcome = verdicts.judge(
        ref[1],
        capture.records(ref),
        now,
        cancelled_by=cancelled_by,
        settled=settled,
        position=capture.position(),
        caught_up=capture.caught_up,
    )
    if outcome is None:
        outcome = before or Outcome(State.RUNNING, summary="a rank ended; settling")
    gone = trainjob is None or deleted
    if gone and not outcome.is_terminal and trainjob is None:
        summary = f"TrainJob {ref[0]}/{ref[1]} does not exist"
        outcome = Outcome(State.FAILED, Cause.UNKNOWN, summary=summary)
    return outcome, gone


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
    sleep: Sleep = asyncio.sleep,
    recheck: float = RECHECK,
) -> AsyncIterator[Observation]:
    """See the module docstring."""
    refs = {(namespace_of(h), h.native): h for h in handles}
    capture.cover({ref[0] for ref in refs})
    await capture.synced.wait()
    shown: dict[TrainJobRef, tuple[object, ...]] = {}
    looked_up: set[TrainJobRef] = set()
    reported: dict[TrainJobRef, Outcome] = {}
    first = True
    while True:
        capture.changed.clear()
        now = clock.now()
        ready: list[Observation] = []
        for ref in sorted(refs):
            if ref not in looked_up and latest_trainjob(capture, ref)[0] is None:
                # the stream may not have shown it yet: read it once, never poll
                try:
                    for record in await lookup(ref):
                        capture.seen(record.data)
                except TransientError:
                    continue  # judged on the next round
                looked_up.add(ref)
            fresh = capture.take(ref)
            if not (first or fresh or verdicts.pending(ref[1])) and ref in reported:
                continue
            who = (cancelled or {}).get(ref)
            outcome, gone = judge(capture, verdicts, ref, now, reported.get(ref), cancelled_by=who)
            reported[ref] = outcome
            key = (outcome.state, outcome.cause, outcome.summary, gone)
            if first or fresh or shown.get(ref) != key:
                shown[ref] = key
                rerun = verdicts.rerun(ref[1])
                extra = (rerun,) if rerun is not None else ()
                evidence = (*fresh, *extra)
                ready.append(Observation(refs[ref], outcome, evidence, observed_at=now, gone=gone))
        # retire before reporting: a consumer may stop iterating once it has the outcome
        await _retire_due(capture, verdicts, refs, now, retire)
        for observation in ready:
            yield observation
        first = False
        ended = len(reported) == len(refs) and all(o.is_terminal for o in reported.values())
        if ended and not any(
            verdicts.must_retire(r[1], latest_trainjob(capture, r)[0]) for r in refs
        ):
            return
        await _wait(capture.changed, sleep, recheck)


async def _retire_due(
    capture: Capture,
    verdicts: Verdicts,
    refs: Mapping[TrainJobRef, AttemptHandle],
    now: float,
    retire: Retire,
) -> None:
    """Delete every TrainJob that must not run again (watched or judged before)."""
    for ref in sorted(capture.attribution.trainjobs):
        if ref not in refs and capture.take(ref) and verdicts.standings.get(ref[1]):
            judge(capture, verdicts, ref, now, None)  # notices a re-run
        trainjob, deleted = latest_trainjob(capture, ref)
        why = None if deleted else verdicts.must_retire(ref[1], trainjob)
        if why is None:
            continue
        with contextlib.suppress(TransientError):
            if await retire(refs.get(ref) or ref, why):
                verdicts.retired(ref[1])


async def _wait(event: asyncio.Event, sleep: Sleep, seconds: float) -> None:
    waiter = asyncio.ensure_future(event.wait())
    timer = asyncio.ensure_future(sleep(seconds))
    try:
        await asyncio.wait({waiter, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiter, timer):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

"""Reads an observation needs before it is delivered, made beside the stream, not in its way.

Some observations need a request of their own before they go out: a failed attempt's last
output (``lastwords``: one log read per failed rank, while the pods exist) or a TrainJob's
``started`` mark. Made in line, each such request holds back every other attempt's
observations until it is answered: at 10,000 jobs, half of them failing, one log read after
another kept outcomes waiting for minutes. ``alongside`` makes them at the same time (at most
``at_once``) while the other attempts' observations pass:

* an observation whose ``extra`` is None passes at once, in the order it came;
* one with a read waits for it, and comes with the records read added to its evidence;
* an observation of an attempt with a read under way waits with it: its evidence is added and
  its outcome is the newer one, so one attempt's observations never overtake each other;
* when the stream ends, what is held is delivered as each read ends; when the consumer stops
  (the stream is replaced), the reads under way are stopped;
* ``delivered`` is told of each observation once its consumer has taken it (asked for the
  next): what was read for it need not be read again;
* ``lost`` is told of each observation the consumer never took when it stopped (those held
  for a read, queued, or handed out and not yet followed by a request for the next): their
  evidence, taken from the capture, would otherwise be gone with them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace

from dispatch.aio import stop
from dispatch.model import Evidence, Observation

#: reads at the same time, at most (each waits on the API server, under its throttle)
READS_AT_ONCE = 32

Read = Callable[[], Awaitable[tuple[Evidence, ...]]]


def _key(observation: Observation) -> tuple[str, int, str]:
    handle = observation.handle
    return (handle.job_id, handle.attempt, handle.native)


async def alongside(
    observations: AsyncIterator[Observation],
    extra: Callable[[Observation], Read | None],
    *,
    at_once: int = READS_AT_ONCE,
    delivered: Callable[[Observation], None] | None = None,
    lost: Callable[[Observation], None] | None = None,
) -> AsyncIterator[Observation]:
    """``observations``, each one ``extra`` gives a read for delivered once that read ended,
    with what it read (see the module docstring)."""
    out: asyncio.Queue[Observation | None] = asyncio.Queue()
    held: dict[tuple[str, int, str], Observation] = {}
    reads: set[asyncio.Task[None]] = set()
    failures: list[BaseException] = []
    limit = asyncio.Semaphore(max(1, at_once))

    async def read(key: tuple[str, int, str], fetch: Read) -> None:
        found: tuple[Evidence, ...] = ()
        try:
            async with limit:
                found = await fetch()
        except Exception as exc:  # a defect: raised from the stream once the rest is out
            failures.append(exc)
        finally:
            observation = held.pop(key)
            out.put_nowait(replace(observation, evidence=(*observation.evidence, *found)))

    async def pump() -> None:
        try:
            async for observation in observations:
                key = _key(observation)
                before = held.get(key)
                if before is not None:  # its attempt's read is under way: it waits with it
                    evidence = (*before.evidence, *observation.evidence)
                    held[key] = replace(observation, evidence=evidence)
                    continue
                fetch = extra(observation)
                if fetch is None:
                    out.put_nowait(observation)
                    continue
                held[key] = observation
                task = asyncio.ensure_future(read(key, fetch))
                reads.add(task)
                task.add_done_callback(reads.discard)
            while reads:
                await asyncio.wait(set(reads))
            if failures:
                raise failures[0]
        finally:
            out.put_nowait(None)

    pumping = asyncio.ensure_future(pump())
    handed: Observation | None = None  # out, and the consumer has not asked for the next yet
    try:
        while (observation := await out.get()) is not None:
            handed = observation
            yield observation
            handed = None
            if delivered is not None:
                delivered(observation)
        await pumping  # the stream's own error, if it ended with one
    finally:
        await stop(pumping, *reads)  # a stopped read queues its observation, as it is
        if lost is not None:
            kept = [] if handed is None else [handed]
            while not out.empty():
                if (item := out.get_nowait()) is not None:
                    kept.append(item)
            for observation in [*kept, *held.values()]:
                lost(observation)

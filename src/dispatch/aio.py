"""Stopping asyncio tasks, and how late the event loop runs, written once.

``stop`` cancels tasks and waits until each has ended, so nothing they hold (a connection, a
file, a subscription) outlives the caller; ``first_of`` waits for the first of several
awaitables and stops the rest.

``LoopLag`` beats every ``BEAT`` real seconds and keeps how much later than asked each beat
woke (``lag``), fading by ``LAG_FADE`` a beat; ``late()`` is that lateness once it is worth
counting (``LAG_FLOOR``). While the loop runs late (the process's own work, a large list being
decoded), watch events wait unread in their sockets and every stream looks quiet: the Kubeflow
capture lengthens its catch-up waits by it, and the supervisor ticks fewer jobs at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

#: what waits a number of real seconds (``asyncio.sleep``; tests pass one of virtual time)
Sleep = Callable[[float], Awaitable[None]]


async def stop(
    *tasks: asyncio.Future[Any] | None, also: tuple[type[BaseException], ...] = ()
) -> None:
    """Cancel every task (None is skipped) and wait until each has ended.

    A task's ``CancelledError``, and the exceptions of the types in ``also``, are swallowed;
    any other exception a task ended with is raised, after every task has ended. A
    cancellation of the caller itself is never swallowed: the tasks are still waited for,
    then it is passed on (else a loop that stops its helpers in ``finally`` would go on
    running after being cancelled a second time, and whoever cancelled it would wait for it
    forever).
    """
    pending = [task for task in tasks if task is not None]
    for task in pending:
        task.cancel()
    cancelled = False
    while not all(task.done() for task in pending):
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError:
            cancelled = True  # ours: finish stopping them first
    if cancelled:
        raise asyncio.CancelledError
    failure: BaseException | None = None
    for task in pending:
        if task.cancelled():
            continue
        exc = task.exception()
        if exc is not None and not isinstance(exc, also):
            failure = failure or exc
    if failure is not None:
        raise failure


async def first_of(*awaitables: Awaitable[Any]) -> None:
    """Wait until the first of ``awaitables`` ends, then stop the others (see ``stop``)."""
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await stop(*tasks)


#: real seconds between the beats that measure how late the event loop runs
BEAT = 0.05
#: share of the loop's lateness still counted one beat later (it fades within a second or so)
LAG_FADE = 0.85
#: lateness below this many seconds is not counted (a loop always runs a little late)
LAG_FLOOR = 0.05


class LoopLag:
    """The event loop's recent lateness, measured while ``start``ed (until ``close``)."""

    def __init__(self) -> None:
        #: how late the event loop ran lately, in seconds
        self.lag = 0.0
        self._beating: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start beating on the running loop (once; later calls do nothing)."""
        if self._beating is None:
            self._beating = asyncio.ensure_future(self._beat())

    def late(self) -> float:
        """The lateness to add to a wait: ``lag``, or 0 below ``LAG_FLOOR``."""
        return self.lag if self.lag >= LAG_FLOOR else 0.0

    async def close(self) -> None:
        await stop(self._beating)
        self._beating = None

    async def _beat(self) -> None:
        """How much longer than ``BEAT`` a sleep of ``BEAT`` takes (real time), kept as ``lag``
        and fading by ``LAG_FADE`` every beat."""
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            await asyncio.sleep(BEAT)
            late = max(0.0, loop.time() - began - BEAT)
            self.lag = max(late, self.lag * LAG_FADE)

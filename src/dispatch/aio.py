"""Stopping asyncio tasks, written once.

``stop`` cancels tasks and waits until each has ended, so nothing they hold (a connection, a
file, a subscription) outlives the caller; ``first_of`` waits for the first of several
awaitables and stops the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


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

"""Stopping asyncio tasks, written once.

``stop`` cancels tasks and waits until each has ended, so nothing they hold (a connection, a
file, a subscription) outlives the caller; ``first_of`` waits for the first of several
awaitables and stops the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any


async def stop(
    *tasks: asyncio.Future[Any] | None, also: tuple[type[BaseException], ...] = ()
) -> None:
    """Cancel every task (None is skipped) and wait until each has ended.

    A task's ``CancelledError``, and the exceptions of the types in ``also``, are swallowed;
    any other exception a task ended with is raised, after every task has ended.
    """
    pending = [task for task in tasks if task is not None]
    for task in pending:
        task.cancel()
    failure: BaseException | None = None
    for task in pending:
        try:
            with contextlib.suppress(asyncio.CancelledError, *also):
                await task
        except Exception as exc:  # every task ends before the first failure is raised
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

"""Waking a watcher as soon as some attempt's runner records a change.

Every runner touches ``jobs/.changed`` after each status write (``files.py``). ``Changes``
waits for that with Linux inotify on the ``jobs`` folder (``inotify_simple``), so ``watch``
learns of a change within a millisecond instead of at its next poll, and sleeps the rest of
the time. Guarantees:

* ``wait`` returns when something in the ``jobs`` folder changed since the previous ``wait``
  (events are queued by the kernel between calls, so none is lost), or after ``timeout``
  seconds of the injected clock, whichever comes first. A return is only a hint: the caller
  still stats the marker and reads the facts.
* Where inotify cannot be used (not Linux, no ``jobs`` folder yet, the per-user watch limit
  reached) ``wait`` sleeps ``fallback`` seconds instead, as a plain poll; it retries inotify
  on the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dispatch.aio import stop
from dispatch.clock import Clock

if TYPE_CHECKING:
    from inotify_simple import INotify


async def readable(fd: int, timer: Coroutine[Any, Any, None]) -> bool:
    """Wait until ``fd`` can be read (True) or ``timer`` ends first (False), without polling."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def woken() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, woken)
    sleeper = asyncio.ensure_future(timer)
    try:
        await asyncio.wait({ready, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        return ready.done()
    finally:
        loop.remove_reader(fd)
        await stop(sleeper, ready)


class Changes:
    """Change notifications for one ``jobs`` folder; ``close`` when done."""

    def __init__(self, jobs_dir: Path, clock: Clock, fallback: float) -> None:
        self.jobs_dir, self.clock, self.fallback = jobs_dir, clock, fallback
        self._inotify: INotify | None = None

    def _open(self) -> INotify | None:
        if self._inotify is None:
            try:
                from inotify_simple import INotify, flags  # Linux only

                made = INotify(nonblocking=True)
            except (ImportError, OSError):  # not Linux, or no inotify instance left
                return None
            # a file of the folder was touched, written, created, moved in or deleted
            mask = flags.ATTRIB | flags.CLOSE_WRITE | flags.CREATE | flags.MOVED_TO | flags.DELETE
            try:
                made.add_watch(os.fspath(self.jobs_dir), mask)
            except OSError:  # no folder yet, or no watch left: poll this time
                made.close()
                return None
            self._inotify = made
        return self._inotify

    async def wait(self, timeout: float) -> None:
        """Return on the next change in the folder, or after ``timeout`` seconds."""
        inotify = self._open()
        if inotify is None:
            await self.clock.sleep(min(self.fallback, timeout))
            return
        await readable(inotify.fileno(), self.clock.sleep(timeout))
        with contextlib.suppress(BlockingIOError):
            inotify.read(timeout=0)  # drain what woke us

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

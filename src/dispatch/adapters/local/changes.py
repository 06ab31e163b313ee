"""Waking a watcher as soon as some attempt's runner records a change.

Every runner touches ``jobs/.changed`` after each status write (``files.py``). ``Changes``
waits for that with Linux inotify on the ``jobs`` folder (through ctypes, standard library
only), so ``watch`` learns of a change within a millisecond instead of at its next poll, and
sleeps the rest of the time. Guarantees:

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
import ctypes
import os
from pathlib import Path

from dispatch.clock import Clock

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
# a file of the folder was touched, written, created, moved in or deleted
_IN_MASK = 0x004 | 0x008 | 0x100 | 0x080 | 0x200  # ATTRIB CLOSE_WRITE CREATE MOVED_TO DELETE


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)  # this process's symbols, libc's among them
    except OSError:  # pragma: no cover - a platform without dlopen(NULL)
        return None


class Changes:
    """Change notifications for one ``jobs`` folder; ``close`` when done."""

    def __init__(self, jobs_dir: Path, clock: Clock, fallback: float) -> None:
        self.jobs_dir, self.clock, self.fallback = jobs_dir, clock, fallback
        self._fd: int | None = None
        self._lib = _libc()

    def _open(self) -> int | None:
        if self._fd is None and self._lib is not None and hasattr(self._lib, "inotify_init1"):
            fd = int(self._lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
            if fd < 0:
                return None
            path = os.fsencode(self.jobs_dir)
            if int(self._lib.inotify_add_watch(fd, path, _IN_MASK)) < 0:
                os.close(fd)  # no folder yet, or no watch left: poll this time
                return None
            self._fd = fd
        return self._fd

    async def wait(self, timeout: float) -> None:
        """Return on the next change in the folder, or after ``timeout`` seconds."""
        fd = self._open()
        if fd is None:
            await self.clock.sleep(min(self.fallback, timeout))
            return
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, readable)
        sleeper = asyncio.ensure_future(self.clock.sleep(timeout))
        try:
            await asyncio.wait({ready, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(fd)
            sleeper.cancel()
            ready.cancel()
        self._drain(fd)

    @staticmethod
    def _drain(fd: int) -> None:
        try:
            while os.read(fd, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

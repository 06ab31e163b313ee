"""Time and ids, injected: logic never calls ``time.time()``, ``uuid4()`` or ``random`` itself.

Real implementations live here; the simulator and tests pass virtual ones.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


class Clock(Protocol):
    """Wall-clock seconds since the epoch, and a sleeper that agrees with it."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when told to; ``sleep`` advances it instantly."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time does not go backwards")
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)


class IdGenerator(Protocol):
    """Makes a fresh job id from a job name."""

    def __call__(self, name: str) -> str: ...


def random_suffix(length: int = 5) -> str:
    import secrets  # here, not at module level: ``dispatch.clock`` is on every import path

    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


class RandomIds:
    """Job ids as ``<name>-<5 random chars>``: short, readable, valid Kubernetes names."""

    def __call__(self, name: str) -> str:
        return f"{name}-{random_suffix()}"


class CountingIds:
    """Deterministic ids for tests and the simulator: ``<name>-00001``, ``<name>-00002`` …"""

    def __init__(self) -> None:
        self._count = 0

    def __call__(self, name: str) -> str:
        self._count += 1
        return f"{name}-{self._count:05d}"

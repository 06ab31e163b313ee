"""A scalable clock: emulated cluster time that runs ``scale`` times faster than its base.

With ``scale=60`` a scenario minute passes in one real second; ``sleep(60)`` returns after one
real second and ``now()`` has advanced by 60. All durations inside the emulator (watch
``timeoutSeconds``, bookmark intervals, compaction window, controller delays) are in emulated
time. The base is any :class:`dispatch.clock.Clock` (``SystemClock`` by default,
``ManualClock`` in tests).
"""

from __future__ import annotations

from dispatch.clock import Clock, SystemClock


class ScaledClock:
    def __init__(
        self, scale: float = 1.0, base: Clock | None = None, start: float | None = None
    ) -> None:
        if scale <= 0:
            raise ValueError("scale must be positive")
        self.scale = scale
        self.base = base or SystemClock()
        self._base_origin = self.base.now()
        self._origin = self._base_origin if start is None else start

    def now(self) -> float:
        return self._origin + (self.base.now() - self._base_origin) * self.scale

    async def sleep(self, seconds: float) -> None:
        await self.base.sleep(max(0.0, seconds) / self.scale)

"""How late the event loop runs, so that a busy loop is not taken for quiet streams.

While the loop runs late (the supervisor's own work, a large list being decoded), watch events
wait unread in their sockets and every stream looks quiet. ``LoopLag`` beats every ``BEAT``
real seconds and keeps how much later than asked each beat woke (``lag``), fading by
``LAG_FADE`` a beat; ``late()`` is that lateness once it is worth counting (``LAG_FLOOR``).
The catch-up waits (``catchup.QUIET``) are lengthened by it.
"""

from __future__ import annotations

import asyncio

from dispatch.aio import stop

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

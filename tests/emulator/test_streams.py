"""The watch handler's timers: a timer cancelled before it ran leaves no coroutine behind."""

from __future__ import annotations

import asyncio
import gc
import warnings

from dispatch.testing.k8s.clock import ScaledClock
from dispatch.testing.k8s.streams import _task


def test_a_timer_cancelled_before_it_ran_warns_nothing() -> None:
    async def cancel_at_once() -> None:
        tick = _task(ScaledClock(10.0).sleep(60))  # a watch's next bookmark timer
        tick.cancel()  # the watch ended in the same round (its deadline)
        await asyncio.gather(tick, return_exceptions=True)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(cancel_at_once())
        gc.collect()
    assert [str(w.message) for w in caught] == []

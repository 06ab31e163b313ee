"""Stopping tasks: every task ends before ``stop`` returns; failures are not lost."""

from __future__ import annotations

import asyncio

import pytest

from dispatch.aio import first_of, stop


def test_stop_cancels_and_waits_for_every_task_even_after_one_failed() -> None:
    ended: list[str] = []

    async def runs(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # ends a step after the cancellation
            ended.append(name)

    async def fails() -> None:
        raise LookupError("boom")

    async def main() -> None:
        failing = asyncio.ensure_future(fails())
        a, b = asyncio.ensure_future(runs("a")), asyncio.ensure_future(runs("b"))
        await asyncio.sleep(0)
        with pytest.raises(LookupError):
            await stop(a, failing, None, b)
        assert a.done() and b.done() and sorted(ended) == ["a", "b"]

    asyncio.run(main())


def test_stop_swallows_the_exceptions_it_is_told_to() -> None:
    async def fails() -> None:
        raise TimeoutError

    async def main() -> None:
        task = asyncio.ensure_future(fails())
        await asyncio.sleep(0)
        await stop(task, also=(TimeoutError,))

    asyncio.run(main())


def test_first_of_returns_when_one_ends_and_stops_the_rest() -> None:
    async def main() -> None:
        event, slow = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, event.set)
        await asyncio.wait_for(first_of(event.wait(), slow.wait()), 5)
        assert len(asyncio.all_tasks()) == 1  # only this one: the other waiter was stopped

    asyncio.run(main())


def test_a_loop_that_stops_its_helper_ends_when_cancelled_while_stopping_it() -> None:
    """The shape of every watch loop: wait on a helper task, stop it, go round. A cancel
    that arrives while ``stop`` waits for the helper to end must end the loop, not be
    swallowed as if it were the helper's (it was: the loop went on for good, and whoever
    stopped it waited forever, so a background supervisor never exited)."""
    iterations = 0

    async def helper() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.05)  # takes a moment to end

    async def loop_with_helper() -> None:
        nonlocal iterations
        while True:
            iterations += 1
            sleeper = asyncio.ensure_future(helper())
            await asyncio.wait({sleeper}, timeout=0.01)
            await stop(sleeper)

    async def main() -> None:
        task = asyncio.ensure_future(loop_with_helper())
        await asyncio.sleep(0.03)  # the loop is inside ``stop``, waiting for the helper
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=2)
        assert done == {task} and task.cancelled() and iterations == 1

    asyncio.run(main())

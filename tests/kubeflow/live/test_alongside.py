"""Reads an observation needs (last output, a started mark) made beside the stream: one
attempt's read holds back no other attempt's observations, one attempt's observations stay in
order, at most ``at_once`` reads at a time, and nothing outlives the stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from functools import wraps
from typing import Any

import pytest

from dispatch.adapters.kubeflow.live.alongside import Read, alongside
from dispatch.model import AttemptHandle, Cause, Evidence, Observation, Outcome, State


def ran(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """The test, run on an event loop of its own."""

    @wraps(test)
    def run() -> None:
        asyncio.run(test())

    return run


def seen(job: str, state: State, *keys: str) -> Observation:
    handle = AttemptHandle(job, 1, "emu", f"{job}-1")
    evidence = tuple(Evidence("pod", key, 1.0) for key in keys)
    cause = Cause.APP_ERROR if state is State.FAILED else None
    return Observation(handle, Outcome(state=state, cause=cause), evidence)


async def source(
    items: Sequence[Observation | asyncio.Event], fail: BaseException | None = None
) -> AsyncIterator[Observation]:
    """The items in turn; an event in the list: wait until it is set."""
    for item in items:
        if isinstance(item, asyncio.Event):
            await item.wait()
        else:
            yield item
    if fail is not None:
        raise fail


def keys(observation: Observation) -> list[str]:
    return [e.key for e in observation.evidence]


@ran
async def test_an_attempt_waiting_on_its_read_holds_back_no_other() -> None:
    answer = asyncio.Event()
    started: list[str] = []

    def needs(observation: Observation) -> Read | None:
        if observation.outcome.state is not State.FAILED:
            return None

        async def read() -> tuple[Evidence, ...]:
            started.append(observation.handle.job_id)
            await answer.wait()
            return (Evidence("log", "last-output", 2.0),)

        return read

    stream = alongside(
        source([seen("a", State.FAILED, "pod-a"), seen("b", State.RUNNING, "pod-b")]), needs
    )
    first = await asyncio.wait_for(anext(stream), 5)
    assert (first.handle.job_id, keys(first)) == ("b", ["pod-b"])
    assert started == ["a"]
    answer.set()
    second = await asyncio.wait_for(anext(stream), 5)
    assert (second.handle.job_id, keys(second)) == ("a", ["pod-a", "last-output"])
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(stream), 5)


@ran
async def test_one_attempts_later_observations_wait_with_it_and_are_merged() -> None:
    answer, more = asyncio.Event(), asyncio.Event()

    def needs(observation: Observation) -> Read | None:
        if observation.outcome.state is not State.FAILED:
            return None

        async def read() -> tuple[Evidence, ...]:
            await answer.wait()
            return (Evidence("log", "last-output", 2.0),)

        return read

    later = Observation(
        AttemptHandle("a", 1, "emu", "a-1"),
        Outcome(state=State.FAILED, cause=Cause.APP_ERROR, summary="newer"),
    )
    later = Observation(later.handle, later.outcome, (Evidence("event", "ev-a", 3.0),))
    items: list[Observation | asyncio.Event] = [
        seen("a", State.FAILED, "pod-a"),
        later,
        seen("c", State.SUCCEEDED, "pod-c"),
        more,
    ]
    stream = alongside(source(items), needs)
    first = await asyncio.wait_for(anext(stream), 5)
    assert first.handle.job_id == "c"
    answer.set()
    second = await asyncio.wait_for(anext(stream), 5)
    assert second.handle.job_id == "a"
    assert second.outcome.summary == "newer"
    assert keys(second) == ["pod-a", "ev-a", "last-output"]
    more.set()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(stream), 5)


@ran
async def test_reads_at_once_are_bounded_and_every_observation_comes() -> None:
    running = 0
    most = 0

    def needs(observation: Observation) -> Read:
        async def read() -> tuple[Evidence, ...]:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1
            return (Evidence("log", f"words-{observation.handle.job_id}", 2.0),)

        return read

    items = [seen(f"j{i}", State.FAILED) for i in range(12)]
    got = [o async for o in alongside(source(items), needs, at_once=3)]
    assert most == 3
    assert sorted(o.handle.job_id for o in got) == sorted(f"j{i}" for i in range(12))
    assert all(keys(o) == [f"words-{o.handle.job_id}"] for o in got)


@ran
async def test_a_consumer_that_stops_stops_the_reads_under_way() -> None:
    cancelled = asyncio.Event()

    def needs(observation: Observation) -> Read | None:
        if observation.outcome.state is not State.FAILED:
            return None

        async def read() -> tuple[Evidence, ...]:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return ()

        return read

    never = asyncio.Event()
    items = [seen("a", State.FAILED), seen("b", State.RUNNING), never]
    stream = alongside(source(items), needs)
    assert (await asyncio.wait_for(anext(stream), 5)).handle.job_id == "b"
    await stream.aclose()
    assert cancelled.is_set()


@ran
async def test_the_streams_error_reaches_the_consumer() -> None:
    items: list[Observation | asyncio.Event] = [seen("b", State.RUNNING)]
    stream = alongside(source(items, fail=RuntimeError("stream broke")), lambda o: None)
    assert (await anext(stream)).handle.job_id == "b"
    with pytest.raises(RuntimeError, match="stream broke"):
        await anext(stream)


@ran
async def test_a_read_that_fails_delivers_its_observation_then_raises() -> None:
    def needs(observation: Observation) -> Read:
        async def read() -> tuple[Evidence, ...]:
            raise ValueError("a defect in a read")

        return read

    stream = alongside(source([seen("a", State.FAILED, "pod-a")]), needs)
    first = await anext(stream)
    assert keys(first) == ["pod-a"]
    with pytest.raises(ValueError, match="a defect in a read"):
        await anext(stream)


@ran
async def test_delivered_is_told_once_the_consumer_asked_for_the_next() -> None:
    told: list[str] = []
    items = [seen("a", State.FAILED), seen("b", State.RUNNING)]
    stream = alongside(
        source(items), lambda o: None, delivered=lambda o: told.append(o.handle.job_id)
    )
    assert (await anext(stream)).handle.job_id == "a"
    assert told == []  # taken, not yet handled: a consumer stopped here would not have it
    assert (await anext(stream)).handle.job_id == "b"
    assert told == ["a"]
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    assert told == ["a", "b"]


@ran
async def test_what_the_consumer_never_took_is_told_lost_with_its_evidence() -> None:
    """A stream replaced while one attempt's read is under way, another's observation is
    queued and a third was handed out without the next asked for: all three are lost, each
    with the evidence taken for it (the caller gives it back to the capture)."""
    lost: list[Observation] = []
    told: list[str] = []

    def needs(observation: Observation) -> Read | None:
        if observation.outcome.state is not State.FAILED:
            return None

        async def read() -> tuple[Evidence, ...]:
            await asyncio.sleep(60)
            return ()

        return read

    never = asyncio.Event()
    items = [
        seen("a", State.RUNNING, "pod-a"),
        seen("b", State.FAILED, "pod-b"),
        seen("c", State.RUNNING, "pod-c"),
        seen("d", State.RUNNING, "pod-d"),
        never,
    ]
    stream = alongside(
        source(items),
        needs,
        delivered=lambda o: told.append(o.handle.job_id),
        lost=lost.append,
    )
    assert (await anext(stream)).handle.job_id == "a"
    assert (await anext(stream)).handle.job_id == "c"  # b waits on its read; d is queued
    await stream.aclose()
    assert told == ["a"]
    assert sorted((o.handle.job_id, keys(o)) for o in lost) == [
        ("b", ["pod-b"]),
        ("c", ["pod-c"]),
        ("d", ["pod-d"]),
    ]

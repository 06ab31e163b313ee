"""Coroutines stepped by hand: parks, resumes, crashes."""

from __future__ import annotations

import pytest

from dispatch.sim.driver import PAUSE, Actor, Call, park


async def _work(log: list[str]) -> None:
    log.append("before")
    await park(Call("start", "s1", "job-1", 1))
    log.append("between")
    await park(Call(PAUSE, "s1", until=10.0))
    log.append("after")


def test_an_actor_runs_to_each_park_and_no_further() -> None:
    log: list[str] = []
    actor = Actor("s1", lambda: _work(log))
    assert log == []  # nothing runs before the first resume
    first = actor.resume()
    assert first is not None
    assert (first.op, first.job_id, first.attempt, log) == ("start", "job-1", 1, ["before"])
    pause = actor.resume()
    assert pause is not None
    assert pause.op == PAUSE
    assert not pause.ready(9.9)
    assert pause.ready(10.0)
    assert actor.resume() is None
    assert log == ["before", "between", "after"]
    assert not actor.alive


def test_a_killed_actor_does_nothing_more() -> None:
    log: list[str] = []
    actor = Actor("s1", lambda: _work(log))
    actor.resume()
    actor.kill()
    assert not actor.alive
    assert actor.parked is None
    assert log == ["before"]


async def _crashes() -> None:
    await park(Call("observe", "s1"))
    raise RuntimeError("boom")


def test_an_error_propagates_and_the_actor_is_dead() -> None:
    actor = Actor("s1", _crashes)
    actor.resume()
    with pytest.raises(RuntimeError, match="boom"):
        actor.resume()
    assert not actor.alive


def test_a_call_describes_its_fault() -> None:
    call = Call("cancel", "s2", "job-9", 3, fault="unknown-after")
    assert call.describe() == "cancel job-9 a3 [unknown-after]"

"""`dispatch run` prints progress and output in the order they happened (issue 26): the job's
state was read only between attempts, so "running" came after the failure it preceded."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

from dispatch.cli.cmd_run import follow
from dispatch.model import State


class _Job:
    """A scripted job: attempt 1 starts while the records still say queued, prints a line,
    is recorded running, fails; the records end the attempt and the job a moment later."""

    def __init__(self) -> None:
        self.state = State.QUEUED
        self.ended_at: float | None = None
        self.seen_running = asyncio.Event()

    async def get(self, job_id: str) -> Any:
        if self.state is State.RUNNING:
            self.seen_running.set()
        attempt = SimpleNamespace(number=1, native="pid 1", ended_at=self.ended_at)
        return SimpleNamespace(
            state=self.state, last_attempt=attempt, is_terminal=self.state.is_terminal
        )

    async def logs(self, job_id: str, *, follow: bool, attempt: int) -> AsyncIterator[str]:
        yield "[rank 0] loading"
        self.state = State.RUNNING
        # the failure comes after the supervisor recorded "running" and someone could read it
        with contextlib.suppress(TimeoutError):  # a follower that does not look: go on
            await asyncio.wait_for(self.seen_running.wait(), timeout=2)
        yield "[rank 1] boom"
        self.ended_at = 1.0  # the attempt ends; the job's state is still "running" a moment
        asyncio.get_running_loop().call_later(0.3, setattr, self, "state", State.FAILED)


def test_running_is_printed_before_the_failure_and_the_outcome_after_the_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    job = _Job()
    asyncio.run(asyncio.wait_for(follow(job, "j-1"), timeout=20))  # type: ignore[arg-type]
    assert capsys.readouterr().out.splitlines() == [
        "» j-1: queued",
        "» attempt 1 started",
        "[rank 0] loading",
        "» j-1: running",
        "[rank 1] boom",
        "» j-1: failed",
    ]

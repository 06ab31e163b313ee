"""The supervisor's Watcher: a stream restarted over more attempts does not report again
what it already delivered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from dispatch.model import AttemptHandle, Observation, Outcome, State
from dispatch.supervise.watching import Watcher


def handle(job: str) -> AttemptHandle:
    return AttemptHandle(job_id=job, attempt=1, cluster="kf", native=f"{job}-1")


class RepeatingAdapter:
    """Each stream yields every attempt's current outcome first, then waits."""

    def __init__(self) -> None:
        self.states: dict[str, State] = {}
        self.started = 0

    async def watch(self, handles: Sequence[AttemptHandle]) -> AsyncIterator[Observation]:
        self.started += 1
        for h in handles:
            yield Observation(h, Outcome(self.states.get(h.job_id, State.QUEUED)))
        await asyncio.Event().wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_restarted_stream_reports_only_what_is_new() -> None:
    async def main() -> None:
        adapter = RepeatingAdapter()
        adapters: Any = lambda cluster: adapter  # noqa: E731
        watcher = Watcher(adapters)
        a, b = handle("a"), handle("b")
        watcher.follow([a])
        await settle()
        assert watcher.ready_jobs() == ["a"]
        assert watcher.take(a) is not None
        watcher.follow([a, b])  # the set changed: the stream restarts and repeats a's outcome
        await settle()
        assert adapter.started == 2
        assert watcher.ready_jobs() == ["b"]  # a's unchanged outcome is not reported again
        assert watcher.take(b) is not None
        adapter.states["a"] = State.RUNNING
        watcher.follow([b, a, handle("c")])
        await settle()
        assert watcher.ready_jobs() == ["a", "c"]  # a changed
        await watcher.close()

    asyncio.run(main())

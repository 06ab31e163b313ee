"""A test world: a manual clock, an in-memory store, one shared memory scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from dispatch.adapters.base import Adapter, AdapterContext
from dispatch.adapters.memory import MemoryAdapter, MemoryScheduler
from dispatch.clock import CountingIds, ManualClock
from dispatch.config import ClusterConfig
from dispatch.model import AttemptHandle, Job, Observation, parse_spec
from dispatch.records import SqliteRecords
from dispatch.supervise import Supervisor

T = TypeVar("T")

RETRY_PREEMPTED = {
    "rules": [
        {
            "on": ["preempted", "node_lost"],
            "action": "retry",
            "limit": 2,
            "backoff": {"initial": "10s"},
        },
        {"on": ["app_error", "out_of_memory"], "action": "fail"},
        {"on": ["no_capacity"], "action": "hold"},
        {"on": ["unplanned_recovery"], "action": "retry", "limit": 1},
    ],
    "unmatched": "fail",
}


def run(awaitable: Awaitable[T]) -> T:
    async def wrapper() -> T:
        return await awaitable

    return asyncio.run(wrapper())


class YieldingAdapter(MemoryAdapter):
    """The memory adapter, but every call gives the event loop a turn first, like real I/O."""

    async def start(self, job: Job, attempt: int) -> AttemptHandle:
        await asyncio.sleep(0)
        return await super().start(job, attempt)

    async def observe(self, handle: AttemptHandle) -> Observation:
        await asyncio.sleep(0)
        return await super().observe(handle)

    async def cancel(self, handle: AttemptHandle, actor: str, reason: str) -> None:
        await asyncio.sleep(0)
        await super().cancel(handle, actor, reason)


class World:
    def __init__(self, shape: str = "slurm", *, yielding: bool = False, **settings: Any) -> None:
        self.clock = ManualClock(start=1000.0)
        self.store = SqliteRecords(":memory:", clock=self.clock, ids=CountingIds())
        self.scheduler = MemoryScheduler(clock=self.clock)
        self.cluster = ClusterConfig("mem", "memory", {"shape": shape, **settings})
        self.yielding = yielding

    def adapters(self, cluster: str) -> Adapter:
        kind = YieldingAdapter if self.yielding else MemoryAdapter
        context = AdapterContext(Path("."), self.clock)
        return kind(self.cluster, context, scheduler=self.scheduler)

    def supervisor(self, owner: str = "s1", **options: Any) -> Supervisor:
        options.setdefault("lease_ttl", 30.0)
        options.setdefault("poll_interval", 5.0)
        return Supervisor(self.store, self.adapters, self.clock, owner, **options)

    def submit(self, scenario: str, recovery: Mapping[str, Any] | None = None, **spec: Any) -> str:
        fields: dict[str, Any] = {
            "name": "train",
            "cluster": "mem",
            "command": ["python", "train.py"],
            "env": {"MEMORY_SCENARIO": scenario},
            "recovery": recovery or RETRY_PREEMPTED,
        }
        fields.update(spec)
        return self.store.create_job(parse_spec(fields)).id

    def decisions(self, job_id: str) -> list[Mapping[str, Any]]:
        return [e.data for e in self.store.log(job_id) if e.kind == "decision"]

    def actions(self, job_id: str) -> Sequence[str]:
        return [d["action"] for d in self.decisions(job_id)]

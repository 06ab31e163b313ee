"""The conformance suite against the memory scheduler, in both shapes (virtual time)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dispatch.adapters.base import Adapter, AdapterContext
from dispatch.adapters.memory import MemoryAdapter, MemoryScheduler
from dispatch.clock import ManualClock
from dispatch.config import ClusterConfig
from dispatch.conformance import AdapterFixture, Check, checks_parameters, run_under_pytest
from dispatch.model import JobSpec, parse_spec


def _spec(name: str, scenario: str, **extra: object) -> JobSpec:
    fields = {
        "name": name,
        "cluster": "mem",
        "nodes": 2,
        "procsPerNode": 2,
        "command": ["python", "train.py"],
        "image": "train:latest",
        "env": {"MEMORY_SCENARIO": scenario},
        **extra,
    }
    return parse_spec(fields)


def memory_fixture(shape: str, kind: type[MemoryAdapter] = MemoryAdapter) -> AdapterFixture:
    """A fresh memory world; ``kind`` lets a test put a (broken) subclass under test."""
    clock = ManualClock()
    scheduler = MemoryScheduler(clock=clock)
    cluster = ClusterConfig("mem", "memory", {"shape": shape, "evidenceTTL": 3600.0})

    def make() -> Adapter:
        return kind(cluster, AdapterContext(Path("."), clock), scheduler=scheduler)

    async def advance(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    return AdapterFixture(
        name=f"memory-{shape}",
        make_adapter=make,
        succeeds=_spec("quick", "succeeded@5 queue=1"),
        fails=_spec("fails", "app_error@3 exit=3 rank=1"),
        runs_long=_spec("long", "hang"),
        refused=_spec("huge", "succeeded@5", resources={"gpu": 64}),
        advance=advance,
        patience=600.0,
        poll=1.0,
        real_timeout=30.0,
        footprint=lambda: tuple(sorted(scheduler.executions)),
    )


@pytest.mark.parametrize("shape", ["slurm", "kubernetes"])
@pytest.mark.parametrize("check", checks_parameters())
def test_memory_scheduler_conforms(check: Check, shape: str) -> None:
    run_under_pytest(check, memory_fixture(shape))

"""The memory scheduler: scripted, clock-driven behaviour in both shapes, through the SPI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dispatch.adapters.base import Adapter, AdapterContext, Holder, OutputReader
from dispatch.adapters.memory import (
    Fault,
    MemoryAdapter,
    MemoryScheduler,
    Result,
    parse_scenario,
)
from dispatch.adapters.registry import open_adapter
from dispatch.clock import ManualClock
from dispatch.config import ClusterConfig
from dispatch.model import (
    Cause,
    InvalidSpec,
    Job,
    NotFound,
    OutcomeUnknown,
    SchedulerUnavailable,
    State,
    Unsupported,
    parse_spec,
)

T = TypeVar("T")


def run(awaitable: Awaitable[T]) -> T:
    async def wrapper() -> T:
        return await awaitable

    return asyncio.run(wrapper())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=1000.0)


def make(
    clock: ManualClock,
    shape: str = "slurm",
    scheduler: MemoryScheduler | None = None,
    **settings: Any,
) -> MemoryAdapter:
    cluster = ClusterConfig(name="mem", adapter="memory", settings={"shape": shape, **settings})
    return MemoryAdapter(cluster, AdapterContext(Path("."), clock), scheduler=scheduler)


def job(scenario: str, **spec: Any) -> Job:
    fields = {"name": "train", "command": ["python", "t.py"], "nodes": 2, "cluster": "mem"}
    fields.update(spec)
    fields["env"] = {"MEMORY_SCENARIO": scenario}
    return Job(id="train-00001", spec=parse_spec(fields), created_at=0.0)


def test_the_registry_opens_it_and_it_has_every_part(clock: ManualClock) -> None:
    adapter = open_adapter(
        ClusterConfig(name="mem", adapter="memory"), AdapterContext(Path("."), clock)
    )
    assert isinstance(adapter, MemoryAdapter)
    assert isinstance(adapter, Adapter)
    assert isinstance(adapter, Holder)
    assert isinstance(adapter, OutputReader)


def test_scenarios_parse_and_bad_ones_are_refused() -> None:
    scenario = parse_scenario("preempted@30 queue=5; app_error@10 exit=3 rank=1")
    assert scenario.for_attempt(1).result is Result.PREEMPTED
    assert scenario.for_attempt(1).queue == 5
    assert scenario.for_attempt(2).exit_code == 3
    assert scenario.for_attempt(7).rank == 1  # the last entry applies to later attempts
    with pytest.raises(InvalidSpec, match="unknown result"):
        parse_scenario("exploded@3")
    with pytest.raises(InvalidSpec, match="unknown option"):
        parse_scenario("succeeded@3 colour=2")


@pytest.mark.parametrize("shape", ["slurm", "kubernetes"])
def test_start_is_idempotent_by_name(clock: ManualClock, shape: str) -> None:
    adapter = make(clock, shape)
    spec_job = job("succeeded@10", image="img")
    first = run(adapter.start(spec_job, 1))
    again = run(adapter.start(spec_job, 1))
    other = make(clock, shape, scheduler=adapter.scheduler)  # a second supervisor's adapter
    third = run(other.start(spec_job, 1))
    assert first == again == third
    assert adapter.scheduler.creations[(spec_job.id, 1)] == 1
    assert run(adapter.start(spec_job, 2)) != first


def test_a_slow_start_then_success(clock: ManualClock) -> None:
    adapter = make(clock)
    handle = run(adapter.start(job("succeeded@60 queue=10"), 1))
    assert run(adapter.observe(handle)).state is State.QUEUED
    clock.advance(10)
    assert run(adapter.observe(handle)).state is State.RUNNING
    assert adapter.scheduler.live("train-00001", 1)
    clock.advance(60)
    seen = run(adapter.observe(handle))
    assert (seen.state, seen.outcome.cause) == (State.SUCCEEDED, None)
    assert {e.key.rsplit("/", 1)[1] for e in seen.evidence} == {"submitted", "started", "ended"}
    assert not adapter.scheduler.live("train-00001")


@pytest.mark.parametrize(
    ("scenario", "cause", "rank", "exit_code"),
    [
        ("app_error@5 exit=3 rank=1", Cause.APP_ERROR, 1, 3),
        ("out_of_memory@5 rank=2", Cause.OUT_OF_MEMORY, 2, 137),
        ("node_lost@5 node=1", Cause.NODE_LOST, None, None),
        ("preempted@5", Cause.PREEMPTED, None, None),
        ("start_failure", Cause.START_FAILURE, 0, 127),
        ("no_capacity@5", Cause.NO_CAPACITY, None, None),
    ],
)
def test_scripted_failures_carry_their_cause(
    clock: ManualClock, scenario: str, cause: Cause, rank: int | None, exit_code: int | None
) -> None:
    adapter = make(clock)
    handle = run(adapter.start(job(scenario), 1))
    clock.advance(5)
    outcome = run(adapter.observe(handle)).outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, cause)
    if rank is not None:
        assert outcome.first_failure is not None
        assert (outcome.first_failure.rank, outcome.first_failure.exit_code) == (rank, exit_code)


def test_a_time_limit_ends_a_hanging_job_with_timeout(clock: ManualClock) -> None:
    adapter = make(clock)
    handle = run(adapter.start(job("hang", timeLimit="1m"), 1))
    clock.advance(59)
    assert run(adapter.observe(handle)).state is State.RUNNING
    clock.advance(1)
    assert run(adapter.observe(handle)).outcome.cause is Cause.TIMEOUT


def test_a_requeue_reruns_the_ranks_which_is_reported_as_unplanned_recovery(
    clock: ManualClock,
) -> None:
    adapter = make(clock)
    handle = run(adapter.start(job("preempted@10 rerun=5"), 1))
    clock.advance(12)
    assert run(adapter.observe(handle)).state is State.QUEUED  # suspended, not ended
    clock.advance(3)
    rerun = run(adapter.observe(handle))
    assert (rerun.state, rerun.outcome.cause) == (State.RUNNING, Cause.UNPLANNED_RECOVERY)
    assert adapter.scheduler.live("train-00001", 1)[0].status(clock.now()).runs == 2


def test_cancel_names_the_actor_and_is_idempotent(clock: ManualClock) -> None:
    adapter = make(clock)
    handle = run(adapter.start(job("hang"), 1))
    clock.advance(5)
    run(adapter.cancel(handle, "alice", "wrong data"))
    run(adapter.cancel(handle, "bob", "again"))
    outcome = run(adapter.observe(handle)).outcome
    assert (outcome.state, outcome.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert "alice: wrong data" in outcome.summary
    ended = run(adapter.start(job("succeeded@1"), 2))
    clock.advance(2)
    run(adapter.cancel(ended, "carol", ""))  # cancelling an ended attempt changes nothing
    assert run(adapter.observe(ended)).state is State.SUCCEEDED


def test_hold_delays_the_start_and_release_lets_it_run(clock: ManualClock) -> None:
    adapter = make(clock)
    handle = run(adapter.start(job("succeeded@10 queue=5"), 1))
    run(adapter.hold(handle))
    clock.advance(100)
    assert run(adapter.observe(handle)).state is State.HELD
    run(adapter.release(handle))
    clock.advance(5)
    assert run(adapter.observe(handle)).state is State.RUNNING
    with pytest.raises(Unsupported) as refused:
        run(adapter.hold(handle))
    assert refused.value.rules == ("hold-running",)


def test_kubernetes_shape_loses_evidence_then_the_object(clock: ManualClock) -> None:
    adapter = make(clock, "kubernetes", evidenceTTL=30, vanishAfter=100)
    handle = run(adapter.start(job("app_error@10", image="img"), 1))
    clock.advance(10)
    ended = run(adapter.observe(handle))
    assert {e.kind for e in ended.evidence} >= {"pod"}
    clock.advance(30)
    assert {e.kind for e in run(adapter.observe(handle)).evidence} == {"job"}
    clock.advance(70)
    gone = run(adapter.observe(handle))
    assert gone.gone
    assert gone.outcome.cause is Cause.APP_ERROR  # derived from what this adapter saw before
    stranger = make(
        clock, "kubernetes", scheduler=adapter.scheduler, evidenceTTL=30, vanishAfter=100
    )
    assert run(stranger.observe(handle)).outcome.cause is Cause.UNKNOWN


def test_capabilities_give_every_refusal_and_start_creates_nothing(clock: ManualClock) -> None:
    adapter = make(clock, "kubernetes", maxNodes=2, gpusPerNode=1)
    greedy = job("succeeded@1", nodes=4, resources={"gpu": 2})
    report = run(adapter.capabilities(greedy.spec))
    assert {r.rule for r in report.refusals} == {"memory-nodes", "memory-gpus", "memory-image"}
    with pytest.raises(Unsupported):
        run(adapter.start(greedy, 1))
    assert not adapter.scheduler.executions
    plan = run(adapter.plan(greedy, 1))
    assert not plan.accepted
    assert plan.artifacts[0].name == "train-00001-a1"


def test_watch_lists_once_per_cycle_however_many_attempts(clock: ManualClock) -> None:
    adapter = make(clock, watchInterval=5)
    handles = [run(adapter.start(job("succeeded@7"), n)) for n in (1, 2, 3)]

    async def collect() -> list[tuple[int, State]]:
        seen: list[tuple[int, State]] = []
        stream: AsyncIterator[Any] = adapter.watch(handles)
        async for observation in stream:
            seen.append((observation.handle.attempt, observation.state))
            if sum(1 for _, s in seen if s is State.SUCCEEDED) == 3:
                break
        return seen

    seen = run(collect())
    assert seen[:3] == [(1, State.RUNNING), (2, State.RUNNING), (3, State.RUNNING)]
    assert seen[3:] == [(1, State.SUCCEEDED), (2, State.SUCCEEDED), (3, State.SUCCEEDED)]
    assert adapter.scheduler.calls["list"] == 3  # cycles at 0 s, 5 s and 10 s: one each
    assert adapter.scheduler.calls["observe"] == 0


def test_injected_faults(clock: ManualClock) -> None:
    adapter = make(clock)
    the_job = job("hang")
    adapter.scheduler.inject("start", Fault.UNAVAILABLE, Fault.UNKNOWN_AFTER)
    with pytest.raises(SchedulerUnavailable):
        run(adapter.start(the_job, 1))
    assert not adapter.scheduler.executions
    with pytest.raises(OutcomeUnknown):
        run(adapter.start(the_job, 1))
    assert adapter.scheduler.creations[(the_job.id, 1)] == 1  # it did take effect
    handle = run(adapter.start(the_job, 1))  # adopting it is safe
    assert adapter.scheduler.creations[(the_job.id, 1)] == 1
    assert run(adapter.observe(handle)).state is State.RUNNING


def test_output_per_rank_and_all_ranks(clock: ManualClock) -> None:
    adapter = make(clock)
    handle = run(adapter.start(job("succeeded@5", procsPerNode=2), 1))

    async def lines(rank: int | None, follow: bool) -> list[str]:
        return [line async for line in adapter.read_output(handle, rank, follow)]

    assert run(lines(3, False)) == ["attempt 1 rank 3 started"]
    followed = run(lines(None, True))  # the manual clock's sleep moves time on
    assert followed[0] == "[rank 0] attempt 1 rank 0 started"
    assert followed[-1] == "[rank 3] rank 3 ended: every rank exited 0"
    assert len(followed) == 8
    with pytest.raises(NotFound):
        run(lines(4, False))

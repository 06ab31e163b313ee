"""The supervisor loop against the memory scheduler, with a manual clock."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.memory import Fault, MemoryAdapter, SimulatedCrash
from dispatch.clock import CountingIds
from dispatch.model import (
    AttemptHandle,
    Cause,
    Evidence,
    Job,
    LeaseLost,
    Observation,
    Outcome,
    RecordsUnavailable,
    State,
)
from dispatch.records import JobRecord, Lease, SqliteRecords
from dispatch.supervise import DecisionKind, Supervisor
from dispatch.supervise.report import JobReport
from tests.supervise.world import World, run


def test_a_job_that_succeeds(world: World) -> None:
    job = world.submit("succeeded@20 queue=5")
    run(world.supervisor().drive(job))
    record = world.store.get_job(job)
    assert (record.state, record.cause) == (State.SUCCEEDED, None)
    assert [a.attempt for a in world.store.attempts(job)] == [1]
    assert world.actions(job) == ["start", "finish"]
    assert {e.key.rsplit("/", 1)[1] for e in world.store.evidence(job, 1)} >= {"started", "ended"}
    assert not world.store.open_intents()
    assert world.store.lease(job) is None  # released when the job ended


@pytest.mark.parametrize("shape", ["slurm", "kubernetes"])
def test_a_preempted_attempt_is_followed_by_attempt_2_after_the_backoff(shape: str) -> None:
    world = World(shape, evidenceTTL=6, vanishAfter=20)
    job = world.submit("preempted@30; succeeded@60", image="img")
    run(world.supervisor().drive(job))
    attempts = world.store.attempts(job)
    assert [a.attempt for a in attempts] == [1, 2]
    first, second = attempts
    assert first.outcome is not None
    assert first.outcome.cause is Cause.PREEMPTED
    assert first.ended_at is not None
    assert second.created_at >= first.ended_at + 10  # the rule's backoff
    assert world.store.get_job(job).state is State.SUCCEEDED
    assert world.actions(job) == ["start", "wait", "start", "finish"]
    assert "retry 1 of 2" in world.decisions(job)[2]["reason"]
    assert world.scheduler.creations == {(job, 1): 1, (job, 2): 1}
    world.clock.advance(100)  # by now the kubernetes shape has removed pods and objects
    kept = {e.key.rsplit("/", 1)[1] for e in world.store.evidence(job, 1)}
    assert {"submitted", "started", "ended"} <= kept
    assert not world.scheduler.live(job)


def test_an_exhausted_retry_limit_fails_with_the_cause(world: World) -> None:
    job = world.submit("node_lost@5")
    run(world.supervisor().drive(job))
    record = world.store.get_job(job)
    assert (record.state, record.cause) == (State.FAILED, Cause.NODE_LOST)
    assert "retry limit 2 exhausted" in record.summary
    assert len(world.store.attempts(job)) == 3


def test_a_fail_rule_fails_with_exit_code_evidence(world: World) -> None:
    job = world.submit("app_error@5 exit=3 rank=1")
    run(world.supervisor().drive(job))
    record = world.store.get_job(job)
    assert (record.state, record.cause) == (State.FAILED, Cause.APP_ERROR)
    outcome = world.store.attempts(job)[0].outcome
    assert outcome is not None
    assert outcome.first_failure is not None
    assert (outcome.first_failure.rank, outcome.first_failure.exit_code) == (1, 3)


@pytest.mark.parametrize(("unmatched", "state"), [("fail", State.FAILED), ("hold", State.HELD)])
def test_the_unmatched_policy(world: World, unmatched: str, state: State) -> None:
    recovery = {"rules": [{"on": ["preempted"], "action": "fail"}], "unmatched": unmatched}
    job = world.submit("hang", recovery, timeLimit="1m")
    supervisor = world.supervisor()
    for _ in range(4):
        run(supervisor.step())
        world.clock.advance(30)
    record = world.store.get_job(job)
    assert (record.state, record.cause) == (state, Cause.TIMEOUT)
    assert f"no rule names timeout; unmatched: {unmatched}" in record.summary


def test_hold_then_release_starts_the_next_attempt(world: World) -> None:
    job = world.submit("no_capacity@5; succeeded@5")
    supervisor = world.supervisor()
    run(supervisor.step())
    world.clock.advance(5)
    run(supervisor.step())
    assert world.store.get_job(job).state is State.HELD
    for _ in range(3):
        world.clock.advance(100)
        run(supervisor.step())
    assert len(world.store.attempts(job)) == 1  # held: nothing starts without a release
    assert world.actions(job) == ["start", "hold", "nothing"]
    world.store.request_release(job)
    report = run(supervisor.step())
    assert report.jobs[0].last is not None
    assert (report.jobs[0].last.kind, report.jobs[0].last.attempt) == (DecisionKind.START, 2)
    run(supervisor.drive(job))
    assert world.store.get_job(job).state is State.SUCCEEDED


def test_cancel_stops_the_attempt_and_names_the_actor(world: World) -> None:
    job = world.submit("hang")
    supervisor = world.supervisor()
    run(supervisor.step())
    world.clock.advance(5)
    run(supervisor.step())
    assert world.store.get_job(job).state is State.RUNNING
    world.store.request_cancel(job, "alice", "wrong data")
    run(supervisor.step())
    record = world.store.get_job(job)
    assert (record.state, record.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert "cancelled by alice: wrong data" in record.summary
    assert not world.scheduler.live(job)
    assert world.actions(job) == ["start", "cancel", "finish"]


def test_a_rerun_inside_an_attempt_is_stopped_and_retried_as_a_new_attempt(world: World) -> None:
    job = world.submit("preempted@10 rerun=5; succeeded@5")
    run(world.supervisor().drive(job))
    first = world.store.attempts(job)[0]
    assert first.outcome is not None
    assert first.outcome.cause is Cause.UNPLANNED_RECOVERY
    assert not world.scheduler.live(job, 1)
    assert world.store.get_job(job).state is State.SUCCEEDED
    assert len(world.store.attempts(job)) == 2


@pytest.mark.parametrize("fault", [Fault.CRASH, Fault.CRASH_AFTER])
def test_a_crash_around_start_is_reconciled_without_a_second_execution(
    world: World, fault: Fault
) -> None:
    job = world.submit("succeeded@20")
    world.scheduler.inject("start", fault)
    with pytest.raises(SimulatedCrash):
        run(world.supervisor("dead").step())
    [intent] = world.store.open_intents(job)
    assert (intent.operation, intent.attempt, intent.owner) == ("start", 1, "dead")
    heir = world.supervisor("heir")
    assert run(heir.step()).jobs[0].note == "leased by another supervisor"
    world.clock.advance(31)  # the dead supervisor's lease expires
    report = run(heir.step())
    assert any("adopted" in note for note in report.jobs[0].reconciled)
    run(heir.drive(job))
    assert world.store.get_job(job).state is State.SUCCEEDED
    assert world.scheduler.creations == {(job, 1): 1}
    assert not world.store.open_intents()


def test_an_intent_written_just_before_a_crash_is_rolled_back(world: World) -> None:
    job = world.submit("succeeded@20")
    intent = world.store.open_intent(job, "start", "dead", attempt=1)  # then the crash
    run(world.supervisor().drive(job))
    assert world.store.get_job(job).state is State.SUCCEEDED
    rolled = [i for i in world.store.open_intents(job) if i.id == intent.id]
    assert not rolled
    assert world.scheduler.creations == {(job, 1): 1}


def test_outcome_unknown_on_start_means_re_observe_and_adopt(world: World) -> None:
    job = world.submit("succeeded@20")
    world.scheduler.inject("start", Fault.UNKNOWN_AFTER)
    supervisor = world.supervisor()
    first = run(supervisor.step())
    assert first.jobs[0].retry
    assert [i.operation for i in world.store.open_intents(job)] == ["start"]
    run(supervisor.drive(job))
    assert world.store.get_job(job).state is State.SUCCEEDED
    assert world.scheduler.creations == {(job, 1): 1}


@pytest.mark.parametrize("at_once", [1, 32])
def test_two_supervisors_racing_only_one_acts_per_job(at_once: int) -> None:
    world = World(yielding=True)
    jobs = [world.submit(f"preempted@{5 * n}; succeeded@10") for n in (1, 2, 3)]
    first = world.supervisor("s1", ticks_at_once=at_once)
    second = world.supervisor("s2", ticks_at_once=at_once)

    async def race() -> None:
        for _ in range(12):
            await asyncio.gather(first.step(), second.step())
            world.clock.advance(5)

    run(race())
    acting: set[str] = set()
    for job in jobs:
        assert world.store.get_job(job).state is State.SUCCEEDED
        owners = {d["owner"] for d in world.decisions(job)}
        assert len(owners) == 1, owners
        acting |= owners
    if at_once == 1:  # one job at a time: each pass yields between jobs, so both get some
        assert acting == {"s1", "s2"}  # both were busy, each on its own jobs
    assert all(count == 1 for count in world.scheduler.creations.values())
    assert len(world.scheduler.creations) == 6


def test_a_lease_that_expires_is_taken_over_without_a_new_attempt(world: World) -> None:
    job = world.submit("succeeded@100")
    run(world.supervisor("s1").step())
    world.clock.advance(31)
    run(world.supervisor("s2").drive(job))
    assert world.store.get_job(job).state is State.SUCCEEDED
    assert [a.attempt for a in world.store.attempts(job)] == [1]


def test_run_watches_instead_of_polling_each_job(world: World) -> None:
    jobs = [world.submit("succeeded@30"), world.submit("preempted@10; succeeded@10")]
    supervisor = world.supervisor()

    async def supervise() -> None:
        stop = asyncio.Event()
        task = asyncio.ensure_future(supervisor.run(stop))
        for _ in range(10_000):
            if all(world.store.get_job(j).state.is_terminal for j in jobs):
                break
            await asyncio.sleep(0)
        stop.set()
        await asyncio.wait_for(task, timeout=10)

    run(supervise())
    assert [world.store.get_job(j).state for j in jobs] == [State.SUCCEEDED] * 2
    assert world.scheduler.calls["observe"] == 0
    assert world.scheduler.calls["list"] > 0


def test_intents_are_closed_after_a_retry(world: World) -> None:
    job = world.submit("preempted@5; succeeded@5")
    run(world.supervisor().drive(job))
    assert not world.store.open_intents()
    assert world.scheduler.calls["start"] == 2


class _Reports:
    """A watcher whose streams reported on the jobs in ``ready`` (job -> the number of its
    latest observation)."""

    def __init__(self, ready: dict[str, int]) -> None:
        self.ready = ready
        self.changed = asyncio.Event()
        self.news = asyncio.Event()

    def follow(self, handles: object) -> None:
        pass

    def ready_jobs(self) -> list[str]:
        return sorted(self.ready)

    def arrival(self, job_id: str) -> int:
        return self.ready.get(job_id, 0)


@pytest.mark.parametrize("at_once", [1, 32])
def test_a_long_pass_ticks_a_job_again_for_each_new_observation(world: World, at_once: int) -> None:
    """A pass that submits thousands of jobs lasts minutes: a job ticked early in it must be
    ticked again when its stream reports its end, not once the pass is over."""
    jobs = [world.submit("succeeded@30") for _ in range(3)]
    supervisor = world.supervisor(ticks_at_once=at_once)
    ready: dict[str, int] = {}  # job -> the number of its latest observation

    ticks: list[str] = []

    async def tick(job_id: str) -> JobReport:
        ticks.append(job_id)
        if len(ticks) == 1:
            ready[job_id] = 1  # the first job's stream reports, right after its start
        if len(ticks) == 3:
            ready[ticks[0]] = 2  # and again later in the same pass (its end, say)
        return JobReport(job_id)

    supervisor.watcher = _Reports(ready)  # type: ignore[assignment]
    supervisor.tick = tick  # type: ignore[method-assign]
    run(supervisor._pass(None, watched=True))
    if at_once == 1:
        first, second, third = ticks[0], ticks[2], ticks[4]
        assert {first, second, third} == set(jobs)
        assert ticks == [first, first, second, first, third]  # once per observation
        return
    # all three at once: both observations of the first job arrive while they run, so it is
    # ticked once more, for the newest; the others once each
    first = ticks[0]
    assert set(ticks[:3]) == set(jobs)
    assert ticks[3:] == [first]


def test_a_job_observed_while_its_tick_runs_is_ticked_again_after_it(world: World) -> None:
    """Never one job twice at the same time: an observation that arrives during the job's
    tick is served by a tick that starts once the first one ended."""
    jobs = [world.submit("succeeded@30") for _ in range(2)]
    supervisor = world.supervisor(ticks_at_once=4)
    ready: dict[str, int] = {}
    running: set[str] = set()
    overlaps: list[str] = []
    ticks: list[str] = []

    async def tick(job_id: str) -> JobReport:
        if job_id in running:
            overlaps.append(job_id)
        running.add(job_id)
        ticks.append(job_id)
        if len(ticks) == 1:
            ready[job_id] = 1  # its stream reports while this tick still runs (and the
            for _ in range(5):  # other job's tick ends meanwhile)
                await asyncio.sleep(0)
        else:
            await asyncio.sleep(0)
        running.discard(job_id)
        return JobReport(job_id)

    supervisor.watcher = _Reports(ready)  # type: ignore[assignment]
    supervisor.tick = tick  # type: ignore[method-assign]
    run(supervisor._pass(None, watched=True))
    assert not overlaps
    assert sorted(ticks[:2]) == sorted(jobs) and ticks[2:] == [ticks[0]]


def test_a_failed_tick_starts_no_other_and_is_raised_once_the_running_ones_end(
    world: World,
) -> None:
    """A tick that fails (the records not answering) ends the pass: the ticks already under
    way are let end, no other is started, and the failure is raised."""
    for _ in range(8):
        world.submit("succeeded@30")
    supervisor = world.supervisor(ticks_at_once=3)
    started: list[str] = []
    ended: list[str] = []

    async def tick(job_id: str) -> JobReport:
        started.append(job_id)
        if len(started) == 2:
            raise RecordsUnavailable("the database went away")
        for _ in range(5):
            await asyncio.sleep(0)
        ended.append(job_id)
        return JobReport(job_id)

    supervisor.tick = tick  # type: ignore[method-assign]
    with pytest.raises(RecordsUnavailable):
        run(supervisor.step())
    assert len(started) == 3  # the first three at once; none after the failure
    assert ended == [started[0], started[2]]  # those running were let end, not cancelled


def test_a_slow_tick_holds_back_no_other(world: World) -> None:
    """Up to ``ticks_at_once`` ticks run at once, and one that ends makes room for the next at
    once: a start waiting out a ``Retry-After`` does not hold the starts after it."""
    for _ in range(5):
        world.submit("succeeded@30")
    supervisor = world.supervisor(ticks_at_once=2)
    slow_may_end = asyncio.Event()
    started: list[str] = []
    ended_while_slow: list[str] = []
    most = 0
    running: set[str] = set()

    async def tick(job_id: str) -> JobReport:
        nonlocal most
        started.append(job_id)
        running.add(job_id)
        most = max(most, len(running))
        if len(started) == 1:
            await slow_may_end.wait()
        else:
            await asyncio.sleep(0)
            if not slow_may_end.is_set():
                ended_while_slow.append(job_id)
            if len(ended_while_slow) == 4:
                slow_may_end.set()
        running.discard(job_id)
        return JobReport(job_id)

    supervisor.tick = tick  # type: ignore[method-assign]
    report = run(supervisor.step())
    assert len(report.jobs) == 5
    assert ended_while_slow == started[1:]  # the four others, one after another, beside it
    assert most == 2


def test_an_observed_end_is_ticked_beside_a_full_window(world: World) -> None:
    """The window is full of starts waiting on a busy API server (and narrowed while the loop
    runs late): a job whose stream reported its end is ticked at once beside them, not after
    one of them ends; the pass's own ticks still wait for room, and at most ``ticks_at_once``
    observed ones run beside the window."""
    jobs = [world.submit("succeeded@30") for _ in range(8)]
    supervisor = world.supervisor(ticks_at_once=2)
    starts_may_end = asyncio.Event()
    ready: dict[str, int] = {}
    running: set[str] = set()
    most = 0
    ended: list[str] = []
    ticked_while_full: list[str] = []

    async def tick(job_id: str) -> JobReport:
        nonlocal most
        running.add(job_id)
        most = max(most, len(running))
        if job_id in ready:
            ticked_while_full.append(job_id)
            for _ in range(3):
                await asyncio.sleep(0)
            ready.pop(job_id)
            if not ready:
                starts_may_end.set()
        elif not starts_may_end.is_set():
            if len(running) == 2:  # the window is full: three of the others end meanwhile
                ended.extend([j for j in jobs if j not in running][:3])
                ready.update(dict.fromkeys(ended, 1))
                supervisor.watcher.news.set()
            await starts_may_end.wait()
        running.discard(job_id)
        return JobReport(job_id)

    supervisor.watcher = _Reports(ready)  # type: ignore[assignment]
    supervisor.tick = tick  # type: ignore[method-assign]
    run(asyncio.wait_for(supervisor._pass(None, watched=True), 20))  # the starts never end
    assert len(ended) == 3  # unless the three ended are ticked beside them
    assert sorted(ticked_while_full) == sorted(ended)
    assert most == 4  # the window of 2, and 2 observed ticks beside it at most


@pytest.mark.parametrize("late", [0.0, 0.3])
def test_fewer_ticks_run_at_once_while_the_event_loop_runs_late(world: World, late: float) -> None:
    """A supervisor whose loop runs late (its own work starving the streams that report ends)
    starts fewer ticks at once: the window halves, and grows back while the loop keeps time."""
    for _ in range(24):
        world.submit("succeeded@30")
    supervisor = world.supervisor(ticks_at_once=8)
    supervisor._lag.lag = late  # not started by ``step``: it stays as set
    running: set[str] = set()
    at_once: list[int] = []

    async def tick(job_id: str) -> JobReport:
        running.add(job_id)
        at_once.append(len(running))
        for _ in range(3):
            await asyncio.sleep(0)
        running.discard(job_id)
        return JobReport(job_id)

    supervisor.tick = tick  # type: ignore[method-assign]
    report = run(supervisor.step())
    assert len(report.jobs) == 24
    if not late:
        assert max(at_once[8:]) == 8 and supervisor.width == 8
        return
    assert max(at_once[:8]) == 8  # the first window, before any tick ended late
    assert max(at_once[8:]) <= 4  # halved once (at most once per NARROW_EVERY seconds)
    assert supervisor.width == 4
    supervisor._lag.lag = 0.0
    for _ in range(4):  # on time again: about one more per ``width`` ticks ended
        supervisor._adapt(4)
    assert supervisor.width > 7


def test_a_pass_cancelled_leaves_no_tick_running(world: World) -> None:
    for _ in range(4):
        world.submit("succeeded@30")
    supervisor = world.supervisor(ticks_at_once=3)
    started: list[str] = []
    stopped: list[str] = []

    async def tick(job_id: str) -> JobReport:
        started.append(job_id)
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append(job_id)
        return JobReport(job_id)

    async def scenario() -> None:
        passing = asyncio.ensure_future(supervisor.step())
        while len(started) < 3:
            await asyncio.sleep(0)
        passing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await passing
        assert sorted(stopped) == sorted(started)  # each was cancelled and has ended

    supervisor.tick = tick  # type: ignore[method-assign]
    run(scenario())
    assert len(started) == 3


class _PausingRecords(SqliteRecords):
    """A store where ``pauser`` stalls right after renewing its lease, once armed, for longer
    than the TTL, while ``heir`` takes the job over (a GC pause or a slow disk between a
    supervisor's renewal and its write)."""

    def __init__(self, world: World, pauser: str, heir: str) -> None:
        super().__init__(":memory:", clock=world.clock, ids=CountingIds())
        self.world, self.pauser, self.heir = world, pauser, heir
        self.armed = False

    def acquire_lease(self, job_id: str, owner: str, ttl: float) -> Lease | None:
        lease = super().acquire_lease(job_id, owner, ttl)
        if self.armed and owner == self.pauser and lease is not None:
            self.armed = False
            self.world.clock.advance(ttl + 1)
            assert super().acquire_lease(job_id, self.heir, ttl) is not None
        return lease


def test_a_write_after_the_lease_was_taken_over_is_refused_and_the_heir_adopts() -> None:
    world = World()
    store = _PausingRecords(world, "paused", "heir")
    world.store = store
    job = world.submit("succeeded@20")
    original_start = MemoryAdapter.start

    async def start_then_arm(adapter: MemoryAdapter, job: Job, attempt: int) -> AttemptHandle:
        handle = await original_start(adapter, job, attempt)
        store.armed = True  # the renewal after start is followed by the pause
        return handle

    paused = world.supervisor("paused")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(MemoryAdapter, "start", start_then_arm)
        report = run(paused.step())
    assert "paused's lease on" in report.jobs[0].note and "heir holds it" in report.jobs[0].note
    [attempt] = world.store.attempts(job)
    assert attempt.handle is None  # the late write did not land
    assert {d["owner"] for d in world.decisions(job)} <= {"heir"}
    run(world.supervisor("heir").drive(job))
    assert world.store.get_job(job).state is State.SUCCEEDED
    assert world.scheduler.creations == {(job, 1): 1}  # adopted, not started again


class _RestartingRecords(SqliteRecords):
    """The records' database goes away for the first ``outages`` reads of the open jobs (a
    PostgreSQL server restarting under the supervisor)."""

    def __init__(self, world: World, outages: int) -> None:
        super().__init__(":memory:", clock=world.clock, ids=CountingIds())
        self.outages = outages

    def list_jobs(self, **options: Any) -> list[JobRecord]:
        if self.outages:
            self.outages -= 1
            raise RecordsUnavailable("the records did not answer: server restarting")
        return super().list_jobs(**options)


def test_run_rides_out_records_that_stop_answering_for_a_while() -> None:
    world = World()
    world.store = _RestartingRecords(world, outages=3)
    job = world.submit("succeeded@20")
    run(world.supervisor().run(asyncio.Event(), until_idle=True))
    assert world.store.get_job(job).state is State.SUCCEEDED
    assert world.scheduler.creations == {(job, 1): 1}


class _CountingLeases(SqliteRecords):
    """A store that counts lease writes (acquisitions and renewals)."""

    def __init__(self, world: World) -> None:
        super().__init__(":memory:", clock=world.clock, ids=CountingIds())
        self.lease_writes = 0

    def acquire_lease(self, job_id: str, owner: str, ttl: float) -> Lease | None:
        self.lease_writes += 1
        return super().acquire_lease(job_id, owner, ttl)


class _Delivered:
    """A watcher whose stream delivered ``observation`` (taken once)."""

    def __init__(self, observation: Observation | None) -> None:
        self.observation = observation

    def take(self, handle: AttemptHandle) -> Observation | None:
        taken, self.observation = self.observation, None
        return taken

    def covers(self, handle: AttemptHandle) -> bool:
        return False


def test_an_observation_the_watch_delivered_is_recorded_under_the_tick_s_lease() -> None:
    """Taken from the watch without an await, an observation's writes are fenced by the lease
    the tick holds, with no renewal (a write of its own) before them; one read from the
    scheduler, awaited, renews the lease first. A supervisor that took the job over since the
    tick's lease makes the writes fail all the same, and nothing lands."""
    world = World()
    store = _CountingLeases(world)
    world.store = store
    job = world.submit("succeeded@30")
    supervisor = world.supervisor()
    run(supervisor.step())
    [attempt] = store.attempts(job)
    assert attempt.handle is not None
    record = store.get_job(job).job
    seen = Evidence(kind="pod", key="pod/a@1", observed_at=world.clock.now(), summary="seen")
    running = Observation(attempt.handle, Outcome(State.RUNNING), evidence=(seen,))

    assert supervisor._lease(job) is not None
    supervisor.watcher = _Delivered(running)  # type: ignore[assignment]
    before = store.lease_writes
    run(supervisor._observe(record, 1, attempt.handle))
    assert store.lease_writes == before  # fenced, not renewed
    assert "pod/a@1" in {e.key for e in store.evidence(job, 1)}

    supervisor.watcher = _Delivered(None)  # type: ignore[assignment]
    run(supervisor._observe(record, 1, attempt.handle))  # read from the scheduler
    assert store.lease_writes == before + 1

    world.clock.advance(31)  # the lease expires and another supervisor takes the job
    assert store.acquire_lease(job, "heir", 30.0) is not None
    later = Evidence(kind="pod", key="pod/a@2", observed_at=world.clock.now(), summary="seen")
    supervisor.watcher = _Delivered(replace(running, evidence=(later,)))  # type: ignore[assignment]
    with pytest.raises(LeaseLost):
        run(supervisor._observe(record, 1, attempt.handle))
    assert "pod/a@2" not in {e.key for e in store.evidence(job, 1)}


def test_the_collector_leaves_out_what_the_process_held_and_runs_less_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from dispatch.supervise import loop

    collected: list[int] = []
    monkeypatch.setattr(loop, "_collector_tuned", False)
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or 0)
    thresholds = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's defaults
    before = gc.get_freeze_count()
    held = [[n] for n in range(1000)]  # tracked objects the process holds now
    try:
        loop._tune_collector()
        assert gc.get_freeze_count() >= before + len(held)
        assert gc.get_threshold() == loop.GC_THRESHOLDS
        loop._tune_collector()  # once per process: no second collection
        assert collected == [1]
    finally:
        gc.set_threshold(*thresholds)


class _Backlogged(MemoryAdapter):
    """A memory adapter whose reports run ``loop.BEHIND`` and more behind for its first
    ``lagging`` answers to ``behind``; each start notes how many answers came before it."""

    def __init__(self, world: World, lagging: int) -> None:
        super().__init__(
            world.cluster, AdapterContext(Path("."), world.clock), scheduler=world.scheduler
        )
        self.lagging = lagging
        self.asked = 0
        self.started_after: list[int] = []

    def behind(self) -> float:
        self.asked += 1
        return 1.0 if self.asked <= self.lagging else 0.0

    async def start(self, job: Job, attempt: int) -> AttemptHandle:
        self.started_after.append(self.asked)
        return await super().start(job, attempt)


def test_no_start_while_an_adapter_s_reports_run_behind() -> None:
    """A watched pass starts none of its own ticks while an adapter reports it runs behind
    (``Backlogged``); it starts them all once the reports caught up."""
    world = World()
    adapter = _Backlogged(world, lagging=3)
    jobs = [world.submit("succeeded@20") for _ in range(3)]
    supervisor = Supervisor(world.store, lambda _: adapter, world.clock, "s1", ticks_at_once=4)
    supervisor.adapter("mem")  # open, as after the supervisor's first tick on the cluster
    run(supervisor.run(asyncio.Event(), until_idle=True))
    assert adapter.started_after and min(adapter.started_after) > 3
    assert [world.store.get_job(j).state for j in jobs] == [State.SUCCEEDED] * 3

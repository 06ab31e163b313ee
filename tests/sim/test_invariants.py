"""The invariants on explicit worlds: each one fires when its promise is broken."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.memory import MemoryAdapter, MemoryScheduler
from dispatch.clock import ManualClock
from dispatch.config import ClusterConfig
from dispatch.model import Cause, Outcome, State, parse_spec
from dispatch.sim import budget_problems
from dispatch.sim.driver import Call
from dispatch.sim.invariants import Checker
from dispatch.sim.store import SimRecords
from dispatch.supervise import load_history

RULES = {
    "rules": [
        {"on": ["preempted"], "action": "retry", "limit": 1},
        {"on": ["app_error"], "action": "fail"},
        {"on": ["no_capacity"], "action": "hold"},
    ],
    "unmatched": "fail",
}


class Small:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.store = SimRecords(self.clock)
        self.scheduler = MemoryScheduler(clock=self.clock)
        cluster = ClusterConfig("sim", "memory", {"shape": "slurm"})
        context = AdapterContext(Path("."), self.clock)
        self.adapter = MemoryAdapter(cluster, context, scheduler=self.scheduler)
        self.checker = Checker(self.store, self.scheduler, self.clock)

    def submit(self, scenario: str = "hang", *, held_by: str | None = None) -> str:
        spec = parse_spec(
            {
                "name": "j",
                "cluster": "sim",
                "command": ["x"],
                "timeLimit": "10m",
                "env": {"MEMORY_SCENARIO": scenario},
                "recovery": RULES,
            }
        )
        job_id = self.store.create_job(spec, held_by=held_by).id
        self.checker.submitted.append(job_id)
        return job_id

    def start(self, job_id: str, attempt: int, *, claim: bool = True) -> None:
        if claim:
            self.store.create_attempt(job_id, attempt)
        job = self.store.get_job(job_id).job
        asyncio.run(self.adapter.start(job, attempt))

    def end(self, job_id: str, attempt: int, cause: Cause) -> None:
        self.store.record_outcome(job_id, attempt, Outcome(State.FAILED, cause))


def test_a_clean_world_has_no_violation() -> None:
    world = Small()
    job = world.submit()
    world.start(job, 1)
    world.clock.advance(5)
    assert world.checker.after_step() is None


def test_an_execution_nobody_claimed_is_unplanned() -> None:
    world = Small()
    job = world.submit()
    world.start(job, 1, claim=False)
    violation = world.checker.after_step()
    assert violation is not None
    assert violation.invariant == "planned"
    assert "never claimed" in violation.message


def test_two_attempts_of_one_job_at_once_are_caught() -> None:
    world = Small()
    job = world.submit()
    world.start(job, 1)
    assert world.checker.after_step() is None
    world.end(job, 1, Cause.PREEMPTED)  # recorded as ended, but still running for real
    world.start(job, 2)
    violation = world.checker.after_step()
    assert violation is not None
    assert violation.invariant == "exclusive"


def test_start_or_cancel_without_an_open_intent_is_caught() -> None:
    world = Small()
    job = world.submit()
    call = Call("start", "s1", job, 1)
    violation = world.checker.on_call(call)
    assert violation is not None
    assert violation.invariant == "intent"
    world.store.open_intent(job, "start", "s1", attempt=1)
    assert world.checker.on_call(call) is None
    assert world.checker.on_call(Call("observe", "s1", job, 1)) is None


def test_a_cancelled_job_nobody_cancelled_is_caught() -> None:
    world = Small()
    job = world.submit()
    world.store.set_job_status(job, State.CANCELLED, Cause.CANCELLED, if_open=True)
    violation = world.checker.after_step()
    assert violation is not None
    assert (violation.invariant, "nobody asked" in violation.message) == ("caused", True)


def test_a_terminal_job_with_a_running_execution_is_lost_work() -> None:
    world = Small()
    job = world.submit()
    world.start(job, 1)
    world.checker.after_step()
    world.store.set_job_status(job, State.FAILED, Cause.APP_ERROR, if_open=True)
    violation = world.checker.after_step()
    assert violation is not None
    assert violation.invariant == "lost"


def test_a_terminal_status_that_changes_is_caught() -> None:
    world = Small()
    job = world.submit("succeeded@1")
    world.start(job, 1)
    world.clock.advance(5)
    world.store.set_job_status(job, State.SUCCEEDED, None, if_open=True)
    assert world.checker.after_step() is None
    world.store.set_job_status(job, State.FAILED, Cause.UNKNOWN)  # without if_open: reopens
    violation = world.checker.after_step()
    assert violation is not None
    assert violation.invariant == "final"


def test_the_budget_follows_the_policy() -> None:
    world = Small()
    job = world.submit()
    world.store.create_attempt(job, 1)
    world.end(job, 1, Cause.PREEMPTED)
    world.store.create_attempt(job, 2)
    assert budget_problems(load_history(world.store, job)) == []
    world.end(job, 2, Cause.PREEMPTED)  # the one retry is spent
    world.store.create_attempt(job, 3)
    assert budget_problems(load_history(world.store, job)) == [
        "rule 1 allows 1 retries; 2 were started"
    ]


def test_the_budget_refuses_a_retry_after_fail_and_a_hold_without_release() -> None:
    world = Small()
    failed, held = world.submit(), world.submit()
    for job, cause in ((failed, Cause.APP_ERROR), (held, Cause.NO_CAPACITY)):
        world.store.create_attempt(job, 1)
        world.end(job, 1, cause)
        world.store.create_attempt(job, 2)
    (fail_problem,) = budget_problems(load_history(world.store, failed))
    assert "the policy says fail" in fail_problem
    (hold_problem,) = budget_problems(load_history(world.store, held))
    assert "0 releases" in hold_problem
    world.store.request_release(held)
    assert budget_problems(load_history(world.store, held)) == []


def test_attempt_1_of_a_job_held_at_submission_needs_a_release() -> None:
    world = Small()
    job = world.submit(held_by="alice")
    assert budget_problems(load_history(world.store, job)) == []  # held, nothing started
    world.store.create_attempt(job, 1)
    (problem,) = budget_problems(load_history(world.store, job))
    assert "1 attempts followed a hold" in problem
    assert "0 releases" in problem
    world.store.request_release(job)
    assert budget_problems(load_history(world.store, job)) == []
    world.end(job, 1, Cause.NO_CAPACITY)  # and a policy hold after it needs a second release
    world.store.create_attempt(job, 2)
    (again,) = budget_problems(load_history(world.store, job))
    assert "2 attempts followed a hold" in again
    world.store.request_release(job)
    assert budget_problems(load_history(world.store, job)) == []


def test_an_execution_of_a_job_held_at_submission_is_caught() -> None:
    world = Small()
    job = world.submit(held_by="alice")
    world.start(job, 1)  # claimed and started with no release: what a broken supervisor does
    violation = world.checker.after_step()
    assert violation is not None
    assert violation.invariant == "planned"
    assert "0 releases" in violation.message


def test_an_attempt_after_one_not_known_to_have_ended_is_unplanned() -> None:
    world = Small()
    job = world.submit()
    world.store.create_attempt(job, 1)
    world.store.create_attempt(job, 2)
    (problem,) = budget_problems(load_history(world.store, job))
    assert "not known to have ended" in problem

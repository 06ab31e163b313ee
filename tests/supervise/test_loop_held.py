"""The supervisor loop with a job held at submission, on the memory scheduler: nothing is
created on the scheduler until a release; a cancel ends the job with no attempt."""

from __future__ import annotations

from dispatch.model import Cause, State, parse_spec
from dispatch.supervise import DecisionKind
from tests.supervise.world import World, run

SUCCEEDS = {
    "name": "train",
    "cluster": "mem",
    "command": ["python", "train.py"],
    "env": {"MEMORY_SCENARIO": "succeeded@20"},
}


def submit_held(world: World) -> str:
    return world.store.create_job(parse_spec(SUCCEEDS), held_by="alice").id


def test_a_held_job_starts_nothing_until_released_then_runs_attempt_1(world: World) -> None:
    job = submit_held(world)
    supervisor = world.supervisor()
    for _ in range(5):
        report = run(supervisor.step())
        world.clock.advance(600)
    assert [d.kind for d in report.jobs[0].decisions] == [DecisionKind.NOTHING]
    assert not world.scheduler.calls  # the scheduler never heard of the job
    assert not world.scheduler.executions
    assert world.store.attempts(job) == []
    record = world.store.get_job(job)
    assert record.state is State.HELD
    assert record.summary == (f"held at submission by alice; release with `dispatch release {job}`")
    assert world.actions(job) == ["nothing"]  # logged once, not once per pass
    assert world.decisions(job)[0]["reason"] == record.summary

    world.store.request_release(job)
    run(supervisor.step())
    assert [a.attempt for a in world.store.attempts(job)] == [1]
    assert world.scheduler.creations[(job, 1)] == 1
    world.clock.advance(30)
    run(supervisor.drive(job))
    final = world.store.get_job(job)
    assert (final.state, final.cause) == (State.SUCCEEDED, None)
    assert world.actions(job) == ["nothing", "start", "finish"]
    started = world.decisions(job)[1]
    assert (started["attempt"], started["reason"]) == (
        1,
        "released (held at submission by alice): starting attempt 1",
    )


def test_a_cancel_of_a_held_job_ends_it_cancelled_with_no_attempt(world: World) -> None:
    job = submit_held(world)
    supervisor = world.supervisor()
    run(supervisor.step())
    world.store.request_cancel(job, "bob", "not needed")
    run(supervisor.drive(job))
    record = world.store.get_job(job)
    assert (record.state, record.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert "cancelled by bob" in record.summary
    assert world.store.attempts(job) == []
    assert not world.scheduler.calls
    assert not world.scheduler.executions
    world.store.request_release(job)  # too late: a terminal job stays as it is
    run(supervisor.step())
    assert world.store.get_job(job).state is State.CANCELLED
    assert world.store.attempts(job) == []


def test_two_supervisors_start_a_released_job_once() -> None:
    world = World()
    job = submit_held(world)
    first, second = world.supervisor("s1"), world.supervisor("s2")
    run(first.step())
    run(second.step())
    world.store.request_release(job)
    for _ in range(3):
        run(second.step())
        run(first.step())
        world.clock.advance(40)  # leases expire: the other supervisor may take over
    assert dict(world.scheduler.creations) == {(job, 1): 1}
    assert world.store.get_job(job).state is State.SUCCEEDED

"""``fold`` over histories recorded in a real (in-memory) store."""

from __future__ import annotations

import pytest

from dispatch.clock import CountingIds, ManualClock
from dispatch.model import AttemptHandle, Cause, Outcome, State, parse_spec
from dispatch.records import SqliteRecords
from dispatch.supervise import fold, last_decision, load_history

SPEC = parse_spec({"name": "train", "command": ["python", "train.py"]})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=1000.0)


@pytest.fixture
def store(clock: ManualClock) -> SqliteRecords:
    return SqliteRecords(":memory:", clock=clock, ids=CountingIds())


def ended(store: SqliteRecords, job: str, n: int, cause: Cause) -> None:
    store.create_attempt(job, n)
    store.set_handle(job, n, AttemptHandle(job_id=job, attempt=n, cluster="c", native=f"x{n}"))
    store.record_outcome(job, n, Outcome(state=State.FAILED, cause=cause))


def test_a_new_job_has_no_attempt(store: SqliteRecords) -> None:
    job = store.create_job(SPEC)
    view = fold(load_history(store, job.id))
    assert view.attempt is None
    assert view.attempt_number == 0
    assert view.state is State.PENDING
    assert not view.terminal
    assert view.policy == SPEC.recovery


def test_retries_count_ended_attempts_followed_by_another(
    store: SqliteRecords, clock: ManualClock
) -> None:
    job = store.create_job(SPEC).id
    ended(store, job, 1, Cause.PREEMPTED)
    ended(store, job, 2, Cause.NODE_LOST)
    clock.advance(5)
    ended(store, job, 3, Cause.PREEMPTED)
    view = fold(load_history(store, job))
    assert dict(view.retries) == {Cause.PREEMPTED: 1, Cause.NODE_LOST: 1}
    assert view.retries_used((Cause.PREEMPTED, Cause.NODE_LOST)) == 2
    assert view.attempt is not None
    assert view.attempt.number == 3
    assert view.attempt.cause is Cause.PREEMPTED
    assert view.ended_at == 1005.0


def test_hold_then_release_of_the_current_attempt(store: SqliteRecords) -> None:
    job = store.create_job(SPEC).id
    store.request_release(job)  # a release before the hold does not count
    ended(store, job, 1, Cause.NO_CAPACITY)
    store.append_log(job, "decision", {"action": "hold", "attempt": 1, "reason": "r"})
    held = fold(load_history(store, job))
    assert (held.held, held.released) == (True, False)
    store.request_release(job)
    released = fold(load_history(store, job))
    assert (released.held, released.released) == (False, True)


def test_a_cancel_request_and_the_cancel_sent(store: SqliteRecords, clock: ManualClock) -> None:
    job = store.create_job(SPEC).id
    store.create_attempt(job, 1)
    store.request_cancel(job, "alice", "stop")
    clock.advance(3)
    store.append_log(job, "decision", {"action": "cancel", "attempt": 1, "reason": "r"})
    view = fold(load_history(store, job))
    assert view.cancel is not None
    assert view.cancel.actor == "alice"
    assert view.cancel_sent_at == 1003.0
    assert last_decision(store.log(job)) == {
        "action": "cancel",
        "attempt": 1,
        "reason": "r",
        "at": 1003.0,
    }


def test_a_terminal_job_is_terminal(store: SqliteRecords) -> None:
    job = store.create_job(SPEC).id
    store.set_job_status(job, State.FAILED, Cause.APP_ERROR, "x")
    assert fold(load_history(store, job)).terminal
    assert last_decision(store.log(job)) is None


def test_held_at_submission_until_released(store: SqliteRecords) -> None:
    job = store.create_job(SPEC, held_by="alice").id
    held = fold(load_history(store, job))
    assert (held.state, held.attempt, held.held, held.released) == (State.HELD, None, True, False)
    assert held.held_by == "alice"
    store.request_release(job)
    released = fold(load_history(store, job))
    assert (released.held, released.released, released.held_by) == (False, True, "alice")


def test_a_hold_at_submission_no_longer_applies_once_attempt_1_exists(
    store: SqliteRecords,
) -> None:
    job = store.create_job(SPEC, held_by="alice").id
    store.request_release(job)
    store.create_attempt(job, 1)
    view = fold(load_history(store, job))
    assert (view.held, view.released, view.held_by) == (False, False, None)
    assert view.attempt_number == 1


def test_a_job_submitted_without_hold_is_not_held(store: SqliteRecords) -> None:
    job = store.create_job(SPEC).id
    store.request_release(job)  # a release of a job that was never held changes nothing
    view = fold(load_history(store, job))
    assert (view.held, view.released, view.held_by) == (False, False, None)

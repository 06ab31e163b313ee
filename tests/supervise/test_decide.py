"""``next`` from explicit views: every kind of decision, every recovery action, unmatched."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dispatch.model import (
    Action,
    AttemptHandle,
    Backoff,
    Cause,
    Outcome,
    RecoveryPolicy,
    RecoveryRule,
    State,
)
from dispatch.records import CancelRequest
from dispatch.supervise import (
    CANCEL_RESEND_AFTER,
    AttemptView,
    DecisionKind,
    JobView,
    next_decision,
)

NOW = 10_000.0
POLICY = RecoveryPolicy(
    rules=(
        RecoveryRule(
            on=(Cause.PREEMPTED, Cause.NODE_LOST),
            action=Action.RETRY,
            limit=2,
            backoff=Backoff(initial=30, factor=2),
        ),
        RecoveryRule(on=(Cause.OUT_OF_MEMORY, Cause.APP_ERROR), action=Action.FAIL),
        RecoveryRule(on=(Cause.NO_CAPACITY,), action=Action.HOLD),
        RecoveryRule(on=(Cause.UNPLANNED_RECOVERY,), action=Action.RETRY, limit=1),
    ),
    unmatched=Action.FAIL,
)


def handle(n: int) -> AttemptHandle:
    return AttemptHandle(job_id="j", attempt=n, cluster="c", native=f"j-a{n}")


def attempt(
    n: int,
    state: State,
    cause: Cause | None = None,
    *,
    ended_at: float | None = None,
    started: bool = True,
) -> AttemptView:
    outcome = Outcome(state=state, cause=cause, summary="seen") if state != State.PENDING else None
    if state.is_terminal and ended_at is None:
        ended_at = NOW - 1000
    return AttemptView(
        number=n, handle=handle(n) if started else None, outcome=outcome, ended_at=ended_at
    )


def view(current: AttemptView | None = None, **kwargs: object) -> JobView:
    state = kwargs.pop("state", State.RUNNING)
    return JobView(job_id="j", policy=POLICY, state=state, attempt=current, **kwargs)  # type: ignore[arg-type]


def test_the_package_does_not_shadow_the_builtin_next() -> None:
    import dispatch.supervise

    assert "next" not in vars(dispatch.supervise) and "next" not in dispatch.supervise.__all__


def test_a_new_job_starts_attempt_1() -> None:
    decision = next_decision(view(state=State.PENDING), POLICY, NOW)
    assert decision.kind is DecisionKind.START
    assert decision.attempt == 1
    assert decision.reason


def test_a_claimed_attempt_without_handle_is_started_again_to_adopt_it() -> None:
    decision = next_decision(view(attempt(1, State.PENDING, started=False)), POLICY, NOW)
    assert (decision.kind, decision.attempt) == (DecisionKind.START, 1)
    assert "adopt" in decision.reason


@pytest.mark.parametrize("state", [State.PENDING, State.QUEUED, State.RUNNING, State.HELD])
def test_a_live_attempt_is_observed(state: State) -> None:
    decision = next_decision(view(attempt(3, state)), POLICY, NOW)
    assert (decision.kind, decision.attempt) == (DecisionKind.OBSERVE, 3)


def test_success_finishes_the_job() -> None:
    decision = next_decision(view(attempt(2, State.SUCCEEDED)), POLICY, NOW)
    assert (decision.kind, decision.state, decision.cause) == (
        DecisionKind.FINISH,
        State.SUCCEEDED,
        None,
    )


def test_retry_waits_for_the_backoff_then_starts_the_next_attempt() -> None:
    ended = NOW - 10
    preempted = attempt(1, State.FAILED, Cause.PREEMPTED, ended_at=ended)
    waiting = next_decision(view(preempted), POLICY, NOW)
    assert waiting.kind is DecisionKind.WAIT
    assert waiting.until == ended + 30  # first retry: initial backoff
    assert (waiting.attempt, waiting.rule) == (2, 0)
    started = next_decision(view(preempted), POLICY, ended + 30)
    assert (started.kind, started.attempt, started.rule) == (DecisionKind.START, 2, 0)
    assert "retry 1 of 2" in started.reason


def test_the_backoff_grows_with_the_retries_of_the_same_rule() -> None:
    ended = NOW - 10
    lost = attempt(2, State.FAILED, Cause.NODE_LOST, ended_at=ended)
    decision = next_decision(view(lost, retries={Cause.PREEMPTED: 1}), POLICY, NOW)
    assert decision.kind is DecisionKind.WAIT
    assert decision.until == ended + 60  # second retry of rule 0 (preempted and node_lost)


def test_an_exhausted_retry_limit_fails_with_the_cause() -> None:
    last = attempt(3, State.FAILED, Cause.PREEMPTED)
    decision = next_decision(
        view(last, retries={Cause.PREEMPTED: 1, Cause.NODE_LOST: 1}), POLICY, NOW
    )
    assert (decision.kind, decision.state, decision.cause) == (
        DecisionKind.FINISH,
        State.FAILED,
        Cause.PREEMPTED,
    )
    assert "retry limit 2 exhausted" in decision.reason


@pytest.mark.parametrize("cause", [Cause.OUT_OF_MEMORY, Cause.APP_ERROR])
def test_a_fail_rule_fails_with_the_cause(cause: Cause) -> None:
    decision = next_decision(view(attempt(1, State.FAILED, cause)), POLICY, NOW)
    assert (decision.kind, decision.state, decision.cause, decision.rule) == (
        DecisionKind.FINISH,
        State.FAILED,
        cause,
        1,
    )


def test_unmatched_fail_names_the_cause_no_rule_names() -> None:
    decision = next_decision(view(attempt(1, State.FAILED, Cause.TIMEOUT)), POLICY, NOW)
    assert (decision.kind, decision.state, decision.cause, decision.rule) == (
        DecisionKind.FINISH,
        State.FAILED,
        Cause.TIMEOUT,
        None,
    )
    assert "no rule names timeout; unmatched: fail" in decision.reason


def test_unmatched_hold_holds() -> None:
    policy = RecoveryPolicy(rules=POLICY.rules, unmatched=Action.HOLD)
    decision = next_decision(view(attempt(1, State.FAILED, Cause.TIMEOUT)), policy, NOW)
    assert (decision.kind, decision.rule) == (DecisionKind.HOLD, None)
    assert "unmatched: hold" in decision.reason


def test_an_attempt_without_cause_is_handled_as_unknown() -> None:
    ended = AttemptView(
        number=1,
        handle=handle(1),
        outcome=Outcome(state=State.FAILED, cause=Cause.UNKNOWN),
        ended_at=NOW,
    )
    decision = next_decision(view(ended), POLICY, NOW)
    assert (decision.kind, decision.cause) == (DecisionKind.FINISH, Cause.UNKNOWN)


def test_hold_then_wait_for_release_then_start_the_next_attempt() -> None:
    no_capacity = attempt(1, State.FAILED, Cause.NO_CAPACITY)
    assert next_decision(view(no_capacity), POLICY, NOW).kind is DecisionKind.HOLD
    waiting = next_decision(view(no_capacity, held=True, state=State.HELD), POLICY, NOW)
    assert waiting.kind is DecisionKind.NOTHING
    assert "dispatch release" in waiting.reason
    released = next_decision(view(no_capacity, released=True, state=State.HELD), POLICY, NOW)
    assert (released.kind, released.attempt) == (DecisionKind.START, 2)


def test_a_cancel_request_stops_the_live_attempt_naming_the_actor() -> None:
    cancel = CancelRequest(actor="alice", reason="wrong data", at=NOW - 5)
    decision = next_decision(view(attempt(2, State.RUNNING), cancel=cancel), POLICY, NOW)
    assert (decision.kind, decision.attempt, decision.cause) == (
        DecisionKind.CANCEL,
        2,
        Cause.CANCELLED,
    )
    assert "alice" in decision.reason


def test_a_sent_cancel_is_observed_then_sent_again_after_a_while() -> None:
    cancel = CancelRequest(actor="alice", reason="", at=NOW - 5)
    live = attempt(2, State.RUNNING)
    sent = view(live, cancel=cancel, cancel_sent_at=NOW - 1)
    assert next_decision(sent, POLICY, NOW).kind is DecisionKind.OBSERVE
    later = next_decision(sent, POLICY, NOW - 1 + CANCEL_RESEND_AFTER)
    assert later.kind is DecisionKind.CANCEL


def test_a_cancelled_attempt_finishes_the_job_cancelled_by_the_actor() -> None:
    cancel = CancelRequest(actor="alice", reason="wrong data", at=NOW - 5)
    stopped = attempt(2, State.CANCELLED, Cause.CANCELLED)
    decision = next_decision(view(stopped, cancel=cancel), POLICY, NOW)
    assert (decision.kind, decision.state, decision.cause) == (
        DecisionKind.FINISH,
        State.CANCELLED,
        Cause.CANCELLED,
    )
    assert "cancelled by alice: wrong data" in decision.reason


def test_who_cancelled_is_said_once_when_the_attempt_says_it_already() -> None:
    cancel = CancelRequest(actor="alice", reason="wrong data", at=NOW - 5)
    summary = "cancelled by alice: wrong data; 1 other process(es) stopped"
    stopped = replace(
        attempt(2, State.CANCELLED, Cause.CANCELLED),
        outcome=Outcome(state=State.CANCELLED, cause=Cause.CANCELLED, summary=summary),
    )
    decision = next_decision(view(stopped, cancel=cancel), POLICY, NOW)
    assert decision.reason == f"attempt 2 {summary}"
    assert decision.reason.count("cancelled by alice") == 1


def test_a_cancel_wins_over_retry_rules() -> None:
    cancel = CancelRequest(actor="bob", reason="", at=NOW)
    preempted = attempt(1, State.FAILED, Cause.PREEMPTED)
    decision = next_decision(view(preempted, cancel=cancel), POLICY, NOW)
    assert (decision.kind, decision.state) == (DecisionKind.FINISH, State.CANCELLED)


def test_a_cancel_before_any_attempt_finishes_without_starting() -> None:
    cancel = CancelRequest(actor="bob", reason="", at=NOW)
    decision = next_decision(view(cancel=cancel, state=State.PENDING), POLICY, NOW)
    assert (decision.kind, decision.state, decision.cause) == (
        DecisionKind.FINISH,
        State.CANCELLED,
        Cause.CANCELLED,
    )


def test_a_cancel_of_a_held_job_finishes_it() -> None:
    cancel = CancelRequest(actor="bob", reason="", at=NOW)
    held = view(attempt(1, State.FAILED, Cause.NO_CAPACITY), held=True, cancel=cancel)
    assert next_decision(held, POLICY, NOW).state is State.CANCELLED


def test_a_cancel_after_success_keeps_the_success() -> None:
    cancel = CancelRequest(actor="bob", reason="", at=NOW)
    decision = next_decision(view(attempt(1, State.SUCCEEDED), cancel=cancel), POLICY, NOW)
    assert (decision.kind, decision.state) == (DecisionKind.FINISH, State.SUCCEEDED)


def test_a_cancel_of_a_claimed_but_unrecorded_start_adopts_it_first() -> None:
    cancel = CancelRequest(actor="bob", reason="", at=NOW)
    claimed = attempt(1, State.PENDING, started=False)
    decision = next_decision(view(claimed, cancel=cancel), POLICY, NOW)
    assert (decision.kind, decision.attempt) == (DecisionKind.START, 1)


def test_a_cancelled_attempt_without_request_is_never_retried() -> None:
    stopped = attempt(1, State.CANCELLED, Cause.CANCELLED)
    decision = next_decision(view(stopped), POLICY, NOW)
    assert (decision.kind, decision.state) == (DecisionKind.FINISH, State.CANCELLED)


def test_a_live_attempt_that_re_ran_work_is_stopped_not_rerun() -> None:
    rerun = attempt(1, State.RUNNING, Cause.UNPLANNED_RECOVERY)
    decision = next_decision(view(rerun), POLICY, NOW)
    assert (decision.kind, decision.attempt, decision.cause) == (
        DecisionKind.CANCEL,
        1,
        Cause.UNPLANNED_RECOVERY,
    )


def test_unplanned_recovery_follows_its_rule_with_a_new_attempt() -> None:
    ended = attempt(1, State.FAILED, Cause.UNPLANNED_RECOVERY)
    decision = next_decision(view(ended), POLICY, NOW)
    assert (decision.kind, decision.attempt, decision.rule) == (DecisionKind.START, 2, 3)
    spent = next_decision(view(ended, retries={Cause.UNPLANNED_RECOVERY: 1}), POLICY, NOW)
    assert (spent.kind, spent.cause) == (DecisionKind.FINISH, Cause.UNPLANNED_RECOVERY)


@pytest.mark.parametrize("state", [State.SUCCEEDED, State.FAILED, State.CANCELLED])
def test_a_terminal_job_needs_nothing(state: State) -> None:
    decision = next_decision(
        view(attempt(1, State.FAILED, Cause.PREEMPTED), state=state), POLICY, NOW
    )
    assert decision.kind is DecisionKind.NOTHING


def test_every_decision_kind_is_reachable_and_serialises() -> None:
    seen = {
        next_decision(view(state=State.PENDING), POLICY, NOW).kind,
        next_decision(
            view(attempt(1, State.FAILED, Cause.PREEMPTED, ended_at=NOW)), POLICY, NOW
        ).kind,
        next_decision(view(attempt(1, State.RUNNING)), POLICY, NOW).kind,
        next_decision(view(attempt(1, State.RUNNING, Cause.UNPLANNED_RECOVERY)), POLICY, NOW).kind,
        next_decision(view(attempt(1, State.FAILED, Cause.NO_CAPACITY)), POLICY, NOW).kind,
        next_decision(view(attempt(1, State.SUCCEEDED)), POLICY, NOW).kind,
        next_decision(view(state=State.FAILED), POLICY, NOW).kind,
    }
    assert seen == set(DecisionKind)
    assert next_decision(view(state=State.PENDING), POLICY, NOW).to_json()["action"] == "start"

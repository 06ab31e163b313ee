"""``next_decision`` for a job held at submission (no attempt yet), from explicit views."""

from __future__ import annotations

import pytest

from dispatch.model import Cause, RecoveryPolicy, State
from dispatch.records import CancelRequest
from dispatch.supervise import DecisionKind, JobView, next_decision

NOW = 10_000.0
POLICY = RecoveryPolicy()


def held_view(**kwargs: object) -> JobView:
    fields: dict[str, object] = {"state": State.HELD, "held": True, "held_by": "alice"}
    fields.update(kwargs)
    return JobView(job_id="train-1", policy=POLICY, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("now", [NOW, NOW + 86_400 * 365])
def test_held_at_submission_starts_nothing_however_long_it_waits(now: float) -> None:
    decision = next_decision(held_view(), POLICY, now)
    assert decision.kind is DecisionKind.NOTHING
    assert decision.attempt is None
    assert decision.reason == (
        "held at submission by alice; release with `dispatch release train-1`"
    )


def test_held_at_submission_whose_status_is_not_held_yet_is_put_on_hold() -> None:
    decision = next_decision(held_view(state=State.PENDING), POLICY, NOW)
    assert decision.kind is DecisionKind.HOLD
    assert decision.attempt is None
    assert "held at submission by alice" in decision.reason


def test_a_release_starts_attempt_1() -> None:
    decision = next_decision(held_view(held=False, released=True), POLICY, NOW)
    assert (decision.kind, decision.attempt) == (DecisionKind.START, 1)
    assert decision.reason == "released (held at submission by alice): starting attempt 1"


def test_a_job_not_held_starts_attempt_1_as_before() -> None:
    decision = next_decision(held_view(held=False, held_by=None, state=State.PENDING), POLICY, NOW)
    assert (decision.kind, decision.attempt) == (DecisionKind.START, 1)
    assert decision.reason == "starting the first attempt"


@pytest.mark.parametrize("released", [False, True])
def test_a_cancel_of_a_job_held_at_submission_ends_it_with_no_attempt(released: bool) -> None:
    cancel = CancelRequest(actor="bob", reason="not needed", at=NOW - 1)
    decision = next_decision(
        held_view(held=not released, released=released, cancel=cancel), POLICY, NOW
    )
    assert (decision.kind, decision.state, decision.cause, decision.attempt) == (
        DecisionKind.FINISH,
        State.CANCELLED,
        Cause.CANCELLED,
        None,
    )
    assert decision.reason == (
        "cancelled by bob: not needed (while held at submission: no attempt was started)"
    )


@pytest.mark.parametrize("state", [State.CANCELLED, State.FAILED])
def test_a_terminal_job_held_at_submission_needs_nothing(state: State) -> None:
    decision = next_decision(held_view(state=state), POLICY, NOW)
    assert decision.kind is DecisionKind.NOTHING
    assert decision.reason == f"the job is {state.value}"

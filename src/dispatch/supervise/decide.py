"""``next``: given a job's view, its recovery policy and the time, what the supervisor does next.

Pure: the same view, policy and time always give the same ``Decision``. The supervisor loop
carries decisions out; it never decides anything itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dispatch.model import Action, Cause, RecoveryPolicy, State
from dispatch.records import CancelRequest, submission_hold_summary
from dispatch.supervise.view import AttemptView, JobView

#: a cancel that has not taken effect after this many seconds is sent again
CANCEL_RESEND_AFTER = 60.0


class DecisionKind(StrEnum):
    """What the supervisor does next for one job."""

    START = "start"  # start (or adopt, if already claimed) attempt ``attempt``
    WAIT = "wait"  # nothing until ``until`` (a retry's backoff)
    OBSERVE = "observe"  # look at the live attempt and record what is seen
    CANCEL = "cancel"  # ask the scheduler to stop the live attempt
    HOLD = "hold"  # the job becomes held until a release (or a cancel)
    FINISH = "finish"  # the job ends with ``state`` and ``cause``
    NOTHING = "nothing"  # the job is over, or waits for a person


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision and the human reason for it (shown by ``dispatch status``)."""

    kind: DecisionKind
    reason: str
    attempt: int | None = None
    until: float | None = None
    state: State | None = None
    cause: Cause | None = None
    rule: int | None = None  # index of the recovery rule applied; None when unmatched or n/a

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.kind.value,
            "reason": self.reason,
            "attempt": self.attempt,
            "until": self.until,
            "state": self.state.value if self.state else None,
            "cause": self.cause.value if self.cause else None,
            "rule": self.rule,
        }


def _finish(state: State, cause: Cause | None, reason: str, **extra: Any) -> Decision:
    return Decision(DecisionKind.FINISH, reason, state=state, cause=cause, **extra)


def _ended(attempt: AttemptView) -> str:
    summary = attempt.outcome.summary if attempt.outcome else ""
    cause = attempt.cause.value if attempt.cause else attempt.state.value
    return f"attempt {attempt.number} ended {cause}" + (f" ({summary})" if summary else "")


def _on_cancel(view: JobView, request: CancelRequest, now: float) -> Decision:
    by = f"cancelled by {request.actor}" + (f": {request.reason}" if request.reason else "")
    attempt = view.attempt
    if attempt is None:
        if view.held or view.released:
            return _finish(
                State.CANCELLED,
                Cause.CANCELLED,
                f"{by} (while held at submission: no attempt was started)",
            )
        return _finish(State.CANCELLED, Cause.CANCELLED, f"{by} (before any attempt started)")
    if attempt.handle is None and not attempt.is_terminal:
        return Decision(
            DecisionKind.START,
            f"{by}; attempt {attempt.number} was claimed but its start was never recorded: "
            "adopting it (start is idempotent) so that it can be stopped",
            attempt=attempt.number,
        )
    if attempt.is_live:
        sent = view.cancel_sent_at
        if sent is not None and now - sent < CANCEL_RESEND_AFTER:
            return Decision(
                DecisionKind.OBSERVE,
                f"{by}; cancel sent, waiting for attempt {attempt.number} to stop",
                attempt=attempt.number,
            )
        return Decision(
            DecisionKind.CANCEL,
            f"{by}; stopping attempt {attempt.number}",
            attempt=attempt.number,
            cause=Cause.CANCELLED,
        )
    if attempt.state is State.SUCCEEDED:
        return _finish(
            State.SUCCEEDED, None, f"attempt {attempt.number} succeeded before the cancel took"
        )
    summary = attempt.outcome.summary if attempt.outcome else ""
    if attempt.cause is Cause.CANCELLED and summary.startswith(by):
        # the attempt's own summary says who cancelled it already: say it once
        return _finish(State.CANCELLED, Cause.CANCELLED, f"attempt {attempt.number} {summary}")
    return _finish(State.CANCELLED, Cause.CANCELLED, f"{by}; {_ended(attempt)}")


def _apply_policy(
    view: JobView, attempt: AttemptView, policy: RecoveryPolicy, now: float
) -> Decision:
    cause = attempt.cause or Cause.UNKNOWN
    rule = policy.rule_for(cause)
    index = policy.rules.index(rule) if rule is not None else None
    action = rule.action if rule is not None else policy.unmatched
    ended = _ended(attempt)
    # rules are counted from 1 in what people read (the data keeps the list index)
    named = f"rule {index + 1} ({action.value} on {cause.value})" if index is not None else None
    why = named or f"no rule names {cause.value}; unmatched: {action.value}"

    if action is Action.FAIL:
        return _finish(State.FAILED, cause, f"{ended}; {why}", rule=index)
    if action is Action.HOLD:
        if view.released:
            return Decision(
                DecisionKind.START,
                f"released after hold ({ended}): starting attempt {attempt.number + 1}",
                attempt=attempt.number + 1,
                rule=index,
            )
        if view.held:
            return Decision(
                DecisionKind.NOTHING,
                f"held ({ended}; {why}): waiting for `dispatch release` or `dispatch cancel`",
                rule=index,
            )
        return Decision(DecisionKind.HOLD, f"{ended}; {why}: holding the job", rule=index)

    if rule is None or rule.limit is None:  # unmatched is never retry; retry rules have limits
        return _finish(State.FAILED, cause, f"{ended}; {why}", rule=index)
    used = view.retries_used(rule.on)
    if used >= rule.limit:
        return _finish(
            State.FAILED,
            cause,
            f"{ended}; {why}: retry limit {rule.limit} exhausted",
            rule=index,
        )
    retry = used + 1
    until = (attempt.ended_at if attempt.ended_at is not None else now) + rule.backoff.delay(retry)
    budget = f"retry {retry} of {rule.limit}"
    if now < until:
        return Decision(
            DecisionKind.WAIT,
            f"{ended}; {why}: {budget}, attempt {attempt.number + 1} after backoff",
            attempt=attempt.number + 1,
            until=until,
            rule=index,
        )
    return Decision(
        DecisionKind.START,
        f"{ended}; {why}: {budget}, starting attempt {attempt.number + 1}",
        attempt=attempt.number + 1,
        rule=index,
    )


def _before_the_first_attempt(view: JobView) -> Decision:
    """No attempt yet: start attempt 1, unless the job was held at submission and is not
    released (then ``hold`` if its status does not say ``held`` yet, else ``nothing``)."""
    if view.released:
        who = f" (held at submission by {view.held_by})" if view.held_by else ""
        return Decision(DecisionKind.START, f"released{who}: starting attempt 1", attempt=1)
    if view.held:
        reason = submission_hold_summary(view.job_id, view.held_by or "unknown")
        if view.state is not State.HELD:
            return Decision(DecisionKind.HOLD, reason)
        return Decision(DecisionKind.NOTHING, reason)
    return Decision(DecisionKind.START, "starting the first attempt", attempt=1)


def next_decision(view: JobView, policy: RecoveryPolicy, now: float) -> Decision:
    """The next step for the job in ``view`` under ``policy`` at time ``now``. Pure.

    Precedence: a terminal job needs nothing; a cancel request stops the live attempt and
    ends the job cancelled; a job held at submission starts nothing until it is released;
    then the current attempt's own state; then the policy.
    """
    if view.terminal:
        return Decision(DecisionKind.NOTHING, f"the job is {view.state.value}")
    if view.cancel is not None:
        return _on_cancel(view, view.cancel, now)
    attempt = view.attempt
    if attempt is None:
        return _before_the_first_attempt(view)
    if attempt.handle is None and not attempt.is_terminal:
        return Decision(
            DecisionKind.START,
            f"attempt {attempt.number} was claimed but its start was never recorded: "
            "re-issuing the idempotent start to adopt it",
            attempt=attempt.number,
        )
    if attempt.is_live:
        if attempt.cause is Cause.UNPLANNED_RECOVERY:
            return Decision(
                DecisionKind.CANCEL,
                f"attempt {attempt.number} re-ran work behind dispatch's back "
                "(unplanned recovery): stopping it; recovery is dispatch's to decide",
                attempt=attempt.number,
                cause=Cause.UNPLANNED_RECOVERY,
            )
        return Decision(
            DecisionKind.OBSERVE,
            f"attempt {attempt.number} is {attempt.state.value}",
            attempt=attempt.number,
        )
    if attempt.state is State.SUCCEEDED:
        return _finish(State.SUCCEEDED, None, f"attempt {attempt.number} succeeded")
    if attempt.state is State.CANCELLED or attempt.cause is Cause.CANCELLED:
        return _finish(
            State.CANCELLED, Cause.CANCELLED, f"{_ended(attempt)}; a cancelled job is never retried"
        )
    return _apply_policy(view, attempt, policy, now)

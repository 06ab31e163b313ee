"""``fold``: a job's history, as recorded, folded into the view the decisions are made on.

Pure: no clock, no I/O. The history is what the records store holds for one job; the view is
everything ``next`` needs and nothing it must recompute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dispatch.model import AttemptHandle, Cause, Outcome, RecoveryPolicy, State
from dispatch.records import (
    AttemptRecord,
    CancelRequest,
    JobRecord,
    LogEntry,
    LogKind,
    Records,
)


@dataclass(frozen=True, slots=True)
class History:
    """Everything recorded about one job: its record, its attempts and its log, in order."""

    job: JobRecord
    attempts: Sequence[AttemptRecord] = ()
    log: Sequence[LogEntry] = ()


def load_history(records: Records, job_id: str) -> History:
    """Read one job's history from the store (three short reads)."""
    return History(
        job=records.get_job(job_id),
        attempts=tuple(records.attempts(job_id)),
        log=tuple(records.log(job_id)),
    )


@dataclass(frozen=True, slots=True)
class AttemptView:
    """The current (latest) attempt as recorded."""

    number: int
    handle: AttemptHandle | None
    outcome: Outcome | None
    ended_at: float | None

    @property
    def state(self) -> State:
        return self.outcome.state if self.outcome else State.PENDING

    @property
    def cause(self) -> Cause | None:
        return self.outcome.cause if self.outcome else None

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    @property
    def is_live(self) -> bool:
        """Handed to the scheduler and not known to have ended."""
        return self.handle is not None and not self.is_terminal


@dataclass(frozen=True, slots=True)
class JobView:
    """What the supervisor knows about a job, folded from its history.

    ``retries`` counts, per cause, the attempts that ended with that cause and were followed
    by another attempt. ``held`` is True when a hold applies and no release was requested
    since: a ``hold`` decided for the current attempt, or, while the job has no attempt, a
    hold requested at submission (``held_by`` names who asked; None otherwise). ``released``
    is True when a release was requested after that hold. ``cancel_sent_at`` is when a cancel
    of the current attempt was last sent (None if never).
    """

    job_id: str
    policy: RecoveryPolicy
    state: State
    attempt: AttemptView | None = None
    retries: Mapping[Cause, int] = field(default_factory=dict)
    cancel: CancelRequest | None = None
    held: bool = False
    released: bool = False
    cancel_sent_at: float | None = None
    held_by: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state.is_terminal

    @property
    def attempt_number(self) -> int:
        """The current attempt's number, 0 before the first."""
        return self.attempt.number if self.attempt else 0

    @property
    def ended_at(self) -> float | None:
        return self.attempt.ended_at if self.attempt else None

    def retries_used(self, causes: Sequence[Cause]) -> int:
        """Retries already spent on any of ``causes`` (one rule's budget)."""
        return sum(self.retries.get(c, 0) for c in causes)


def _decisions_for(log: Sequence[LogEntry], attempt: int) -> list[LogEntry]:
    return [e for e in log if e.kind == LogKind.DECISION and e.data.get("attempt") == attempt]


def _submission_hold(log: Sequence[LogEntry]) -> LogEntry | None:
    """The latest hold requested at submission (before attempt 1), if any."""
    requests = [e for e in log if e.kind == LogKind.HOLD_REQUESTED and e.data.get("attempt") == 0]
    return requests[-1] if requests else None


def fold(history: History) -> JobView:
    """Fold a job's recorded history into a ``JobView``. Pure and total."""
    record = history.job
    attempts = sorted(history.attempts, key=lambda a: a.attempt)
    retries: dict[Cause, int] = {}
    for followed in attempts[:-1]:
        cause = followed.outcome.cause if followed.outcome else None
        if cause is not None:
            retries[cause] = retries.get(cause, 0) + 1

    current: AttemptView | None = None
    hold_seq: int | None = None
    held_by: str | None = None
    cancel_sent_at: float | None = None
    if not attempts:
        request = _submission_hold(history.log)
        if request is not None:
            hold_seq, held_by = request.seq, str(request.data.get("actor") or "unknown")
    else:
        last = attempts[-1]
        current = AttemptView(
            number=last.attempt, handle=last.handle, outcome=last.outcome, ended_at=last.ended_at
        )
        for entry in _decisions_for(history.log, last.attempt):
            action = entry.data.get("action")
            if action == "hold":
                hold_seq = entry.seq
            elif action == "cancel":
                cancel_sent_at = entry.at
    released = hold_seq is not None and any(
        e.kind == LogKind.RELEASE_REQUESTED and e.seq > hold_seq for e in history.log
    )
    held = hold_seq is not None and not released

    return JobView(
        job_id=record.id,
        policy=record.job.spec.recovery,
        state=record.state,
        attempt=current,
        retries=retries,
        cancel=record.cancel,
        held=held,
        released=released,
        cancel_sent_at=cancel_sent_at,
        held_by=held_by,
    )


def last_decision(log: Sequence[LogEntry]) -> Mapping[str, Any] | None:
    """The latest decision logged for a job (for ``dispatch status``), or None."""
    for entry in reversed(log):
        if entry.kind == LogKind.DECISION:
            return {**entry.data, "at": entry.at}
    return None

"""What a job looks like to its user: state, cause, summary, first failure, attempts, decision."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dispatch.model import Cause, Evidence, Failure, Outcome, State
from dispatch.records import AttemptRecord, JobRecord, LogEntry
from dispatch.supervise import last_decision


@dataclass(frozen=True, slots=True)
class AttemptStatus:
    number: int
    state: State
    cause: Cause | None
    summary: str
    first_failure: Failure | None
    evidence: tuple[Evidence, ...]
    created_at: float
    ended_at: float | None
    native: str | None

    @classmethod
    def of(cls, record: AttemptRecord, evidence: Sequence[Evidence] = ()) -> AttemptStatus:
        outcome = record.outcome or Outcome(State.PENDING)
        return cls(
            number=record.attempt,
            state=outcome.state,
            cause=outcome.cause,
            summary=outcome.summary,
            first_failure=outcome.first_failure,
            evidence=tuple(evidence) or outcome.evidence,
            created_at=record.created_at,
            ended_at=record.ended_at,
            native=record.handle.native if record.handle else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.number,
            "state": self.state.value,
            "cause": self.cause.value if self.cause else None,
            "summary": self.summary,
            "firstFailure": self.first_failure.to_json() if self.first_failure else None,
            "evidence": [e.to_json() for e in self.evidence],
            "createdAt": self.created_at,
            "endedAt": self.ended_at,
            "native": self.native,
        }


@dataclass(frozen=True, slots=True)
class JobStatus:
    """A job as recorded: its coarse state and cause, the attempts, the last decision."""

    id: str
    name: str
    cluster: str
    state: State
    cause: Cause | None
    summary: str
    created_at: float
    updated_at: float
    attempts: tuple[AttemptStatus, ...] = ()
    decision: Mapping[str, Any] | None = None
    cancel_requested_by: str | None = None
    submitted_by: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        record: JobRecord,
        attempts: Sequence[AttemptRecord] = (),
        log: Sequence[LogEntry] = (),
        evidence: Mapping[int, Sequence[Evidence]] | None = None,
    ) -> JobStatus:
        evidence = evidence or {}
        return cls(
            id=record.id,
            name=record.job.spec.name,
            cluster=record.job.spec.cluster,
            state=record.state,
            cause=record.cause,
            summary=record.summary,
            created_at=record.job.created_at,
            updated_at=record.updated_at,
            attempts=tuple(AttemptStatus.of(a, evidence.get(a.attempt, ())) for a in attempts),
            decision=last_decision(log),
            cancel_requested_by=record.cancel.actor if record.cancel else None,
            submitted_by=record.submitted_by,
        )

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    @property
    def succeeded(self) -> bool:
        return self.state is State.SUCCEEDED

    @property
    def last_attempt(self) -> AttemptStatus | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def first_failure(self) -> Failure | None:
        last = self.last_attempt
        return last.first_failure if last else None

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        last = self.last_attempt
        return last.evidence if last else ()

    @property
    def outcome(self) -> Outcome:
        """The job's outcome as a value (state, cause, summary, first failure, evidence)."""
        cause = self.cause
        if self.state in (State.FAILED, State.CANCELLED) and cause is None:
            cause = Cause.UNKNOWN
        return Outcome(
            self.state,
            None if self.state is State.SUCCEEDED else cause,
            self.summary,
            first_failure=self.first_failure,
            evidence=self.evidence,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.id,
            "name": self.name,
            "cluster": self.cluster,
            "state": self.state.value,
            "cause": self.cause.value if self.cause else None,
            "summary": self.summary,
            "firstFailure": self.first_failure.to_json() if self.first_failure else None,
            "evidence": [e.to_json() for e in self.evidence],
            "attempts": [a.to_json() for a in self.attempts],
            "decision": dict(self.decision) if self.decision else None,
            "submittedBy": self.submitted_by,
            "cancelRequestedBy": self.cancel_requested_by,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }

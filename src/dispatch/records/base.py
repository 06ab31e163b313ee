"""The records store: the single source of truth for jobs, attempts, evidence and intents.

The interface is synchronous: every call is one short transaction against a local database,
which keeps the supervisor and the simulator simple and fast, unless calls are grouped into one
(``Records.together``). Implementations must be safe for several processes on one machine:
each call is atomic, and the conditional writes (``create_attempt``, ``acquire_lease``) decide
races between supervisors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from dispatch.model import (
    AttemptHandle,
    Cause,
    Evidence,
    Job,
    JobSpec,
    LeaseLost,
    Outcome,
    State,
)


class LogKind(StrEnum):
    """The kinds of entry in a job's log (``Records.append_log``), and who writes each."""

    DECISION = "decision"  # the supervisor decided (``supervise.recording.log_decision``)
    HOLD_REQUESTED = "hold-requested"  # ``create_job(..., held_by=...)``: a person asked
    CANCEL_REQUESTED = "cancel-requested"  # ``request_cancel``: a person asked
    RELEASE_REQUESTED = "release-requested"  # ``request_release``: a person asked


@dataclass(frozen=True, slots=True)
class OpenJob:
    """A job not in a terminal state, as ``Records.open_jobs`` lists it."""

    id: str
    cluster: str
    created_at: float


class IntentOperation(StrEnum):
    """The operations an intent is written before (``Records.open_intent``)."""

    START = "start"  # create attempt ``attempt`` on the scheduler, or adopt it
    CANCEL = "cancel"  # ask the scheduler to stop attempt ``attempt``


def submission_hold_summary(job_id: str, actor: str) -> str:
    """The one-line status of a job held at submission (``dispatch status`` shows it)."""
    return f"held at submission by {actor}; release with `dispatch release {job_id}`"


class IntentStatus(StrEnum):
    OPEN = "open"  # written before the operation; the operation may or may not have happened
    DONE = "done"  # the operation's result is recorded
    ROLLED_BACK = "rolled_back"  # reconciliation found the operation had no effect and undid it


@dataclass(frozen=True, slots=True)
class CancelRequest:
    actor: str
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job and its last recorded coarse status (written by the supervisor)."""

    job: Job
    state: State
    cause: Cause | None
    summary: str
    updated_at: float
    cancel: CancelRequest | None = None
    release_count: int = 0
    submitted_by: str | None = None  # who submitted it (None for jobs recorded before 0.2)

    @property
    def id(self) -> str:
        return self.job.id


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    job_id: str
    attempt: int
    created_at: float
    handle: AttemptHandle | None = None
    outcome: Outcome | None = None
    ended_at: float | None = None

    @property
    def state(self) -> State:
        return self.outcome.state if self.outcome else State.PENDING


@dataclass(frozen=True, slots=True)
class Intent:
    """A marker written before an operation with effects outside the store."""

    id: int
    job_id: str
    attempt: int | None
    operation: str
    owner: str
    created_at: float
    status: IntentStatus
    data: Mapping[str, Any] = field(default_factory=dict)
    result: Mapping[str, Any] | None = None
    closed_at: float | None = None


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry of a job's history: a decision and its reason, a cancel request, a note."""

    seq: int
    job_id: str
    at: float
    kind: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Lease:
    job_id: str
    owner: str
    expires_at: float
    epoch: int  # increases each time the lease changes hands: a fencing token


def check_fence(fence: Lease, holder: tuple[str, int] | None) -> None:
    """Raise ``LeaseLost`` unless the job's lease (``holder``: its owner and epoch, None when
    no lease is recorded) is still ``fence``'s."""
    if holder == (fence.owner, fence.epoch):
        return
    now = f"{holder[0]} holds it (epoch {holder[1]})" if holder is not None else "nobody holds it"
    raise LeaseLost(
        f"{fence.owner}'s lease on {fence.job_id} (epoch {fence.epoch}) was lost: {now}; "
        "the write was refused"
    )


class Records(Protocol):
    """The store's contract. Times come from the store's injected clock.

    Fencing: every write a supervisor makes for a job names the lease it holds (``fence``).
    The store checks, in the write's own transaction, that the job's lease still has that
    owner and epoch, and raises ``LeaseLost`` without writing anything otherwise: a
    supervisor that lost its lease (paused past the TTL while another took the job over)
    cannot land a late write. A taking-over ``acquire_lease`` waits for a fenced write in
    progress, so a write is either before the takeover or refused. Writes without a fence
    (a person's cancel, release or submission) are not checked.
    """

    #: where the records are, as messages name them (a file path, or a URL without password)
    path: str
    #: job ids whose rows ``list_jobs`` could not read and skipped, with why
    unreadable: dict[str, str]

    # jobs
    def create_job(
        self,
        spec: JobSpec,
        *,
        held_by: str | None = None,
        environment: Mapping[str, str] | None = None,
        submitted_by: str | None = None,
    ) -> Job:
        """Accept a new job with a fresh id (from the injected id generator), state pending.
        ``environment`` (captured from the submitter) is stored with it (``Job.environment``),
        and ``submitted_by`` (who submitted it) on its record (``JobRecord.submitted_by``).

        With ``held_by`` (who asked) the job is accepted *held*, in the same transaction: state
        ``held``, summary ``submission_hold_summary(id, held_by)``, and a log entry
        ``LogKind.HOLD_REQUESTED`` ``{"attempt": 0, "actor": held_by}``. No supervisor can see the job
        without its hold, so none starts an attempt before a release."""
        ...

    def get_job(self, job_id: str) -> JobRecord:
        """Raises ``NotFound`` for an unknown id."""
        ...

    def list_jobs(
        self, *, cluster: str | None = None, open_only: bool = False, limit: int | None = None
    ) -> list[JobRecord]:
        """Newest first. ``open_only``: jobs not in a terminal state."""
        ...

    def open_jobs(self) -> list[OpenJob]:
        """Every job not in a terminal state, oldest first (of two made at the same time, the
        later id first), without reading its spec: what a supervisor's pass looks at to find
        the jobs it has not seen yet."""
        ...

    def set_job_status(
        self,
        job_id: str,
        state: State,
        cause: Cause | None = None,
        summary: str = "",
        *,
        if_open: bool = False,
        fence: Lease | None = None,
    ) -> bool:
        """Record the job's coarse status; True if it changed. With ``if_open`` a job already
        in a terminal state is left as it is (a terminal status is final for the supervisor).
        Raises ``NotFound`` for an unknown id."""
        ...

    def request_cancel(self, job_id: str, actor: str, reason: str) -> bool:
        """Record a cancel request; False if one was already recorded (the first one stands)."""
        ...

    def request_release(self, job_id: str) -> int:
        """Record a release of a held job; returns the number of releases so far."""
        ...

    # attempts
    def create_attempt(self, job_id: str, attempt: int, *, fence: Lease | None = None) -> bool:
        """Claim attempt number ``attempt``; False if it already exists. Attempts are
        created in order: claiming n needs n-1 to exist (``ValueError`` otherwise)."""
        ...

    def set_handle(
        self, job_id: str, attempt: int, handle: AttemptHandle, *, fence: Lease | None = None
    ) -> None: ...

    def record_outcome(
        self, job_id: str, attempt: int, outcome: Outcome, *, fence: Lease | None = None
    ) -> None:
        """The attempt's latest outcome. A terminal outcome is final: later calls are ignored."""
        ...

    def attempts(self, job_id: str) -> list[AttemptRecord]:
        """In attempt order."""
        ...

    def live_attempts(self) -> list[AttemptRecord]:
        """The newest attempt of every open job when it has a handle and has not ended (what
        a supervisor follows), in one read."""
        ...

    # evidence (append only)
    def add_evidence(
        self,
        job_id: str,
        attempt: int,
        evidence: Iterable[Evidence],
        *,
        fence: Lease | None = None,
    ) -> int:
        """Store facts not seen before (by key within the attempt); returns how many were new."""
        ...

    def evidence(self, job_id: str, attempt: int | None = None) -> list[Evidence]:
        """In the order first recorded."""
        ...

    # history
    def append_log(
        self, job_id: str, kind: str, data: Mapping[str, Any], *, fence: Lease | None = None
    ) -> int: ...

    def log(self, job_id: str) -> list[LogEntry]: ...

    def logged_after(self, seq: int) -> tuple[set[str], int]:
        """The jobs with a log entry newer than ``seq`` (entries are numbered across all jobs),
        and the newest entry's number (``seq`` when there is none)."""
        ...

    # intents
    def open_intent(
        self,
        job_id: str,
        operation: IntentOperation,
        owner: str,
        *,
        attempt: int | None = None,
        data: Mapping[str, Any] | None = None,
        fence: Lease | None = None,
    ) -> Intent: ...

    def close_intent(
        self,
        intent_id: int,
        *,
        status: IntentStatus = IntentStatus.DONE,
        result: Mapping[str, Any] | None = None,
        fence: Lease | None = None,
    ) -> None: ...

    def open_intents(self, job_id: str | None = None) -> list[Intent]: ...

    # leases
    def acquire_lease(self, job_id: str, owner: str, ttl: float) -> Lease | None:
        """Take or renew the job's lease for ``ttl`` seconds; None if another owner holds an
        unexpired one."""
        ...

    def release_lease(self, job_id: str, owner: str) -> None: ...

    def lease(self, job_id: str) -> Lease | None:
        """The current unexpired lease, if any."""
        ...

    def together(self, fence: Lease | None = None) -> AbstractContextManager[None]:
        """The calls made in the block are one transaction: all their writes land, or none
        (an error that leaves the block undoes them all). ``fence`` is checked at its start,
        as for one write, and each write keeps its own. A block inside another is part of it.
        Only for calls made one after the other, with no await between them: the transaction
        holds the store's write lock until the block ends. A supervisor groups the writes
        that follow one decision (a start's handle, outcome, status and closed intent) so that
        they cost one commit, not five."""
        ...

    def close(self) -> None: ...

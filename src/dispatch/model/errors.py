"""The error tree: one root, sorted by what the caller can do about it.

``TransientError``: the same call may succeed later (retry, maybe after ``delay``).
``PermanentError``: retrying the same call cannot help (invalid spec, unsupported, forbidden).
Third-party exceptions are translated into these at the adapter boundary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dispatch.model.outcome import Outcome


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason for a refusal: a stable rule id and a human message."""

    rule: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


@dataclass(frozen=True, slots=True)
class SpecProblem:
    """One problem in a job spec or configuration file: where, what, and how to fix it."""

    field: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        text = f"{self.field}: {self.message}"
        return f"{text} (fix: {self.fix})" if self.fix else text


class DispatchError(Exception):
    """Root of every error dispatch raises on purpose."""

    transient: bool = False


class TransientError(DispatchError):
    """The operation may succeed if tried again, after ``delay`` seconds when given."""

    transient = True

    def __init__(self, message: str, *, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(DispatchError):
    """Trying the same operation again cannot succeed; something must change first."""


#: problems an ``InvalidSpec`` lists
MAX_LISTED = 20


class InvalidSpec(PermanentError, ValueError):
    """A job spec (or config file) is malformed. Carries the problems found, not just the first
    (up to ``MAX_LISTED`` of them; ``total`` counts them all)."""

    def __init__(
        self,
        problems: Iterable[SpecProblem],
        *,
        source: str | None = None,
        total: int | None = None,
    ) -> None:
        every = tuple(problems)
        #: the first ``MAX_LISTED`` problems (a list of a million wrong items is not echoed)
        self.problems = every[:MAX_LISTED]
        #: how many there are, listed or not (``total`` when the caller counted more)
        self.total = max(total or 0, len(every))
        self.source = source
        where = f"{source}: " if source else ""
        lines = "\n".join(f"  - {p}" for p in self.problems)
        if self.total > len(self.problems):
            lines += f"\n  - ... and {self.total - len(self.problems):,} more: fix these first"
        plural = "" if self.total == 1 else "s"
        super().__init__(f"{where}{self.total:,} problem{plural} in the job spec:\n{lines}")


class ConfigError(PermanentError):
    """The dispatch configuration (clusters) is malformed or names something that does not exist."""


class StateError(PermanentError):
    """The state directory or its records cannot be used (damaged, unwritable, disk full)."""


class Unsupported(PermanentError):
    """The job cannot run on this cluster. Carries *every* reason found.

    Guarantee: when an adapter raises ``Unsupported``, nothing of the job exists on the
    scheduler (anything created before the refusal was found has been removed).
    """

    def __init__(self, reasons: Iterable[Reason], *, cluster: str | None = None) -> None:
        self.reasons = tuple(reasons)
        if not self.reasons:
            raise ValueError("Unsupported needs at least one reason")
        self.cluster = cluster
        where = f" on cluster {cluster!r}" if cluster else ""
        lines = "\n".join(f"  - {r}" for r in self.reasons)
        super().__init__(f"the job cannot run{where}:\n{lines}")

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(r.rule for r in self.reasons)


class NotFound(PermanentError, LookupError):
    """A job, attempt, cluster or scheduler object that was asked for does not exist."""


class Forbidden(PermanentError, PermissionError):
    """The credentials in use are not allowed to perform the operation."""


class OutcomeUnknown(TransientError):
    """An operation's effect is not known (timeout, connection lost, process died mid-call).

    Never retry blindly: observe first, then decide. Idempotent operations (``start`` with the
    same job and attempt) may be repeated because they adopt what already exists.
    """


class SchedulerUnavailable(TransientError, ConnectionError):
    """The scheduler could not be reached or answered with a temporary failure."""


class RecordsUnavailable(TransientError):
    """The records' database could not be reached or dropped the connection (a server
    restarting, a network blip). A write in progress may or may not have landed, as with
    ``OutcomeUnknown``: read again before acting."""


class LeaseLost(TransientError):
    """Another supervisor holds the job's lease; this one must stop acting on the job."""


class NotBuiltYet(PermanentError, NotImplementedError):
    """A documented part of dispatch that this version does not implement yet."""


class JobFailed(DispatchError):
    """A job ended without succeeding, and the caller asked for an exception.

    Raised by ``wait(..., raise_on_failure=True)`` and ``run(..., raise_on_failure=True)``
    once the job is terminal (failed or cancelled), never while it may still succeed.
    ``outcome`` is the job's final ``Outcome`` (state, cause, summary, first failure,
    evidence); ``status`` is the final ``dispatch.JobStatus`` (attempts, decision) of ``job``.
    """

    def __init__(self, job: str, outcome: Outcome, status: Any = None) -> None:
        self.job = job
        self.outcome = outcome
        self.status = status
        cause = f" ({outcome.cause.value})" if outcome.cause else ""
        summary = f": {outcome.summary}" if outcome.summary else ""
        super().__init__(f"job {job} {outcome.state.value}{cause}{summary}")

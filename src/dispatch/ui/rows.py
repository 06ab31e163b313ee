"""A job as the jobs table shows it, and the table's filters. Pure: values in, values out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dispatch.model import TERMINAL_STATES, Cause, State
from dispatch.records import AttemptRecord, JobRecord

#: characters of a name filter kept (longer input is cut, never echoed whole)
NAME_FILTER_LIMIT = 100
#: what the jobs page shows by default, and at most
DEFAULT_LIMIT, MAX_LIMIT = 200, 5000


@dataclass(frozen=True, slots=True)
class AttemptSpan:
    """One attempt, as the overview counts it: when it ran and how it ended."""

    number: int
    state: State
    cause: Cause | None
    created_at: float
    ended_at: float | None

    @classmethod
    def of(cls, record: AttemptRecord) -> AttemptSpan:
        outcome = record.outcome
        return cls(
            number=record.attempt,
            state=record.state,
            cause=outcome.cause if outcome else None,
            created_at=record.created_at,
            ended_at=record.ended_at,
        )

    @property
    def lost(self) -> bool:
        """Ended other than succeeded: its time was lost to its cause."""
        return self.ended_at is not None and self.state is not State.SUCCEEDED


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job's line in the jobs table, with its attempts (for the overview). ``seq`` is the
    change feed's number when the row was last read (``Records.logged_after``)."""

    id: str
    name: str
    cluster: str
    state: State
    cause: Cause | None
    summary: str
    created_at: float
    updated_at: float
    submitted_by: str | None
    attempts: tuple[AttemptSpan, ...] = ()
    seq: int = 0

    @classmethod
    def of(cls, record: JobRecord, attempts: Sequence[AttemptRecord], seq: int = 0) -> JobRow:
        return cls(
            id=record.id,
            name=record.job.spec.name,
            cluster=record.job.spec.cluster,
            state=record.state,
            cause=record.cause,
            summary=record.summary,
            created_at=record.job.created_at,
            updated_at=record.updated_at,
            submitted_by=record.submitted_by,
            attempts=tuple(AttemptSpan.of(a) for a in attempts),
            seq=seq,
        )

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def ended_at(self) -> float | None:
        """When the job ended (its last recorded change, once terminal)."""
        return self.updated_at if self.is_terminal else None

    def shown(self) -> tuple[Any, ...]:
        """What the table shows: two rows that differ only in ``seq`` need no update."""
        return (self.state, self.cause, self.summary, self.cluster, len(self.attempts))

    def to_json(self) -> dict[str, Any]:
        """The row as the page's script receives it (rendered with ``textContent``)."""
        return {
            "job": self.id,
            "name": self.name,
            "cluster": self.cluster,
            "state": self.state.value,
            "cause": self.cause.value if self.cause else None,
            "summary": self.summary,
            "attempts": len(self.attempts),
            "createdAt": self.created_at,
            "submittedBy": self.submitted_by,
        }


def _choice(raw: str | None, allowed: Mapping[str, Any]) -> str | None:
    return raw if raw in allowed else None


_STATES = {s.value: s for s in State}
_CAUSES = {c.value: c for c in Cause}


@dataclass(frozen=True, slots=True)
class Filters:
    """The jobs table's filters; an empty one matches everything. Unknown values are
    dropped (the form offers only known ones), a name filter is cut to a bounded length."""

    state: str | None = None
    cause: str | None = None
    cluster: str | None = None
    name: str | None = None
    limit: int = DEFAULT_LIMIT

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Filters:
        try:
            limit = int(query.get("limit", DEFAULT_LIMIT))
        except ValueError:
            limit = DEFAULT_LIMIT
        name = (query.get("name") or "").strip()[:NAME_FILTER_LIMIT] or None
        cluster = (query.get("cluster") or "").strip()[:NAME_FILTER_LIMIT] or None
        return cls(
            state=_choice(query.get("state"), _STATES),
            cause=_choice(query.get("cause"), _CAUSES),
            cluster=cluster,
            name=name,
            limit=max(1, min(limit, MAX_LIMIT)),
        )

    def matches(self, row: JobRow) -> bool:
        return (
            (self.state is None or row.state.value == self.state)
            and (self.cause is None or (row.cause is not None and row.cause.value == self.cause))
            and (self.cluster is None or row.cluster == self.cluster)
            and (self.name is None or self.name.lower() in row.id.lower())
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "cause": self.cause,
            "cluster": self.cluster,
            "name": self.name,
        }


def age(seconds: float) -> str:
    """``42s``, ``5m``, ``3h``, ``2d``: how long ago, as the table shows it."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"

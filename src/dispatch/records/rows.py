"""Reading stored rows back into records, shared by every records store.

Rows come as mappings from column name to value (``sqlite3.Row`` or psycopg's dict rows); the
columns are the same in every store's schema. Reading a job or attempt parses JSON and
validates a spec each time: the values are immutable, so each distinct row is parsed once
(bounded caches per store).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from dispatch import jsontext
from dispatch.model import AttemptHandle, Cause, Evidence, Job, JobSpec, Outcome, State
from dispatch.records.base import (
    AttemptRecord,
    CancelRequest,
    Intent,
    IntentStatus,
    JobRecord,
    LogEntry,
)

#: jobs (and specs) whose parsed rows are kept per store (immutable values; parsing a spec is
#: most of the cost of reading a job): more than the open jobs one supervisor follows, since
#: its full pass reads every open job and its watch refresh every live attempt; an open job's
#: parsed row, spec and text hold about 5 KiB, so 16,384 of them are ~80 MiB at most
PARSED_CACHE_SIZE = 16_384
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Row(Protocol):
    """A stored row: its values by column name."""

    def __getitem__(self, column: str, /) -> Any: ...


def dump(value: Any) -> str:
    """JSON as every store writes it: compact, keys sorted (equal values, equal text)."""
    return jsontext.dumps(value)


class RowReader:
    """Parses rows into records, each distinct row once. What is kept is a job's while it is
    open: a job once ended is not kept (``forget``), since no supervisor reads it again and a
    long-lived one would otherwise hold every job it ever finished."""

    def __init__(self) -> None:
        #: a spec's text -> (that text as first read, the spec parsed)
        self._specs: dict[str, tuple[str, JobSpec]] = {}
        #: per job, its row as last read (its spec the text parsed once), that row parsed and
        #: its spec's text
        self._jobs: dict[str, tuple[tuple[Any, ...], JobRecord, str]] = {}
        #: per job, its attempts' handles and outcomes by their text, its log entries by seq
        self._parts: dict[str, _JobParts] = {}

    def _job_parts(self, job_id: str) -> _JobParts:
        return _cached(self._parts, job_id, _JobParts)

    def forget(self, job_id: str) -> None:
        """The job has ended: drop what is kept for it. Its spec's text goes too: another
        open job whose spec is the same text (the same file submitted twice) parses it once
        more at its next read."""
        cached = self._jobs.pop(job_id, None)
        self._parts.pop(job_id, None)
        if cached is not None:
            self._specs.pop(cached[2], None)

    def job(self, row: Row, values: tuple[Any, ...]) -> JobRecord:
        """``values``: the row's (a changed row is parsed again). One row is kept per open job,
        the last read (a job's row changes with each step; its earlier rows are not read
        again), its spec the text already held with the parsed spec, not the copy each read
        makes. The row of an ended job is parsed and not kept."""
        text, job_id = row["spec"], row["id"]
        if State(row["state"]).is_terminal:
            found = self._specs.get(text)  # taken before ``forget`` drops it
            self.forget(job_id)
            return self._parse_job(row, found[1] if found else JobSpec.model_validate_json(text))
        held, spec = _cached(self._specs, text, lambda: (text, JobSpec.model_validate_json(text)))
        key = tuple(held if v is text else v for v in values)
        cached = self._jobs.get(job_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        record = self._parse_job(row, spec)
        if cached is None and len(self._jobs) >= PARSED_CACHE_SIZE:
            self._jobs.clear()
        self._jobs[job_id] = (key, record, held)
        return record

    def _parse_job(self, row: Row, spec: JobSpec) -> JobRecord:
        cancel = (
            CancelRequest(
                actor=row["cancel_actor"], reason=row["cancel_reason"], at=row["cancel_at"]
            )
            if row["cancel_at"] is not None
            else None
        )
        return JobRecord(
            job=Job(
                id=row["id"],
                spec=spec,
                created_at=row["created_at"],
                environment=jsontext.loads(row["environment"]) if row["environment"] else None,
            ),
            state=State(row["state"]),
            cause=Cause(row["cause"]) if row["cause"] else None,
            summary=row["summary"],
            updated_at=row["updated_at"],
            cancel=cancel,
            release_count=row["release_count"],
            submitted_by=row["submitted_by"],
        )

    def attempts(self, rows: Iterable[Row]) -> list[AttemptRecord]:
        found = []
        for r in rows:
            parts = self._job_parts(r["job_id"])
            handle, outcome = r["handle"], r["outcome"]
            found.append(
                AttemptRecord(
                    job_id=r["job_id"],
                    attempt=r["attempt"],
                    created_at=r["created_at"],
                    handle=parts.handle(handle) if handle else None,
                    outcome=parts.outcome(outcome) if outcome else None,
                    ended_at=r["ended_at"],
                )
            )
        return found

    def log_entry(self, row: Row) -> LogEntry:
        """Log rows are append-only: an entry, once read, never changes."""
        return _cached(
            self._job_parts(row["job_id"]).log,
            int(row["seq"]),
            lambda: LogEntry(
                seq=row["seq"],
                job_id=row["job_id"],
                at=row["at"],
                kind=row["kind"],
                data=jsontext.loads(row["data"]),
            ),
        )


@dataclass(slots=True)
class _JobParts:
    """One job's parsed attempt values and log entries (a job's own: bounded by its rows,
    and by ``PARSED_CACHE_SIZE`` each)."""

    handles: dict[str, AttemptHandle] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    log: dict[int, LogEntry] = field(default_factory=dict)

    def handle(self, text: str) -> AttemptHandle:
        return _cached(self.handles, text, lambda: AttemptHandle.from_json(jsontext.loads(text)))

    def outcome(self, text: str) -> Outcome:
        return _cached(self.outcomes, text, lambda: Outcome.from_json(jsontext.loads(text)))


def _cached(cache: dict[K, V], key: K, make: Callable[[], V]) -> V:
    """``cache[key]``, made by ``make`` when missing; a cache at ``PARSED_CACHE_SIZE`` is
    emptied first."""
    value = cache.get(key)
    if value is None:
        if len(cache) >= PARSED_CACHE_SIZE:
            cache.clear()
        value = cache[key] = make()
    return value


def evidence(row: Row) -> Evidence:
    return Evidence(
        kind=row["kind"],
        key=row["key"],
        observed_at=row["observed_at"],
        summary=row["summary"],
        data=jsontext.loads(row["data"]),
    )


def intent(row: Row) -> Intent:
    return Intent(
        id=row["id"],
        job_id=row["job_id"],
        attempt=row["attempt"],
        operation=row["operation"],
        owner=row["owner"],
        created_at=row["created_at"],
        status=IntentStatus(row["status"]),
        data=jsontext.loads(row["data"]),
        result=jsontext.loads(row["result"]) if row["result"] else None,
        closed_at=row["closed_at"],
    )

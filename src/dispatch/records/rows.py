"""Reading stored rows back into records, shared by every records store.

Rows come as mappings from column name to value (``sqlite3.Row`` or psycopg's dict rows); the
columns are the same in every store's schema. Reading a job or attempt parses JSON and
validates a spec each time: the values are immutable, so each distinct row is parsed once
(bounded caches per store).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
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

#: parsed rows kept per store and kind (immutable values; parsing a spec is most of the cost
#: of reading a job): more than the open jobs and live attempts one supervisor follows, since
#: its full pass reads every open job and its watch refresh every live attempt; a parsed spec
#: holds about 3 KiB (4 with its text), so 16,384 of them are ~64 MiB at most
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
    """Parses rows into records, each distinct row once."""

    def __init__(self) -> None:
        #: a spec's text -> (that text as first read, the spec parsed)
        self._specs: dict[str, tuple[str, JobSpec]] = {}
        #: per job, its row as last read (its spec the text parsed once) and that row parsed
        self._jobs: dict[str, tuple[tuple[Any, ...], JobRecord]] = {}
        self._handles: dict[str, AttemptHandle] = {}
        self._outcomes: dict[str, Outcome] = {}
        self._log_entries: dict[int, LogEntry] = {}

    @staticmethod
    def _cached(cache: dict[K, V], key: K, make: Callable[[], V]) -> V:
        value = cache.get(key)
        if value is None:
            if len(cache) >= PARSED_CACHE_SIZE:
                cache.clear()
            value = cache[key] = make()
        return value

    def handle(self, text: str) -> AttemptHandle:
        return self._cached(
            self._handles, text, lambda: AttemptHandle.from_json(jsontext.loads(text))
        )

    def outcome(self, text: str) -> Outcome:
        return self._cached(self._outcomes, text, lambda: Outcome.from_json(jsontext.loads(text)))

    def job(self, row: Row, values: tuple[Any, ...]) -> JobRecord:
        """``values``: the row's (a changed row is parsed again). One row is kept per job, the
        last read (a job's row changes with each step; its earlier rows are not read again),
        its spec the text already held with the parsed spec, not the copy each read makes."""
        text = row["spec"]
        held, spec = self._cached(
            self._specs, text, lambda: (text, JobSpec.model_validate_json(text))
        )
        key = tuple(held if v is text else v for v in values)
        cached = self._jobs.get(row["id"])
        if cached is not None and cached[0] == key:
            return cached[1]
        record = self._parse_job(row, spec)
        if cached is None and len(self._jobs) >= PARSED_CACHE_SIZE:
            self._jobs.clear()
        self._jobs[row["id"]] = (key, record)
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
        return [
            AttemptRecord(
                job_id=r["job_id"],
                attempt=r["attempt"],
                created_at=r["created_at"],
                handle=self.handle(r["handle"]) if r["handle"] else None,
                outcome=self.outcome(r["outcome"]) if r["outcome"] else None,
                ended_at=r["ended_at"],
            )
            for r in rows
        ]

    def log_entry(self, row: Row) -> LogEntry:
        """Log rows are append-only: an entry, once read, never changes."""
        return self._cached(
            self._log_entries,
            int(row["seq"]),
            lambda: LogEntry(
                seq=row["seq"],
                job_id=row["job_id"],
                at=row["at"],
                kind=row["kind"],
                data=jsontext.loads(row["data"]),
            ),
        )


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

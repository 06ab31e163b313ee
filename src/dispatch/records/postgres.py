"""The records store on PostgreSQL: one database shared by a team's CLIs and supervisors.

Same contract and semantics as :class:`~dispatch.records.sqlite.SqliteRecords` (the
conformance tests run against both): each public method is one transaction; the conditional
writes that decide races between supervisors (``create_attempt``, ``acquire_lease``,
``record_outcome``) are single statements or hold the job's row lock, so any number of
supervisors on any number of hosts can share one database.

The driver is psycopg 3 with its connection pool. The records interface is synchronous (every
call is one short transaction, which keeps the supervisor and the simulator simple), and
psycopg serves that directly, with the same SQL available to an asyncio caller through its
async connections; asyncpg is asyncio-only and would need a loop bridge under every call.
A pooled connection is checked before it is handed out, so a database that restarted between
two calls costs a reconnect, not an error; a call the restart cut off raises
``RecordsUnavailable`` (transient: the supervisor reads again on its next pass).

History entries are numbered in commit order (``logged_after`` relies on it): appending one
takes a transaction-scoped advisory lock, so no entry becomes visible after a later-numbered
one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from dispatch.clock import Clock, IdGenerator, RandomIds, SystemClock
from dispatch.model import (
    TERMINAL_STATES,
    AttemptHandle,
    Cause,
    Evidence,
    Job,
    JobSpec,
    NotFound,
    Outcome,
    RecordsUnavailable,
    State,
    StateError,
)
from dispatch.records import rows
from dispatch.records.base import (
    AttemptRecord,
    Intent,
    IntentOperation,
    IntentStatus,
    JobRecord,
    Lease,
    LogEntry,
    LogKind,
    OpenJob,
    check_fence,
    submission_hold_summary,
)
from dispatch.records.migrations import POSTGRES_MIGRATIONS
from dispatch.records.rows import RowReader, dump
from dispatch.records.sqlite import SchemaTooNew

#: advisory lock keys (any two constants distinct from other applications' in the database)
MIGRATION_LOCK = 0x64697370_0001  # "disp" + 1
LOG_LOCK = 0x64697370_0002
_TERMINAL = [s.value for s in TERMINAL_STATES]
Connection = psycopg.Connection[DictRow]


def shown_url(url: str) -> str:
    """``url`` with its password replaced by ``***``: what errors and status output show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def is_postgres_url(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


class PostgresRecords:
    """``Records`` on a PostgreSQL database named by a ``postgresql://`` URL."""

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
        pool_size: int = 4,
        connect_timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.path = shown_url(url)  # where the records are, as messages name them
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self._rows = RowReader()
        #: job ids whose rows could not be read (``list_jobs`` skips them), with why
        self.unreadable: dict[str, str] = {}
        #: per thread, the connection of the ``together`` block under way there, if any
        self._together = threading.local()
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"row_factory": dict_row, "connect_timeout": max(1, int(connect_timeout))},
            check=ConnectionPool.check_connection,
            timeout=connect_timeout,
            open=False,
            name="dispatch-records",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except (PoolTimeout, psycopg.Error) as exc:
            self._pool.close()
            raise unreachable(self.path, exc) from None
        self._migrate()

    # --- plumbing -------------------------------------------------------------------------

    @contextmanager
    def together(self, fence: Lease | None = None) -> Iterator[None]:
        """See ``Records.together``: the block's calls share one pooled connection and its
        transaction (per thread)."""
        if getattr(self._together, "conn", None) is not None:
            yield
            return
        with self._tx(fence) as conn:
            self._together.conn = conn
            try:
                yield
            finally:
                self._together.conn = None

    @contextmanager
    def _tx(self, fence: Lease | None = None) -> Iterator[Connection]:
        """One transaction on a pooled connection: committed at the end of the block, rolled
        back if it raised. With ``fence``, refused (``LeaseLost``) unless that lease still
        holds its job: the lease row is read ``FOR SHARE``, so a takeover (an update of the
        row) waits until this transaction ends. Inside ``together``: part of its transaction
        (the fence checked all the same)."""
        joined: Connection | None = getattr(self._together, "conn", None)
        if joined is not None:
            _check(joined, fence)
            yield joined
            return
        try:
            with self._pool.connection() as conn, conn.transaction():
                _check(conn, fence)
                yield conn
        except (PoolTimeout, psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise RecordsUnavailable(
                f"{self.path} (dispatch's records) did not answer: {first_line(exc)}"
            ) from None

    def _migrate(self) -> None:
        try:
            self._apply_migrations()
        except RecordsUnavailable as exc:
            raise unreachable(self.path, exc) from None

    def _apply_migrations(self) -> None:
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            db.execute("CREATE TABLE IF NOT EXISTS dispatch_schema (version INTEGER NOT NULL)")
            row = db.execute("SELECT version FROM dispatch_schema").fetchone()
            if row is None:
                db.execute("INSERT INTO dispatch_schema (version) VALUES (0)")
            version = int(row["version"]) if row else 0
            if version > len(POSTGRES_MIGRATIONS):
                raise SchemaTooNew(
                    f"{self.path} has schema version {version}; this dispatch knows up to "
                    f"{len(POSTGRES_MIGRATIONS)}. Upgrade dispatch, or point DISPATCH_RECORDS "
                    "at another database."
                )
            for step in range(version, len(POSTGRES_MIGRATIONS)):
                db.execute(POSTGRES_MIGRATIONS[step].encode())
                db.execute("UPDATE dispatch_schema SET version = %s", (step + 1,))

    @property
    def schema_version(self) -> int:
        with self._tx() as db:
            row = db.execute("SELECT version FROM dispatch_schema").fetchone()
        return int(row["version"]) if row else 0

    def close(self) -> None:
        self._pool.close()

    # --- jobs -----------------------------------------------------------------------------

    def create_job(
        self,
        spec: JobSpec,
        *,
        held_by: str | None = None,
        environment: Mapping[str, str] | None = None,
        submitted_by: str | None = None,
    ) -> Job:
        now = self.clock.now()
        captured = dict(environment) if environment is not None else None
        job = Job(id=self.ids(spec.name), spec=spec, created_at=now, environment=captured)
        state, summary = State.PENDING, ""
        if held_by is not None:
            state, summary = State.HELD, submission_hold_summary(job.id, held_by)
        with self._tx() as db:
            db.execute(
                "INSERT INTO jobs (id, name, cluster, spec, created_at, state, summary,"
                " updated_at, environment, submitted_by)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    job.id,
                    spec.name,
                    spec.cluster,
                    spec.model_dump_json(by_alias=True),
                    now,
                    state.value,
                    summary,
                    now,
                    json.dumps(captured) if captured is not None else None,
                    submitted_by,
                ),
            )
            if held_by is not None:
                self._append_log(
                    db, job.id, LogKind.HOLD_REQUESTED, {"attempt": 0, "actor": held_by}
                )
        return job

    def _job_record(self, row: DictRow) -> JobRecord:
        return self._rows.job(row, tuple(row.values()))

    def get_job(self, job_id: str) -> JobRecord:
        with self._tx() as db:
            row = db.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"no job {job_id!r} in the records at {self.path}")
        try:
            return self._job_record(row)
        except (ValueError, TypeError, KeyError) as exc:
            raise StateError(
                f"the record of job {job_id} in {self.path} cannot be read "
                f"({str(exc).splitlines()[0][:200]}); it was written by another version or damaged"
            ) from None

    def list_jobs(
        self, *, cluster: str | None = None, open_only: bool = False, limit: int | None = None
    ) -> list[JobRecord]:
        query = "SELECT * FROM jobs WHERE true"
        params: list[Any] = []
        if cluster is not None:
            query += " AND cluster = %s"
            params.append(cluster)
        if open_only:
            query += " AND NOT (state = ANY(%s))"
            params.append(_TERMINAL)
        query += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            query += " LIMIT %s"
            params.append(limit)
        with self._tx() as db:
            found_rows = db.execute(query.encode(), params).fetchall()
        found = []
        for row in found_rows:
            try:
                found.append(self._job_record(row))
            except (ValueError, TypeError, KeyError) as exc:  # pydantic's errors are ValueErrors
                self.unreadable[str(row["id"])] = str(exc).splitlines()[0][:200]
        return found

    def open_jobs(self) -> list[OpenJob]:
        query = (
            "SELECT id, cluster, created_at FROM jobs WHERE NOT (state = ANY(%s)) "
            "ORDER BY created_at, id DESC"
        )
        with self._tx() as db:
            rows = db.execute(query.encode(), [_TERMINAL]).fetchall()
        return [OpenJob(r["id"], r["cluster"], r["created_at"]) for r in rows]

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
        query = (
            "UPDATE jobs SET state = %s, cause = %s, summary = %s, updated_at = %s WHERE id = %s"
        )
        params: list[Any] = [
            state.value,
            cause.value if cause else None,
            summary,
            self.clock.now(),
            job_id,
        ]
        if if_open:
            query += " AND NOT (state = ANY(%s))"
            params.append(_TERMINAL)
        with self._tx(fence) as db:
            updated = db.execute(query.encode(), params).rowcount
            if (
                not updated
                and not db.execute("SELECT 1 FROM jobs WHERE id = %s", (job_id,)).fetchone()
            ):
                raise NotFound(f"no job {job_id!r}")
        if state.is_terminal:
            self._rows.forget(job_id)
        return bool(updated)

    def request_cancel(self, job_id: str, actor: str, reason: str) -> bool:
        now = self.clock.now()
        with self._tx() as db:
            if db.execute("SELECT 1 FROM jobs WHERE id = %s", (job_id,)).fetchone() is None:
                raise NotFound(f"no job {job_id!r}")
            changed = db.execute(
                "UPDATE jobs SET cancel_actor = %s, cancel_reason = %s, cancel_at = %s"
                " WHERE id = %s AND cancel_at IS NULL",
                (actor, reason, now, job_id),
            ).rowcount
            if changed:
                self._append_log(
                    db, job_id, LogKind.CANCEL_REQUESTED, {"actor": actor, "reason": reason}
                )
        return bool(changed)

    def request_release(self, job_id: str) -> int:
        with self._tx() as db:
            row = db.execute(
                "UPDATE jobs SET release_count = release_count + 1 WHERE id = %s"
                " RETURNING release_count",
                (job_id,),
            ).fetchone()
            if row is None:
                raise NotFound(f"no job {job_id!r}")
            count = int(row["release_count"])
            self._append_log(db, job_id, LogKind.RELEASE_REQUESTED, {"releases": count})
        return count

    # --- attempts -------------------------------------------------------------------------

    def create_attempt(self, job_id: str, attempt: int, *, fence: Lease | None = None) -> bool:
        if attempt < 1:
            raise ValueError("attempts are numbered from 1")
        with self._tx(fence) as db:
            # the job's row lock orders every claim of this job's attempts
            db.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (job_id,))
            last = db.execute(
                "SELECT COALESCE(MAX(attempt), 0) AS last FROM attempts WHERE job_id = %s",
                (job_id,),
            ).fetchone()
            last_attempt = int(last["last"]) if last else 0
            if attempt <= last_attempt:
                return False
            if attempt != last_attempt + 1:
                raise ValueError(
                    f"attempt {attempt} of {job_id} claimed before attempt {last_attempt + 1}"
                )
            db.execute(
                "INSERT INTO attempts (job_id, attempt, created_at) VALUES (%s, %s, %s)",
                (job_id, attempt, self.clock.now()),
            )
        return True

    def set_handle(
        self, job_id: str, attempt: int, handle: AttemptHandle, *, fence: Lease | None = None
    ) -> None:
        with self._tx(fence) as db:
            changed = db.execute(
                "UPDATE attempts SET handle = %s WHERE job_id = %s AND attempt = %s",
                (dump(handle.to_json()), job_id, attempt),
            ).rowcount
        if not changed:
            raise NotFound(f"no attempt {attempt} of job {job_id!r}")

    def record_outcome(
        self, job_id: str, attempt: int, outcome: Outcome, *, fence: Lease | None = None
    ) -> None:
        now = self.clock.now()
        with self._tx(fence) as db:
            row = db.execute(
                "SELECT state FROM attempts WHERE job_id = %s AND attempt = %s FOR UPDATE",
                (job_id, attempt),
            ).fetchone()
            if row is None:
                raise NotFound(f"no attempt {attempt} of job {job_id!r}")
            if State(row["state"]).is_terminal:
                return
            db.execute(
                "UPDATE attempts SET outcome = %s, state = %s, ended_at = %s"
                " WHERE job_id = %s AND attempt = %s",
                (
                    dump(outcome.to_json()),
                    outcome.state.value,
                    now if outcome.is_terminal else None,
                    job_id,
                    attempt,
                ),
            )

    def attempts(self, job_id: str) -> list[AttemptRecord]:
        with self._tx() as db:
            found = db.execute(
                "SELECT * FROM attempts WHERE job_id = %s ORDER BY attempt", (job_id,)
            ).fetchall()
        return self._rows.attempts(found)

    def live_attempts(self) -> list[AttemptRecord]:
        with self._tx() as db:
            found = db.execute(
                "SELECT a.* FROM attempts a JOIN jobs j ON j.id = a.job_id"
                " WHERE NOT (j.state = ANY(%s)) AND a.handle IS NOT NULL"
                " AND NOT (a.state = ANY(%s))"
                " AND a.attempt = (SELECT MAX(attempt) FROM attempts WHERE job_id = a.job_id)"
                " ORDER BY j.created_at DESC, j.id DESC",
                (_TERMINAL, _TERMINAL),
            ).fetchall()
        return self._rows.attempts(found)

    # --- evidence -------------------------------------------------------------------------

    def add_evidence(
        self,
        job_id: str,
        attempt: int,
        evidence: Iterable[Evidence],
        *,
        fence: Lease | None = None,
    ) -> int:
        facts = [
            (job_id, attempt, e.key, e.kind, e.observed_at, e.summary, dump(dict(e.data)))
            for e in evidence
        ]
        if not facts:
            return 0
        added = 0
        with self._tx(fence) as db:
            for fact in facts:  # in order, so that seq is the order first recorded
                added += db.execute(
                    "INSERT INTO evidence (job_id, attempt, key, kind, observed_at, summary, data)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    fact,
                ).rowcount
        return added

    def evidence(self, job_id: str, attempt: int | None = None) -> list[Evidence]:
        query = "SELECT * FROM evidence WHERE job_id = %s"
        params: list[Any] = [job_id]
        if attempt is not None:
            query += " AND attempt = %s"
            params.append(attempt)
        with self._tx() as db:
            found = db.execute((query + " ORDER BY seq").encode(), params).fetchall()
        return [rows.evidence(r) for r in found]

    # --- history --------------------------------------------------------------------------

    def _append_log(self, db: Connection, job_id: str, kind: str, data: Mapping[str, Any]) -> int:
        db.execute("SELECT pg_advisory_xact_lock(%s)", (LOG_LOCK,))
        row = db.execute(
            "INSERT INTO log (job_id, at, kind, data) VALUES (%s, %s, %s, %s) RETURNING seq",
            (job_id, self.clock.now(), kind, dump(dict(data))),
        ).fetchone()
        return int(row["seq"]) if row else 0

    def append_log(
        self, job_id: str, kind: str, data: Mapping[str, Any], *, fence: Lease | None = None
    ) -> int:
        with self._tx(fence) as db:
            return self._append_log(db, job_id, kind, data)

    def logged_after(self, seq: int) -> tuple[set[str], int]:
        with self._tx() as db:
            found = db.execute("SELECT job_id, seq FROM log WHERE seq > %s", (seq,)).fetchall()
        return {r["job_id"] for r in found}, max((int(r["seq"]) for r in found), default=seq)

    def log(self, job_id: str) -> list[LogEntry]:
        with self._tx() as db:
            found = db.execute(
                "SELECT * FROM log WHERE job_id = %s ORDER BY seq", (job_id,)
            ).fetchall()
        return [self._rows.log_entry(r) for r in found]

    # --- intents --------------------------------------------------------------------------

    def open_intent(
        self,
        job_id: str,
        operation: IntentOperation,
        owner: str,
        *,
        attempt: int | None = None,
        data: Mapping[str, Any] | None = None,
        fence: Lease | None = None,
    ) -> Intent:
        now = self.clock.now()
        payload = dict(data or {})
        with self._tx(fence) as db:
            row = db.execute(
                "INSERT INTO intents (job_id, attempt, operation, owner, created_at, status, data)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (
                    job_id,
                    attempt,
                    str(operation),
                    owner,
                    now,
                    IntentStatus.OPEN.value,
                    dump(payload),
                ),
            ).fetchone()
        return Intent(
            id=int(row["id"]) if row else 0,
            job_id=job_id,
            attempt=attempt,
            operation=operation,
            owner=owner,
            created_at=now,
            status=IntentStatus.OPEN,
            data=payload,
        )

    def close_intent(
        self,
        intent_id: int,
        *,
        status: IntentStatus = IntentStatus.DONE,
        result: Mapping[str, Any] | None = None,
        fence: Lease | None = None,
    ) -> None:
        if status is IntentStatus.OPEN:
            raise ValueError("closing an intent needs a final status")
        with self._tx(fence) as db:
            db.execute(
                "UPDATE intents SET status = %s, result = %s, closed_at = %s"
                " WHERE id = %s AND status = %s",
                (
                    status.value,
                    dump(dict(result or {})),
                    self.clock.now(),
                    intent_id,
                    IntentStatus.OPEN.value,
                ),
            )

    def open_intents(self, job_id: str | None = None) -> list[Intent]:
        query = "SELECT * FROM intents WHERE status = %s"
        params: list[Any] = [IntentStatus.OPEN.value]
        if job_id is not None:
            query += " AND job_id = %s"
            params.append(job_id)
        with self._tx() as db:
            found = db.execute((query + " ORDER BY id").encode(), params).fetchall()
        return [rows.intent(r) for r in found]

    # --- leases ---------------------------------------------------------------------------

    def acquire_lease(self, job_id: str, owner: str, ttl: float) -> Lease | None:
        """One statement: insert, renew one's own live lease (same epoch), or take over an
        expired one (next epoch); a live lease of another owner is left alone (no row)."""
        now = self.clock.now()
        with self._tx() as db:
            row = db.execute(
                "INSERT INTO leases AS l (job_id, owner, expires_at, epoch)"
                " VALUES (%(job)s, %(owner)s, %(until)s, 1)"
                " ON CONFLICT (job_id) DO UPDATE SET owner = excluded.owner,"
                " expires_at = excluded.expires_at,"
                " epoch = CASE WHEN l.owner = excluded.owner AND l.expires_at > %(now)s"
                " THEN l.epoch ELSE l.epoch + 1 END"
                " WHERE l.owner = excluded.owner OR l.expires_at <= %(now)s"
                " RETURNING epoch",
                {"job": job_id, "owner": owner, "until": now + ttl, "now": now},
            ).fetchone()
        if row is None:
            return None
        return Lease(job_id=job_id, owner=owner, expires_at=now + ttl, epoch=int(row["epoch"]))

    def release_lease(self, job_id: str, owner: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM leases WHERE job_id = %s AND owner = %s", (job_id, owner))

    def lease(self, job_id: str) -> Lease | None:
        with self._tx() as db:
            row = db.execute(
                "SELECT * FROM leases WHERE job_id = %s AND expires_at > %s",
                (job_id, self.clock.now()),
            ).fetchone()
        if row is None:
            return None
        return Lease(
            job_id=row["job_id"],
            owner=row["owner"],
            expires_at=row["expires_at"],
            epoch=int(row["epoch"]),
        )


def _check(conn: Connection, fence: Lease | None) -> None:
    if fence is not None:
        row = conn.execute(
            "SELECT owner, epoch FROM leases WHERE job_id = %s FOR SHARE", (fence.job_id,)
        ).fetchone()
        check_fence(fence, (row["owner"], int(row["epoch"])) if row else None)


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def unreachable(where: str, exc: BaseException) -> StateError:
    """The one-line error for a database that cannot be used when opened: where, why, and
    the fix."""
    first = first_line(exc)
    if isinstance(exc, RecordsUnavailable):
        first = first.split("did not answer: ", 1)[-1]
    return StateError(
        f"{where} (dispatch's records) cannot be used: {first}. Check that the server is "
        "running and reachable and that the URL's user, password and database are right "
        "(set by `records:` in the config or DISPATCH_RECORDS)"
    )

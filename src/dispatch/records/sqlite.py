"""The records store on SQLite (WAL mode): the embedded default, one file per user.

Each public method is one transaction. Writes use ``BEGIN IMMEDIATE`` so that concurrent
writers from several processes queue on SQLite's lock (``busy_timeout``) instead of failing.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
from dispatch.records.migrations import MIGRATIONS, SCHEMA_VERSION
from dispatch.records.rows import RowReader, dump

BUSY_TIMEOUT_MS = 30_000
_TERMINAL = tuple(s.value for s in TERMINAL_STATES)


class SchemaTooNew(RuntimeError):
    """The database was written by a newer dispatch."""


class SqliteRecords:
    """``Records`` on one SQLite file (or ``":memory:"`` for the simulator and tests)."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
    ) -> None:
        self.path = str(path)
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self._rows = RowReader()
        #: job ids whose rows could not be read (``list_jobs`` skips them), with why
        self.unreadable: dict[str, str] = {}
        self._together = False  # inside ``together``: writes join its transaction
        try:
            if self.path != ":memory:":
                _private_file(Path(self.path))
            self._db = sqlite3.connect(
                self.path,
                isolation_level=None,
                timeout=BUSY_TIMEOUT_MS / 1000,
                check_same_thread=False,
            )
            self._db.row_factory = sqlite3.Row
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if self.path != ":memory:":
                _write_ahead_log(self._db)
                self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except (sqlite3.DatabaseError, OSError) as exc:
            raise unusable(self.path, exc) from None

    # --- plumbing -------------------------------------------------------------------------

    @contextmanager
    def together(self, fence: Lease | None = None) -> Iterator[None]:
        """See ``Records.together``."""
        if self._together:
            yield
            return
        with self._write(fence):
            self._together = True
            try:
                yield
            finally:
                self._together = False

    @contextmanager
    def _write(self, fence: Lease | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction; with ``fence``, refused (``LeaseLost``) unless that lease
        still holds its job (checked after ``BEGIN IMMEDIATE``: no other write can come
        between the check and this one's commit). Inside ``together``: part of its
        transaction (the fence checked all the same)."""
        if self._together:
            self._check(fence)
            yield self._db
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise unusable(self.path, exc) from None
        try:
            self._check(fence)
            yield self._db
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):  # a full disk may have ended it already
                self._db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and _fault(exc) is not None:
                raise unusable(self.path, exc) from None
            raise
        else:
            try:
                self._db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                raise unusable(self.path, exc) from None

    def _check(self, fence: Lease | None) -> None:
        if fence is not None:
            row = self._db.execute(
                "SELECT owner, epoch FROM leases WHERE job_id = ?", (fence.job_id,)
            ).fetchone()
            check_fence(fence, (row["owner"], row["epoch"]) if row else None)

    def _migrate(self) -> None:
        with self._write() as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"{self.path} has schema version {version}; this dispatch knows up to "
                    f"{SCHEMA_VERSION}. Upgrade dispatch, or point DISPATCH_STATE_DIR elsewhere."
                )
            for step in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[step].split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {step + 1}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        self._db.close()

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
        with self._write() as db:
            db.execute(
                "INSERT INTO jobs (id, name, cluster, spec, created_at, state, summary, updated_at,"
                " environment, submitted_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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

    def _job_record(self, row: sqlite3.Row) -> JobRecord:
        return self._rows.job(row, tuple(row))

    def get_job(self, job_id: str) -> JobRecord:
        row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
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
        query = "SELECT * FROM jobs WHERE 1 = 1"
        params: list[Any] = []
        if cluster is not None:
            query += " AND cluster = ?"
            params.append(cluster)
        if open_only:
            query += f" AND state NOT IN ({', '.join('?' for _ in _TERMINAL)})"
            params.extend(_TERMINAL)
        query += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        found = []
        for row in self._db.execute(query, params):
            try:
                found.append(self._job_record(row))
            except (ValueError, TypeError, KeyError) as exc:  # pydantic's errors are ValueErrors
                self.unreadable[str(row["id"])] = str(exc).splitlines()[0][:200]
        return found

    def open_jobs(self) -> list[OpenJob]:
        query = (
            "SELECT id, cluster, created_at FROM jobs "
            f"WHERE state NOT IN ({', '.join('?' for _ in _TERMINAL)}) ORDER BY created_at, id DESC"
        )
        return [OpenJob(r[0], r[1], r[2]) for r in self._db.execute(query, list(_TERMINAL))]

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
        query = "UPDATE jobs SET state = ?, cause = ?, summary = ?, updated_at = ? WHERE id = ?"
        params: list[Any] = [
            state.value,
            cause.value if cause else None,
            summary,
            self.clock.now(),
            job_id,
        ]
        if if_open:
            query += f" AND state NOT IN ({', '.join('?' for _ in _TERMINAL)})"
            params.extend(_TERMINAL)
        with self._write(fence) as db:
            updated = db.execute(query, params).rowcount
            if (
                not updated
                and not db.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone()
            ):
                raise NotFound(f"no job {job_id!r}")
        if state.is_terminal:
            self._rows.forget(job_id)
        return bool(updated)

    def request_cancel(self, job_id: str, actor: str, reason: str) -> bool:
        now = self.clock.now()
        with self._write() as db:
            if db.execute("SELECT 1 FROM jobs WHERE id = ?", (job_id,)).fetchone() is None:
                raise NotFound(f"no job {job_id!r}")
            changed = db.execute(
                "UPDATE jobs SET cancel_actor = ?, cancel_reason = ?, cancel_at = ?"
                " WHERE id = ? AND cancel_at IS NULL",
                (actor, reason, now, job_id),
            ).rowcount
            if changed:
                self._append_log(
                    db, job_id, LogKind.CANCEL_REQUESTED, {"actor": actor, "reason": reason}
                )
        return bool(changed)

    def request_release(self, job_id: str) -> int:
        with self._write() as db:
            changed = db.execute(
                "UPDATE jobs SET release_count = release_count + 1 WHERE id = ?", (job_id,)
            ).rowcount
            if not changed:
                raise NotFound(f"no job {job_id!r}")
            count = int(
                db.execute("SELECT release_count FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
            )
            self._append_log(db, job_id, LogKind.RELEASE_REQUESTED, {"releases": count})
        return count

    # --- attempts -------------------------------------------------------------------------

    def create_attempt(self, job_id: str, attempt: int, *, fence: Lease | None = None) -> bool:
        if attempt < 1:
            raise ValueError("attempts are numbered from 1")
        with self._write(fence) as db:
            last = db.execute(
                "SELECT MAX(attempt) FROM attempts WHERE job_id = ?", (job_id,)
            ).fetchone()[0]
            last = int(last or 0)
            if attempt <= last:
                return False
            if attempt != last + 1:
                raise ValueError(f"attempt {attempt} of {job_id} claimed before attempt {last + 1}")
            db.execute(
                "INSERT INTO attempts (job_id, attempt, created_at) VALUES (?, ?, ?)",
                (job_id, attempt, self.clock.now()),
            )
        return True

    def set_handle(
        self, job_id: str, attempt: int, handle: AttemptHandle, *, fence: Lease | None = None
    ) -> None:
        with self._write(fence) as db:
            changed = db.execute(
                "UPDATE attempts SET handle = ? WHERE job_id = ? AND attempt = ?",
                (dump(handle.to_json()), job_id, attempt),
            ).rowcount
        if not changed:
            raise NotFound(f"no attempt {attempt} of job {job_id!r}")

    def record_outcome(
        self, job_id: str, attempt: int, outcome: Outcome, *, fence: Lease | None = None
    ) -> None:
        now = self.clock.now()
        with self._write(fence) as db:
            row = db.execute(
                "SELECT state FROM attempts WHERE job_id = ? AND attempt = ?", (job_id, attempt)
            ).fetchone()
            if row is None:
                raise NotFound(f"no attempt {attempt} of job {job_id!r}")
            if State(row["state"]).is_terminal:
                return
            db.execute(
                "UPDATE attempts SET outcome = ?, state = ?, ended_at = ?"
                " WHERE job_id = ? AND attempt = ?",
                (
                    dump(outcome.to_json()),
                    outcome.state.value,
                    now if outcome.is_terminal else None,
                    job_id,
                    attempt,
                ),
            )

    def attempts(self, job_id: str) -> list[AttemptRecord]:
        rows = self._db.execute(
            "SELECT * FROM attempts WHERE job_id = ? ORDER BY attempt", (job_id,)
        )
        return self._rows.attempts(rows)

    def live_attempts(self) -> list[AttemptRecord]:
        ended = ", ".join("?" for _ in _TERMINAL)
        rows = self._db.execute(
            "SELECT a.* FROM attempts a JOIN jobs j ON j.id = a.job_id"
            f" WHERE j.state NOT IN ({ended}) AND a.handle IS NOT NULL"
            f" AND a.state NOT IN ({ended})"
            " AND a.attempt = (SELECT MAX(attempt) FROM attempts WHERE job_id = a.job_id)"
            " ORDER BY j.created_at DESC, j.id DESC",
            (*_TERMINAL, *_TERMINAL),
        )
        return self._rows.attempts(rows)

    # --- evidence -------------------------------------------------------------------------

    def add_evidence(
        self,
        job_id: str,
        attempt: int,
        evidence: Iterable[Evidence],
        *,
        fence: Lease | None = None,
    ) -> int:
        rows = [
            (job_id, attempt, e.key, e.kind, e.observed_at, e.summary, dump(dict(e.data)))
            for e in evidence
        ]
        if not rows:
            return 0
        with self._write(fence) as db:
            before = db.total_changes
            db.executemany(
                "INSERT OR IGNORE INTO evidence"
                " (job_id, attempt, key, kind, observed_at, summary, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            return db.total_changes - before

    def evidence(self, job_id: str, attempt: int | None = None) -> list[Evidence]:
        query = "SELECT * FROM evidence WHERE job_id = ?"
        params: list[Any] = [job_id]
        if attempt is not None:
            query += " AND attempt = ?"
            params.append(attempt)
        return [rows.evidence(r) for r in self._db.execute(query + " ORDER BY seq", params)]

    # --- history --------------------------------------------------------------------------

    def _append_log(
        self, db: sqlite3.Connection, job_id: str, kind: str, data: Mapping[str, Any]
    ) -> int:
        cursor = db.execute(
            "INSERT INTO log (job_id, at, kind, data) VALUES (?, ?, ?, ?)",
            (job_id, self.clock.now(), kind, dump(dict(data))),
        )
        return int(cursor.lastrowid or 0)

    def append_log(
        self, job_id: str, kind: str, data: Mapping[str, Any], *, fence: Lease | None = None
    ) -> int:
        with self._write(fence) as db:
            return self._append_log(db, job_id, kind, data)

    def logged_after(self, seq: int) -> tuple[set[str], int]:
        rows = self._db.execute("SELECT job_id, seq FROM log WHERE seq > ?", (seq,)).fetchall()
        return {r["job_id"] for r in rows}, max((r["seq"] for r in rows), default=seq)

    def log(self, job_id: str) -> list[LogEntry]:
        rows = self._db.execute("SELECT * FROM log WHERE job_id = ? ORDER BY seq", (job_id,))
        return [self._rows.log_entry(r) for r in rows]

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
        with self._write(fence) as db:
            cursor = db.execute(
                "INSERT INTO intents (job_id, attempt, operation, owner, created_at, status, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (job_id, attempt, operation, owner, now, IntentStatus.OPEN.value, dump(payload)),
            )
        return Intent(
            id=int(cursor.lastrowid or 0),
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
        with self._write(fence) as db:
            db.execute(
                "UPDATE intents SET status = ?, result = ?, closed_at = ?"
                " WHERE id = ? AND status = ?",
                (
                    status.value,
                    dump(dict(result or {})),
                    self.clock.now(),
                    intent_id,
                    IntentStatus.OPEN.value,
                ),
            )

    def open_intents(self, job_id: str | None = None) -> list[Intent]:
        query = "SELECT * FROM intents WHERE status = ?"
        params: list[Any] = [IntentStatus.OPEN.value]
        if job_id is not None:
            query += " AND job_id = ?"
            params.append(job_id)
        return [rows.intent(r) for r in self._db.execute(query + " ORDER BY id", params)]

    # --- leases ---------------------------------------------------------------------------

    def acquire_lease(self, job_id: str, owner: str, ttl: float) -> Lease | None:
        now = self.clock.now()
        # the common case, renewing one's own live lease, is one atomic statement
        renewed = self._db.execute(
            "UPDATE leases SET expires_at = ? WHERE job_id = ? AND owner = ? AND expires_at > ?"
            " RETURNING epoch",
            (now + ttl, job_id, owner, now),
        ).fetchall()
        if renewed:
            return Lease(job_id=job_id, owner=owner, expires_at=now + ttl, epoch=renewed[0][0])
        with self._write() as db:
            row = db.execute("SELECT * FROM leases WHERE job_id = ?", (job_id,)).fetchone()
            if row is None:
                epoch = 1
                db.execute(
                    "INSERT INTO leases (job_id, owner, expires_at, epoch) VALUES (?, ?, ?, ?)",
                    (job_id, owner, now + ttl, epoch),
                )
            elif row["owner"] == owner and row["expires_at"] > now:
                epoch = row["epoch"]
                db.execute("UPDATE leases SET expires_at = ? WHERE job_id = ?", (now + ttl, job_id))
            elif row["expires_at"] <= now:
                epoch = row["epoch"] + 1
                db.execute(
                    "UPDATE leases SET owner = ?, expires_at = ?, epoch = ? WHERE job_id = ?",
                    (owner, now + ttl, epoch, job_id),
                )
            else:
                return None
        return Lease(job_id=job_id, owner=owner, expires_at=now + ttl, epoch=epoch)

    def release_lease(self, job_id: str, owner: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM leases WHERE job_id = ? AND owner = ?", (job_id, owner))

    def lease(self, job_id: str) -> Lease | None:
        row = self._db.execute(
            "SELECT * FROM leases WHERE job_id = ? AND expires_at > ?", (job_id, self.clock.now())
        ).fetchone()
        if row is None:
            return None
        return Lease(
            job_id=row["job_id"],
            owner=row["owner"],
            expires_at=row["expires_at"],
            epoch=row["epoch"],
        )


_FAULTS = (
    ("file is not a database", "is not a dispatch records database (damaged, or another "
     "file): move it aside and dispatch starts a new one, or restore it from a backup"),
    ("database disk image is malformed", "is damaged: move it aside and dispatch starts a new "
     "one, or restore it from a backup"),
    ("database or disk is full", "cannot be written: its disk is full; free some space"),
    ("unable to open database file", "cannot be opened: check that its folder exists and is "
     "writable (set DISPATCH_STATE_DIR to use another)"),
    ("attempt to write a readonly database", "is read-only: make it and its folder writable "
     "(or set DISPATCH_STATE_DIR to use another)"),
    ("disk I/O error", "cannot be read or written (a disk I/O error): check the disk"),
)  # fmt: skip


def _fault(exc: BaseException) -> str | None:
    text = str(exc)
    return next((why for marker, why in _FAULTS if marker in text), None)


def unusable(path: str, exc: BaseException) -> StateError:
    """The one-line error for records that cannot be used: the path, what is wrong, the fix."""
    why = _fault(exc)
    if why is None and isinstance(exc, OSError):
        why = f"cannot be created or opened ({exc.strerror or exc}): check its folder"
    return StateError(f"{path} (dispatch's records) {why or f'cannot be used ({exc})'}")


def _write_ahead_log(db: sqlite3.Connection) -> None:
    """Switch the database to write-ahead logging. The switch (made once, by the first
    connection to a new database) needs the exclusive lock, and when processes open the
    same new database at once SQLite answers "database is locked" without waiting in the
    busy handler (two holders of the shared lock would otherwise wait for each other): the
    switch is retried, after a short random pause, within the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(random.uniform(pause / 2, pause))
        pause = min(pause * 2, 0.2)


def _private_file(path: Path) -> None:
    """The records hold job specs (their env values) and ranks' last output: the folder is
    made 0700 when dispatch creates it, the database 0600 (SQLite gives its -wal and -shm
    files the database's mode), and an existing database readable by others is tightened.
    An existing folder another user owns, or others may write to, is refused: whoever can
    write there can replace the records or plant links in them."""
    folder = path.parent
    if not folder.exists():
        folder.mkdir(parents=True, mode=0o700, exist_ok=True)
    found = folder.stat()
    if found.st_uid != os.geteuid():
        raise StateError(
            f"the state directory {folder} belongs to another user (uid {found.st_uid}); "
            "use your own (set DISPATCH_STATE_DIR)"
        )
    if found.st_mode & 0o022:
        raise StateError(
            f"the state directory {folder} can be written by others (mode "
            f"{found.st_mode & 0o777:o}): run `chmod 700 {folder}` or use another"
        )
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600))
    elif path.stat().st_mode & 0o077:
        path.chmod(0o600)

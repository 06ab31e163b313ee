"""The durable records store: jobs, attempts, append-only evidence, history, intents, leases."""

from pathlib import Path

from dispatch.clock import Clock, IdGenerator
from dispatch.model import ConfigError
from dispatch.records.base import (
    AttemptRecord,
    CancelRequest,
    Intent,
    IntentOperation,
    IntentStatus,
    JobRecord,
    Lease,
    LogEntry,
    LogKind,
    OpenJob,
    Records,
    submission_hold_summary,
)
from dispatch.records.sqlite import SchemaTooNew, SqliteRecords

DATABASE_NAME = "records.sqlite3"


def open_records(
    location: str | Path, *, clock: Clock | None = None, ids: IdGenerator | None = None
) -> Records:
    """The records at ``location``: a ``postgresql://`` URL (a team's shared database; needs
    the ``postgres`` extra) or a SQLite file path (the default, one user's)."""
    text = str(location)
    if text.startswith(("postgresql://", "postgres://")):
        try:
            from dispatch.records.postgres import PostgresRecords
        except ImportError as exc:
            raise ConfigError(
                f"the records are in PostgreSQL but its driver is not installed ({exc}): "
                "pip install 'dispatch-train[postgres]'"
            ) from None
        return PostgresRecords(text, clock=clock, ids=ids)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise ConfigError(
            f"the records location {scheme}://... is not a store dispatch knows: write a "
            "postgresql:// URL or a SQLite file path (`records:` or DISPATCH_RECORDS)"
        )
    return SqliteRecords(location, clock=clock, ids=ids)


def database_path(state_dir: Path) -> Path:
    """Where the records database lives inside a state directory."""
    return state_dir / DATABASE_NAME


__all__ = [
    "DATABASE_NAME",
    "AttemptRecord",
    "CancelRequest",
    "Intent",
    "IntentOperation",
    "IntentStatus",
    "JobRecord",
    "Lease",
    "LogEntry",
    "LogKind",
    "OpenJob",
    "Records",
    "SchemaTooNew",
    "SqliteRecords",
    "database_path",
    "open_records",
    "submission_hold_summary",
]

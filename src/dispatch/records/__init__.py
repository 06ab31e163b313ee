"""The durable records store: jobs, attempts, append-only evidence, history, intents, leases."""

from pathlib import Path

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
    Records,
    submission_hold_summary,
)
from dispatch.records.sqlite import SchemaTooNew, SqliteRecords

DATABASE_NAME = "records.sqlite3"


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
    "Records",
    "SchemaTooNew",
    "SqliteRecords",
    "database_path",
    "submission_hold_summary",
]

"""SQLite only: its schema version, the in-memory store. The contract every store keeps is
tested in tests/records, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dispatch.clock import CountingIds
from dispatch.model import parse_spec
from dispatch.records import SchemaTooNew, SqliteRecords
from dispatch.records.migrations import SCHEMA_VERSION

SPEC = parse_spec({"name": "train", "command": ["python", "train.py"], "nodes": 2})


def test_schema_is_versioned_and_migrated_once(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    SqliteRecords(path).close()
    again = SqliteRecords(path)
    assert again.schema_version == SCHEMA_VERSION
    again.close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.commit()
    raw.close()
    with pytest.raises(SchemaTooNew, match="Upgrade dispatch"):
        SqliteRecords(path)


def test_in_memory_store_for_the_simulator() -> None:
    store = SqliteRecords(":memory:", ids=CountingIds())
    job = store.create_job(SPEC)
    assert store.get_job(job.id).job.id == job.id

"""SQLite only: its schema version, the in-memory store. The contract every store keeps is
tested in tests/records, on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dispatch.clock import CountingIds
from dispatch.model import Cause, State, parse_spec
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


def test_a_job_read_again_and_again_keeps_one_parsed_row_and_one_spec_text() -> None:
    """The reader keeps a job's last row parsed, not every row it had (a job's row changes
    at each step), and that row holds the spec text parsed once, not each read's copy."""
    store = SqliteRecords(":memory:", ids=CountingIds())
    job = store.create_job(SPEC)
    first = store.get_job(job.id)
    assert store.get_job(job.id) is first  # the same row: parsed once
    for state in (State.QUEUED, State.RUNNING, State.HELD):
        store.set_job_status(job.id, state, Cause.APP_ERROR if state is State.HELD else None)
        record = store.get_job(job.id)
        assert record.state is state  # a changed row is parsed again
        assert record.job.spec is first.job.spec  # its spec is not
    jobs = store._rows._jobs
    assert list(jobs) == [job.id]  # one row per job
    held = next(iter(store._rows._specs))
    assert any(value is held for value in jobs[job.id][0])  # the text parsed, not a copy
    assert store.list_jobs()[0] is store.get_job(job.id)

"""Fixtures: every records test runs against each store, SQLite (a file) and PostgreSQL (a
real server started for the session from Debian's binaries, on loopback)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.clock import CountingIds, ManualClock
from dispatch.records import Records, open_records
from dispatch.testing.postgres import PostgresServer


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a fresh, empty records store lives: a SQLite path or a new PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "r.sqlite3")
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=1000.0)


@pytest.fixture
def store(location: str, clock: ManualClock) -> Iterator[Records]:
    records = open_records(location, clock=clock, ids=CountingIds())
    yield records
    records.close()

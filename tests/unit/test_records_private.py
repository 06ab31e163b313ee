"""The records database is private to its owner: it holds job specs with their env values and
the ranks' last output (kept tails of failed ranks)."""

from __future__ import annotations

import stat
from pathlib import Path

from dispatch.model import parse_spec
from dispatch.records import SqliteRecords


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_database_and_its_wal_files_are_0600_in_a_0700_folder(tmp_path: Path) -> None:
    path = tmp_path / "state" / "records.sqlite3"
    records = SqliteRecords(path)
    records.create_job(
        parse_spec({"name": "secret", "command": ["true"], "env": {"TOKEN": "s3cr3t"}})
    )
    assert _mode(path.parent) == 0o700
    assert _mode(path) == 0o600
    wal = [p for p in path.parent.iterdir() if p.name != path.name]
    assert wal, "WAL mode keeps -wal and -shm files beside the database"
    assert all(_mode(p) == 0o600 for p in wal), {p.name: oct(_mode(p)) for p in wal}
    records.close()


def test_an_existing_database_readable_by_others_is_tightened(tmp_path: Path) -> None:
    path = tmp_path / "records.sqlite3"
    SqliteRecords(path).close()
    path.chmod(0o644)
    SqliteRecords(path).close()
    assert _mode(path) == 0o600

"""A damaged, unusable or full state directory is one line naming the path and the fix, not
a traceback; a record that cannot be read is skipped by ``list`` and reported (issue 26)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dispatch.cli.main import cli
from dispatch.model import StateError, parse_spec
from dispatch.records import SqliteRecords, database_path

SPEC = parse_spec({"name": "faulty", "command": ["true"]})


def _open_at_once(path: str, start: Any, answers: Any) -> None:
    start.wait()
    try:
        records = SqliteRecords(path)
        records.list_jobs()
        records.close()
        answers.put("")
    except StateError as exc:
        answers.put(str(exc))


def test_processes_opening_new_records_at_once_all_open_them(tmp_path: Path) -> None:
    """`dispatch run` creating the records while `dispatch list` opens them: the switch to
    write-ahead logging, which SQLite answers "database is locked" at once when another
    process holds the new database, waits for its turn instead of failing (the CI saw
    `list` fail so). Four processes open each of 30 new databases at the same moment."""
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    for round_ in range(30):
        start = context.Barrier(4)
        path = str(tmp_path / f"{round_}" / "records.sqlite3")
        workers = [
            context.Process(target=_open_at_once, args=(path, start, answers)) for _ in range(4)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert [answers.get(timeout=10) for _ in workers] == ["", "", "", ""]


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "records.sqlite3"
    path.write_text("not a database at all, but long enough to have a header" * 4)
    with pytest.raises(StateError, match=r"is not a dispatch records database .* move it aside"):
        SqliteRecords(path)


def test_a_state_directory_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StateError, match=r"cannot be created or opened \(Not a directory\)"):
        SqliteRecords(tmp_path / "file" / "state" / "records.sqlite3")


def test_a_full_disk_is_named(tmp_path: Path) -> None:
    records = SqliteRecords(tmp_path / "records.sqlite3")
    pages = records._db.execute("PRAGMA page_count").fetchone()[0]
    records._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk is full"

    def fill() -> None:
        for _ in range(200):
            records.create_job(SPEC)

    with pytest.raises(StateError, match="its disk is full; free some space"):
        fill()


def test_an_unreadable_row_is_skipped_by_list_and_named(tmp_path: Path) -> None:
    state = tmp_path / "state"
    records = SqliteRecords(database_path(state))
    good = records.create_job(SPEC).id
    bad = records.create_job(SPEC).id
    records._db.execute("UPDATE jobs SET spec = ? WHERE id = ?", ('{"name": 3}', bad))
    fresh = SqliteRecords(database_path(state))
    assert [r.id for r in fresh.list_jobs()] == [good]
    assert bad in fresh.unreadable
    with pytest.raises(StateError, match=rf"the record of job {bad} .* cannot be read"):
        fresh.get_job(bad)
    result = CliRunner().invoke(cli, ["list"], env={"DISPATCH_STATE_DIR": str(state)})
    assert result.exit_code == 0
    assert good in result.stdout
    assert f"warning: skipped job {bad}: its record cannot be read" in result.stderr


def test_a_state_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    state.chmod(0o777)
    with pytest.raises(StateError, match=r"can be written by others \(mode 777\): run `chmod 700"):
        SqliteRecords(database_path(state))
    state.chmod(0o755)  # readable is not writable: the database itself is 0600
    SqliteRecords(database_path(state))

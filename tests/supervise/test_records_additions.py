"""Store behaviour the supervisor relies on: a terminal job status is final under ``if_open``."""

from __future__ import annotations

import pytest

from dispatch.clock import CountingIds, ManualClock
from dispatch.model import Cause, NotFound, State, parse_spec
from dispatch.records import SqliteRecords


def test_set_job_status_if_open_never_changes_a_terminal_job() -> None:
    store = SqliteRecords(":memory:", clock=ManualClock(), ids=CountingIds())
    job = store.create_job(parse_spec({"name": "t", "command": ["x"]})).id
    assert store.set_job_status(job, State.RUNNING, if_open=True)
    assert store.set_job_status(job, State.SUCCEEDED, if_open=True)
    assert not store.set_job_status(job, State.QUEUED, None, "stale", if_open=True)
    assert store.get_job(job).state is State.SUCCEEDED
    assert store.set_job_status(job, State.FAILED, Cause.UNKNOWN, "forced")  # without if_open
    assert store.get_job(job).state is State.FAILED
    with pytest.raises(NotFound):
        store.set_job_status("nope", State.RUNNING, if_open=True)


def test_create_job_held_records_the_hold_in_the_same_write() -> None:
    clock = ManualClock(start=50.0)
    store = SqliteRecords(":memory:", clock=clock, ids=CountingIds())
    spec = parse_spec({"name": "t", "command": ["x"]})
    job = store.create_job(spec, held_by="alice").id
    record = store.get_job(job)
    assert (record.state, record.cause) == (State.HELD, None)
    assert record.summary == f"held at submission by alice; release with `dispatch release {job}`"
    assert [(e.kind, dict(e.data), e.at) for e in store.log(job)] == [
        ("hold-requested", {"attempt": 0, "actor": "alice"}, 50.0)
    ]
    assert store.attempts(job) == []
    plain = store.create_job(spec).id
    assert (store.get_job(plain).state, store.get_job(plain).summary, store.log(plain)) == (
        State.PENDING,
        "",
        [],
    )

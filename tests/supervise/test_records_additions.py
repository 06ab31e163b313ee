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

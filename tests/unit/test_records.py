from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dispatch.clock import CountingIds, ManualClock
from dispatch.model import (
    AttemptHandle,
    Cause,
    Evidence,
    Failure,
    NotFound,
    Outcome,
    State,
    parse_spec,
)
from dispatch.records import IntentStatus, SchemaTooNew, SqliteRecords
from dispatch.records.migrations import SCHEMA_VERSION

SPEC = parse_spec({"name": "train", "command": ["python", "train.py"], "nodes": 2})


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=1000.0)


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> SqliteRecords:
    return SqliteRecords(tmp_path / "r.sqlite3", clock=clock, ids=CountingIds())


def test_jobs_are_created_with_injected_ids_and_times(store: SqliteRecords) -> None:
    job = store.create_job(SPEC)
    assert job.id == "train-00001"
    record = store.get_job(job.id)
    assert record.job == job
    assert record.state is State.PENDING
    assert record.job.created_at == 1000.0


def test_unknown_job_is_not_found(store: SqliteRecords) -> None:
    with pytest.raises(NotFound, match="nope"):
        store.get_job("nope")


def test_list_jobs_newest_first_and_open_only(store: SqliteRecords, clock: ManualClock) -> None:
    first = store.create_job(SPEC)
    clock.advance(1)
    second = store.create_job(SPEC)
    store.set_job_status(first.id, State.FAILED, Cause.APP_ERROR, "rank 0 exited 3")
    assert [r.id for r in store.list_jobs()] == [second.id, first.id]
    assert [r.id for r in store.list_jobs(open_only=True)] == [second.id]
    failed = store.get_job(first.id)
    assert (failed.state, failed.cause, failed.summary) == (
        State.FAILED,
        Cause.APP_ERROR,
        "rank 0 exited 3",
    )


def test_attempts_are_claimed_once_and_in_order(store: SqliteRecords) -> None:
    job = store.create_job(SPEC)
    assert store.create_attempt(job.id, 1) is True
    assert store.create_attempt(job.id, 1) is False
    with pytest.raises(ValueError, match="before attempt 2"):
        store.create_attempt(job.id, 3)
    assert store.create_attempt(job.id, 2) is True
    assert [a.attempt for a in store.attempts(job.id)] == [1, 2]


def test_terminal_outcomes_are_final(store: SqliteRecords) -> None:
    job = store.create_job(SPEC)
    store.create_attempt(job.id, 1)
    handle = AttemptHandle(job.id, 1, "local", native="pgid-123", data={"pids": [1, 2]})
    store.set_handle(job.id, 1, handle)
    failed = Outcome(
        State.FAILED,
        Cause.APP_ERROR,
        "rank 1 exited 3",
        first_failure=Failure(rank=1, exit_code=3),
    )
    store.record_outcome(job.id, 1, Outcome(State.RUNNING))
    store.record_outcome(job.id, 1, failed)
    store.record_outcome(job.id, 1, Outcome(State.SUCCEEDED))
    [attempt] = store.attempts(job.id)
    assert attempt.handle == handle
    assert attempt.outcome == failed
    assert attempt.ended_at is not None


def test_live_attempts_are_the_newest_started_unended_attempt_of_open_jobs(
    store: SqliteRecords,
) -> None:
    def started(job_id: str, attempt: int) -> AttemptHandle:
        store.create_attempt(job_id, attempt)
        handle = AttemptHandle(job_id, attempt, "local", native=f"{job_id}-{attempt}")
        store.set_handle(job_id, attempt, handle)
        return handle

    running, retried, unstarted, ended, closed = (store.create_job(SPEC) for _ in range(5))
    live = started(running.id, 1)
    store.record_outcome(running.id, 1, Outcome(State.RUNNING))
    started(retried.id, 1)
    store.record_outcome(retried.id, 1, Outcome(State.FAILED, Cause.PREEMPTED))
    second = started(retried.id, 2)  # attempt 1 ended: only attempt 2 is followed
    store.create_attempt(unstarted.id, 1)  # claimed, no handle yet
    started(ended.id, 1)
    store.record_outcome(ended.id, 1, Outcome(State.FAILED, Cause.APP_ERROR))  # job still open
    started(closed.id, 1)
    store.set_job_status(closed.id, State.CANCELLED, Cause.CANCELLED, "by alice")
    assert [a.handle for a in store.live_attempts()] == [second, live]  # newest job first


def test_evidence_is_append_only_and_deduplicated(store: SqliteRecords) -> None:
    job = store.create_job(SPEC)
    store.create_attempt(job.id, 1)
    facts = [
        Evidence("process", "rank-0-exit", 1.0, "rank 0 exited 3", {"exitCode": 3}),
        Evidence("process", "rank-1-exit", 2.0, "rank 1 killed", {"signal": 15}),
    ]
    assert store.add_evidence(job.id, 1, facts) == 2
    assert store.add_evidence(job.id, 1, facts[:1]) == 0
    assert store.evidence(job.id) == facts
    assert store.evidence(job.id, attempt=2) == []


def test_cancel_request_first_one_stands(store: SqliteRecords) -> None:
    job = store.create_job(SPEC)
    assert store.request_cancel(job.id, "alice", "wrong data") is True
    assert store.request_cancel(job.id, "bob", "too slow") is False
    cancel = store.get_job(job.id).cancel
    assert cancel is not None and cancel.actor == "alice"
    assert [e.kind for e in store.log(job.id)] == ["cancel-requested"]


def test_intents_open_and_close(store: SqliteRecords) -> None:
    job = store.create_job(SPEC)
    intent = store.open_intent(job.id, "start", "sup-1", attempt=1, data={"name": "x"})
    assert [i.id for i in store.open_intents()] == [intent.id]
    store.close_intent(intent.id, result={"native": "x"})
    assert store.open_intents() == []
    rolled = store.open_intent(job.id, "start", "sup-1", attempt=2)
    store.close_intent(rolled.id, status=IntentStatus.ROLLED_BACK)
    assert store.open_intents(job.id) == []


def test_leases_expire_and_fence(store: SqliteRecords, clock: ManualClock) -> None:
    job = store.create_job(SPEC)
    first = store.acquire_lease(job.id, "sup-1", ttl=10)
    assert first is not None and first.epoch == 1
    assert store.acquire_lease(job.id, "sup-2", ttl=10) is None
    clock.advance(5)
    renewed = store.acquire_lease(job.id, "sup-1", ttl=10)
    assert renewed is not None and renewed.epoch == 1
    clock.advance(11)
    assert store.lease(job.id) is None
    taken = store.acquire_lease(job.id, "sup-2", ttl=10)
    assert taken is not None and taken.epoch == 2
    store.release_lease(job.id, "sup-1")  # not the owner: no effect
    assert store.lease(job.id) is not None
    store.release_lease(job.id, "sup-2")
    assert store.lease(job.id) is None


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


# --- several processes ----------------------------------------------------------------------


def _writer(path: str, job_id: str, worker: int, count: int) -> None:
    store = SqliteRecords(path)
    for index in range(count):
        store.add_evidence(
            job_id, 1, [Evidence("test", f"w{worker}-{index}", float(index), data={"i": index})]
        )
        store.append_log(job_id, "note", {"worker": worker, "i": index})
    store.close()


def test_concurrent_writers_from_two_processes_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "r.sqlite3")
    store = SqliteRecords(path)
    job = store.create_job(SPEC)
    store.create_attempt(job.id, 1)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, job.id, w, 300)) for w in (1, 2)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert len(store.evidence(job.id, 1)) == 600
    assert len(store.log(job.id)) == 600


def test_concurrent_attempt_claims_have_one_winner(tmp_path: Path) -> None:
    path = str(tmp_path / "r.sqlite3")
    store = SqliteRecords(path)
    job = store.create_job(SPEC)
    script = textwrap.dedent(
        f"""
        from dispatch.records import SqliteRecords
        store = SqliteRecords({path!r})
        print(sum(store.create_attempt({job.id!r}, n) for n in range(1, 51)))
        """
    )
    runs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    wins = [int(run.communicate(timeout=60)[0]) for run in runs]
    assert sum(wins) == 50
    assert [a.attempt for a in store.attempts(job.id)] == list(range(1, 51))


def test_intents_survive_a_crash(tmp_path: Path) -> None:
    path = str(tmp_path / "r.sqlite3")
    store = SqliteRecords(path)
    job = store.create_job(SPEC)
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from dispatch.records import SqliteRecords
        store = SqliteRecords({path!r})
        store.open_intent({job.id!r}, "start", "sup-crash", attempt=1, data={{"step": 1}})
        print("written", flush=True)
        sys.stdin.readline()  # the parent kills us here, mid-operation
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "written"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    [intent] = SqliteRecords(path).open_intents(job.id)
    assert (intent.operation, intent.owner, intent.attempt, dict(intent.data)) == (
        "start",
        "sup-crash",
        1,
        {"step": 1},
    )

"""The records contract, the same on every store: each test runs on SQLite and on PostgreSQL
(``location``/``store`` fixtures in conftest), including the races several processes run."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from dispatch.clock import ManualClock
from dispatch.model import (
    AttemptHandle,
    Cause,
    Evidence,
    Failure,
    LeaseLost,
    NotFound,
    Outcome,
    State,
    parse_spec,
)
from dispatch.records import IntentStatus, OpenJob, Records, open_records

SPEC = parse_spec({"name": "train", "command": ["python", "train.py"], "nodes": 2})


def test_jobs_are_created_with_injected_ids_and_times(store: Records) -> None:
    job = store.create_job(SPEC)
    assert job.id == "train-00001"
    record = store.get_job(job.id)
    assert record.job == job
    assert record.state is State.PENDING
    assert record.job.created_at == 1000.0


def test_unknown_job_is_not_found(store: Records) -> None:
    with pytest.raises(NotFound, match="nope"):
        store.get_job("nope")


def test_open_jobs_oldest_first_without_their_specs(store: Records, clock: ManualClock) -> None:
    first = store.create_job(SPEC)
    clock.advance(1)
    second, third = store.create_job(SPEC), store.create_job(SPEC)  # made at the same time
    store.set_job_status(second.id, State.SUCCEEDED, None, "done")
    clock.advance(1)
    fourth = store.create_job(SPEC)
    found = store.open_jobs()
    assert [j.id for j in found] == [first.id, third.id, fourth.id]
    assert found[0] == OpenJob(first.id, SPEC.cluster, first.created_at)


def test_list_jobs_newest_first_and_open_only(store: Records, clock: ManualClock) -> None:
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


def test_attempts_are_claimed_once_and_in_order(store: Records) -> None:
    job = store.create_job(SPEC)
    assert store.create_attempt(job.id, 1) is True
    assert store.create_attempt(job.id, 1) is False
    with pytest.raises(ValueError, match="before attempt 2"):
        store.create_attempt(job.id, 3)
    assert store.create_attempt(job.id, 2) is True
    assert [a.attempt for a in store.attempts(job.id)] == [1, 2]


def test_terminal_outcomes_are_final(store: Records) -> None:
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
    store: Records,
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


def test_evidence_is_append_only_and_deduplicated(store: Records) -> None:
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


def test_cancel_request_first_one_stands(store: Records) -> None:
    job = store.create_job(SPEC)
    assert store.request_cancel(job.id, "alice", "wrong data") is True
    assert store.request_cancel(job.id, "bob", "too slow") is False
    cancel = store.get_job(job.id).cancel
    assert cancel is not None and cancel.actor == "alice"
    assert [e.kind for e in store.log(job.id)] == ["cancel-requested"]


def test_intents_open_and_close(store: Records) -> None:
    job = store.create_job(SPEC)
    intent = store.open_intent(job.id, "start", "sup-1", attempt=1, data={"name": "x"})
    assert [i.id for i in store.open_intents()] == [intent.id]
    store.close_intent(intent.id, result={"native": "x"})
    assert store.open_intents() == []
    rolled = store.open_intent(job.id, "start", "sup-1", attempt=2)
    store.close_intent(rolled.id, status=IntentStatus.ROLLED_BACK)
    assert store.open_intents(job.id) == []


def test_leases_expire_and_fence(store: Records, clock: ManualClock) -> None:
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


def test_set_job_status_if_open_never_changes_a_terminal_job(store: Records) -> None:
    job = store.create_job(parse_spec({"name": "t", "command": ["x"]})).id
    assert store.set_job_status(job, State.RUNNING, if_open=True)
    assert store.set_job_status(job, State.SUCCEEDED, if_open=True)
    assert not store.set_job_status(job, State.QUEUED, None, "stale", if_open=True)
    assert store.get_job(job).state is State.SUCCEEDED
    assert store.set_job_status(job, State.FAILED, Cause.UNKNOWN, "forced")  # without if_open
    assert store.get_job(job).state is State.FAILED
    with pytest.raises(NotFound):
        store.set_job_status("nope", State.RUNNING, if_open=True)


def test_create_job_held_records_the_hold_in_the_same_write(
    store: Records, clock: ManualClock
) -> None:
    spec = parse_spec({"name": "t", "command": ["x"]})
    job = store.create_job(spec, held_by="alice").id
    record = store.get_job(job)
    assert (record.state, record.cause) == (State.HELD, None)
    assert record.summary == f"held at submission by alice; release with `dispatch release {job}`"
    assert [(e.kind, dict(e.data), e.at) for e in store.log(job)] == [
        ("hold-requested", {"attempt": 0, "actor": "alice"}, 1000.0)
    ]
    assert store.attempts(job) == []
    plain = store.create_job(spec).id
    assert (store.get_job(plain).state, store.get_job(plain).summary, store.log(plain)) == (
        State.PENDING,
        "",
        [],
    )


def test_an_ended_job_is_read_right_and_not_kept(store: Records) -> None:
    """What the store's reader keeps of a job (its parsed row, spec, attempts, log) goes
    when the job ends, and reading it afterwards keeps nothing again: a supervisor that
    finishes jobs for days holds only the open ones. Internals of both stores' reader."""
    kept = store._rows  # type: ignore[attr-defined]
    ended, still_open = store.create_job(SPEC), store.create_job(SPEC)
    for job in (ended, still_open):
        store.create_attempt(job.id, 1)
        store.set_handle(job.id, 1, AttemptHandle(job.id, 1, "local", native=job.id))
        store.record_outcome(job.id, 1, Outcome(State.FAILED, Cause.APP_ERROR, "exit 3"))
        store.append_log(job.id, "note", {"job": job.id})
        store.set_job_status(job.id, State.RUNNING)
        assert (store.get_job(job.id).state, len(store.attempts(job.id))) == (State.RUNNING, 1)
        assert len(store.log(job.id)) == 1
    assert set(kept._jobs) == set(kept._parts) == {ended.id, still_open.id}
    store.set_job_status(ended.id, State.FAILED, Cause.APP_ERROR, "exit 3")
    assert set(kept._jobs) == set(kept._parts) == {still_open.id}
    record = store.get_job(ended.id)
    assert (record.state, record.cause, record.job.spec) == (State.FAILED, Cause.APP_ERROR, SPEC)
    assert store.list_jobs()[0].job.spec == SPEC
    assert set(kept._jobs) == {still_open.id}
    assert store.get_job(still_open.id).job.spec == SPEC  # its spec parsed again if need be


# --- several processes ----------------------------------------------------------------------


def _writer(location: str, job_id: str, worker: int, count: int) -> None:
    store = open_records(location)
    for index in range(count):
        store.add_evidence(
            job_id, 1, [Evidence("test", f"w{worker}-{index}", float(index), data={"i": index})]
        )
        store.append_log(job_id, "note", {"worker": worker, "i": index})
    store.close()


def test_concurrent_writers_from_two_processes_lose_nothing(location: str) -> None:
    store = open_records(location)
    job = store.create_job(SPEC)
    store.create_attempt(job.id, 1)
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(location, job.id, w, 300)) for w in (1, 2)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert len(store.evidence(job.id, 1)) == 600
    assert len(store.log(job.id)) == 600


def test_concurrent_attempt_claims_have_one_winner(location: str) -> None:
    store = open_records(location)
    job = store.create_job(SPEC)
    script = textwrap.dedent(
        f"""
        from dispatch.records import open_records
        store = open_records({location!r})
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


def test_intents_survive_a_crash(location: str) -> None:
    store = open_records(location)
    job = store.create_job(SPEC)
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from dispatch.records import open_records
        store = open_records({location!r})
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
    [intent] = open_records(location).open_intents(job.id)
    assert (intent.operation, intent.owner, intent.attempt, dict(intent.data)) == (
        "start",
        "sup-crash",
        1,
        {"step": 1},
    )


def test_a_write_fenced_by_a_lost_lease_is_refused_and_changes_nothing(
    store: Records, clock: ManualClock
) -> None:
    job = store.create_job(SPEC)
    stale = store.acquire_lease(job.id, "sup-1", ttl=10)
    assert stale is not None
    store.create_attempt(job.id, 1, fence=stale)
    intent = store.open_intent(job.id, "start", "sup-1", attempt=1, fence=stale)
    clock.advance(11)  # sup-1 paused past its lease; sup-2 takes the job over
    current = store.acquire_lease(job.id, "sup-2", ttl=10)
    assert current is not None and current.epoch == stale.epoch + 1
    handle = AttemptHandle(job.id, 1, "local", native="late")
    late_writes = [
        lambda: store.create_attempt(job.id, 2, fence=stale),
        lambda: store.set_handle(job.id, 1, handle, fence=stale),
        lambda: store.record_outcome(job.id, 1, Outcome(State.RUNNING), fence=stale),
        lambda: store.set_job_status(job.id, State.RUNNING, fence=stale),
        lambda: store.add_evidence(job.id, 1, [Evidence("x", "late", 1.0)], fence=stale),
        lambda: store.append_log(job.id, "note", {"late": True}, fence=stale),
        lambda: store.open_intent(job.id, "cancel", "sup-1", attempt=1, fence=stale),
        lambda: store.close_intent(intent.id, fence=stale),
    ]
    for write in late_writes:
        with pytest.raises(LeaseLost, match=r"sup-1's lease .* was lost: sup-2 holds it"):
            write()
    [attempt] = store.attempts(job.id)
    assert (attempt.handle, attempt.outcome) == (None, None)
    assert store.get_job(job.id).state is State.PENDING
    assert store.evidence(job.id) == [] and store.log(job.id) == []
    assert [i.id for i in store.open_intents(job.id)] == [intent.id]
    # the holder's own writes go through, and a released lease fences nothing any more
    store.set_handle(job.id, 1, handle, fence=current)
    store.release_lease(job.id, "sup-2")
    with pytest.raises(LeaseLost, match="nobody holds it"):
        store.set_job_status(job.id, State.RUNNING, fence=current)
    assert store.attempts(job.id)[0].handle == handle


def test_calls_together_land_as_one_or_not_at_all(store: Records) -> None:
    job = store.create_job(SPEC)
    lease = store.acquire_lease(job.id, "sup-1", ttl=10)
    assert lease is not None
    store.create_attempt(job.id, 1, fence=lease)
    handle = AttemptHandle(job.id, 1, "local", native="n-1")
    with store.together(lease):
        store.set_handle(job.id, 1, handle, fence=lease)
        with store.together(lease):  # nested: part of the outer block
            store.record_outcome(job.id, 1, Outcome(State.QUEUED), fence=lease)
        store.set_job_status(job.id, State.QUEUED, None, "queued", fence=lease)
        assert store.get_job(job.id).state is State.QUEUED  # its own writes are read back
    assert store.attempts(job.id)[0].handle == handle
    assert store.get_job(job.id).state is State.QUEUED

    # an error that leaves the block undoes every write made in it
    def undone() -> None:
        with store.together(lease):
            store.record_outcome(job.id, 1, Outcome(State.RUNNING), fence=lease)
            store.append_log(job.id, "note", {"undone": True}, fence=lease)
            store.set_handle(job.id, 2, handle, fence=lease)  # no attempt 2

    with pytest.raises(NotFound):
        undone()
    assert store.attempts(job.id)[0].outcome == Outcome(State.QUEUED)
    assert store.log(job.id) == []
    # after the block, calls are their own transactions again
    store.append_log(job.id, "note", {"alone": True}, fence=lease)
    assert [e.data for e in store.log(job.id)] == [{"alone": True}]


def test_a_block_fenced_by_a_lost_lease_writes_nothing(store: Records, clock: ManualClock) -> None:
    job = store.create_job(SPEC)
    stale = store.acquire_lease(job.id, "sup-1", ttl=10)
    assert stale is not None
    clock.advance(11)
    assert store.acquire_lease(job.id, "sup-2", ttl=10) is not None

    def late() -> None:
        with store.together(stale):
            store.append_log(job.id, "note", {"late": True})  # unfenced, yet inside the block

    with pytest.raises(LeaseLost):
        late()
    assert store.log(job.id) == []

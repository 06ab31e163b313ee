"""The UI's pure parts: rows and filters, masking, the guard, the overview, the timeline."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pygal")

from dispatch.api import JobStatus
from dispatch.clock import CountingIds
from dispatch.model import Cause, State
from dispatch.records import SqliteRecords
from dispatch.ui import charts, guard, masking, overview, timeline
from dispatch.ui.index import JobIndex
from dispatch.ui.rows import MAX_LIMIT, Filters, JobRow, age
from tests.ui.seed import SetClock, seed_job, seed_mix


@pytest.fixture
def store() -> tuple[SqliteRecords, SetClock]:
    clock = SetClock(1_800_000_000.0)
    return SqliteRecords(":memory:", clock=clock, ids=CountingIds()), clock


def test_filters_drop_unknown_values_and_bound_the_rest() -> None:
    f = Filters.from_query({"state": "exploded", "cause": "app_error", "name": "x" * 500,
                            "limit": "999999"})  # fmt: skip
    assert f.state is None
    assert f.cause == "app_error"
    assert f.name is not None and len(f.name) == 100
    assert f.limit == MAX_LIMIT
    assert Filters.from_query({"limit": "nope"}).limit == 200


def test_rows_filter_by_state_cause_cluster_and_name(store: tuple[SqliteRecords, SetClock]) -> None:
    records, clock = store
    failed = seed_job(records, clock, "app_error", name="alpha", cluster="prod")
    seed_job(records, clock, "succeeded", name="beta")
    index = JobIndex()
    index.load(records)
    rows, matching = index.listing(Filters(cause="app_error"))
    assert [r.id for r in rows] == [failed] and matching == 1
    assert index.listing(Filters(cluster="prod"))[1] == 1
    assert index.listing(Filters(name="BET"))[1] == 1
    assert index.listing(Filters(state="failed"))[0][0].attempts[1].cause is Cause.APP_ERROR
    assert index.counts() == {"failed": 1, "succeeded": 1}


def test_age() -> None:
    assert [age(5), age(61), age(7300), age(200000)] == ["5s", "1m", "2h", "2d"]


def test_masking_hides_secret_values_everywhere() -> None:
    plan = {
        "objects": [
            {"kind": "process", "content": {"env": {"HF_TOKEN": "s3cr3t", "EPOCHS": "3",
                                                    "WANDB_API_KEY": "k", "MONKEY": "ok"}}},
            {"kind": "Pod", "spec": {"containers": [{"env": [
                {"name": "DB_PASSWORD", "value": "pw"}, {"name": "RANK", "value": "0"},
                {"name": "MY_VAR", "value": "named-secret"}]}]}},
            {"kind": "Secret", "data": {"token": "c2VjcmV0"}, "metadata": {"name": "s"}},
        ]
    }  # fmt: skip
    masked = masking.mask_data(plan, frozenset({"MY_VAR"}))
    text = repr(masked)
    for secret in ("s3cr3t", "'k'", "pw", "named-secret", "c2VjcmV0"):
        assert secret not in text
    assert "EPOCHS': '3'" in text and "MONKEY': 'ok'" in text and "'0'" in text
    assert plan["objects"][0]["content"]["env"]["HF_TOKEN"] == "s3cr3t"  # input unchanged


def test_guard_refuses_without_actions_token_or_same_origin() -> None:
    hosts = guard.allowed_hosts("127.0.0.1", 8642)
    off = guard.Guard(None, hosts)
    on = guard.Guard("tok", hosts)
    good = {"Host": "127.0.0.1:8642", "Origin": "http://127.0.0.1:8642", "X-Dispatch-Token": "tok"}
    assert off.check_action(good) is not None and off.check_action(good).status == 403
    assert on.check_action(good) is None
    assert on.check_action({**good, "X-Dispatch-Token": "tok2"}) is not None
    assert on.check_action({k: v for k, v in good.items() if k != "X-Dispatch-Token"}) is not None
    assert on.check_action({**good, "Origin": "http://evil.example"}) is not None
    assert on.check_action({k: v for k, v in good.items() if k != "Origin"}) is not None
    assert on.check_action({**good, "Sec-Fetch-Site": "cross-site"}) is not None
    rebound = on.check_action(
        {**good, "Host": "evil.example:8642", "Origin": "http://evil.example:8642"}
    )
    assert rebound is not None and rebound.status == 421
    assert guard.allowed_hosts("0.0.0.0", 1) is None
    assert guard.is_loopback("::1") and guard.is_loopback("localhost")
    assert len(guard.new_token()) >= 40


def test_overview_counts_ends_time_lost_and_open_jobs(
    store: tuple[SqliteRecords, SetClock],
) -> None:
    records, clock = store
    now = clock.at
    seeded = seed_mix(records, clock, 120, days=1.0)
    index = JobIndex()
    index.load(records)
    found = overview.build(list(index.rows.values()), now + 3600)
    ended = sum(
        1 for p in seeded.profiles.values() if p not in ("running", "queued", "held", "pending")
    )
    assert sum(found.totals.values()) == ended
    assert sum(sum(v) for v in found.ends.series.values()) == ended
    assert found.lost and all(seconds > 0 for seconds in found.lost.values())
    assert "succeeded" not in found.lost
    open_jobs = sum(sum(c.values()) for c in found.by_cluster.values())
    assert open_jobs == sum(
        1 for p in seeded.profiles.values() if p in ("running", "queued", "held", "pending")
    )
    svg = charts.ends_chart(found.ends)
    assert svg.startswith(b"<?xml") and b"<script" not in svg
    assert b"<script" not in charts.lost_chart(found.lost)


def test_timeline_phases_events_first_failure_and_decisions(
    store: tuple[SqliteRecords, SetClock],
) -> None:
    records, clock = store
    job_id = seed_job(records, clock, "app_error", secret=True)
    status = JobStatus.of(
        records.get_job(job_id),
        records.attempts(job_id),
        records.log(job_id),
        {a.attempt: records.evidence(job_id, a.attempt) for a in records.attempts(job_id)},
    )
    built = timeline.build(status, records.log(job_id), time.time(), frozenset({"HF_TOKEN"}))
    assert [lane.number for lane in built.lanes] == [1, 2]
    first = built.lanes[0]
    assert [p.name for p in first.phases] == ["queued", "admitted", "running"]
    assert all(0 <= p.left <= 100 and 0 <= p.width <= 100 for p in first.phases)
    assert first.first_failure is not None and first.first_failure.rank == 1
    flagged = [e.summary for e in first.events if e.first_failure]
    assert "rank 1 (node 0) exited with code 3" in flagged
    assert not any("rank 0" in s for s in flagged)
    actions = [h.title for h in built.history if h.kind == "decision"]
    assert actions == ["decision: start", "decision: wait", "decision: start", "decision: finish"]
    # between the attempts: the backoff and the retry; after the last: the finish
    assert [d.action for d in built.lanes[0].after] == ["wait", "start"]
    assert [d.action for d in built.lanes[1].after] == ["finish"]
    assert status.state is State.FAILED


def test_a_row_knows_when_it_changed(store: tuple[SqliteRecords, SetClock]) -> None:
    records, clock = store
    job_id = seed_job(records, clock, "running")
    before = JobRow.of(records.get_job(job_id), records.attempts(job_id))
    records.set_job_status(job_id, State.FAILED, Cause.NODE_LOST, "node lost")
    after = JobRow.of(records.get_job(job_id), records.attempts(job_id))
    assert before.shown() != after.shown()
    assert after.to_json()["cause"] == "node_lost" and after.ended_at is not None

"""Every cause the local scheduler reports, with real processes."""

from __future__ import annotations

import os
import signal
import time

import pytest

from dispatch.model import Cause, State
from tests.local.conftest import Harness, alive, no_process_left, rank_info, rank_pids


def test_success_publishes_ranks_and_identity(harness: Harness) -> None:
    handle = harness.start(harness.job(nodes=2, procsPerNode=2))
    observation = harness.wait_end(handle)
    assert observation.outcome.state is State.SUCCEEDED
    assert observation.outcome.cause is None
    lines = harness.run(_collect(harness, handle, None))
    assert sorted(lines) == [f"[rank {r}] rank {r} of 4 attempt 1" for r in range(4)]
    assert harness.run(_collect(harness, handle, 2)) == ["rank 2 of 4 attempt 1"]


async def _collect(harness: Harness, handle, rank):  # type: ignore[no-untyped-def]
    return [line async for line in harness.adapter.read_output(handle, rank)]


def test_app_error_names_first_failing_rank_and_stops_the_gang(harness: Harness) -> None:
    job = harness.job(nodes=2, procsPerNode=2, env={"FAIL_RANK": "1", "SLEEP": "60"})
    handle = harness.start(job)
    observation = harness.wait_end(handle)
    outcome = observation.outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.APP_ERROR)
    assert outcome.first_failure is not None
    assert (outcome.first_failure.rank, outcome.first_failure.exit_code) == (1, 3)
    assert outcome.first_failure.node == 0
    # every other rank was stopped by dispatch, within a second of the failure
    facts = {e.key: e.data for e in observation.evidence if e.kind == "process"}
    failed_at = facts["process-1"]["endedAt"]
    others = [d for k, d in facts.items() if k != "process-1"]
    assert len(others) == 3
    assert all(d["stoppedBy"] == "dispatch" for d in others)
    assert max(d["endedAt"] for d in others) - failed_at < 1.0
    assert no_process_left(list(rank_pids(harness.out).values()), timeout=1.0)


def test_timeout_stops_every_rank(harness: Harness) -> None:
    handle = harness.start(harness.job(timeLimit="1s", env={"SLEEP": "60"}))
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.TIMEOUT)
    assert no_process_left(list(rank_pids(harness.out).values()))


def test_command_not_found_is_a_start_failure(harness: Harness) -> None:
    handle = harness.start(harness.job(command=["no-such-program-here", "x"]))
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.START_FAILURE)
    assert "no-such-program-here" in outcome.summary


def test_missing_working_directory_is_a_start_failure(harness: Harness) -> None:
    missing = harness.root / "nowhere"
    handle = harness.start(harness.job(workingDir=str(missing)))
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.START_FAILURE)
    assert str(missing) in outcome.summary


def test_cancel_names_who_and_stops_every_rank(harness: Harness) -> None:
    handle = harness.start(harness.job(nodes=2, env={"SLEEP": "60"}))
    harness.wait_files(["pid-0", "pid-1", "pid-2", "pid-3"])
    harness.run(harness.adapter.cancel(handle, "alice", "wrong data set"))
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert "alice" in outcome.summary and "wrong data set" in outcome.summary
    assert outcome.evidence[0].data["actor"] == "alice"
    assert no_process_left(list(rank_pids(harness.out).values()), timeout=5.0)
    # cancelling again, or an ended attempt, is not an error
    harness.run(harness.adapter.cancel(handle, "bob", "again"))
    assert harness.observe(handle).outcome.summary == outcome.summary


def test_node_killed_from_outside_is_node_lost(harness: Harness) -> None:
    handle = harness.start(harness.job(nodes=2, env={"SLEEP": "60"}))
    harness.wait_files(["pid-0", "pid-1", "pid-2", "pid-3"])
    _, pgid, _ = rank_info(harness.out, "2")
    assert rank_info(harness.out, "3")[1] == pgid  # one process group per node
    os.killpg(pgid, signal.SIGKILL)
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.NODE_LOST)
    assert outcome.first_failure is not None and outcome.first_failure.node == 1
    assert outcome.first_failure.signal == signal.SIGKILL
    assert no_process_left(list(rank_pids(harness.out).values()))


def test_one_rank_killed_from_outside_is_unknown_with_evidence(harness: Harness) -> None:
    handle = harness.start(harness.job(env={"SLEEP": "60"}))
    harness.wait_files(["pid-0", "pid-1"])
    os.kill(rank_info(harness.out, "1")[0], signal.SIGKILL)
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.UNKNOWN)
    assert outcome.first_failure is not None and outcome.first_failure.rank == 1
    assert outcome.evidence and outcome.evidence[0].data["signal"] == signal.SIGKILL


GROW = {"GROW": "1", "SLEEP": "60"}


def test_out_of_memory_with_the_machines_enforcement(harness: Harness) -> None:
    report = harness.run(harness.adapter.capabilities())
    memory = report.answer("MemoryLimit")
    assert memory is not None and memory.supported
    handle = harness.start(harness.job(procsPerNode=1, resources={"memory": "150Mi"}, env=GROW))
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.OUT_OF_MEMORY), outcome
    assert outcome.first_failure is not None and outcome.first_failure.node == 0
    proof = {e.kind for e in outcome.evidence}
    assert proof & ({"oom_kill"} if "cgroup" in memory.reason else {"memory_limit"})


def test_out_of_memory_with_the_watchdog(tmp_path) -> None:  # type: ignore[no-untyped-def]
    harness = Harness(tmp_path, {"memoryEnforcement": "watchdog"})
    report = harness.run(harness.adapter.capabilities())
    assert "watchdog" in report.answer("MemoryLimit").reason  # type: ignore[union-attr]
    handle = harness.start(harness.job(nodes=2, resources={"memory": "200Mi"}, env=GROW))
    outcome = harness.wait_end(handle).outcome
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.OUT_OF_MEMORY), outcome
    assert outcome.evidence[0].kind == "memory_limit"
    assert outcome.evidence[0].data["rssBytes"] > 200 * 2**20
    assert no_process_left(list(rank_pids(harness.out).values()))


def test_a_gpu_job_is_refused_and_nothing_is_created(harness: Harness) -> None:
    report = harness.run(harness.adapter.capabilities())
    gpu = report.answer("GPU")
    if gpu is not None and gpu.supported:
        pytest.skip("this machine has a GPU")
    from dispatch.model import Unsupported

    job = harness.job(resources={"gpu": 1})
    with pytest.raises(Unsupported) as refused:
        harness.start(job)
    assert refused.value.rules == ("local-gpu",)
    assert not harness.state.exists()
    plan = harness.run(harness.adapter.plan(job, 1))
    assert not plan.accepted


def test_plan_shows_exact_processes_and_starts_nothing(harness: Harness) -> None:
    job = harness.job(nodes=2, procsPerNode=2, image="ignored:latest")
    plan = harness.run(harness.adapter.plan(job, 3))
    processes = [a for a in plan.artifacts if a.name.startswith("node-")]
    assert [a.name for a in processes] == [
        "node-0/rank-0",
        "node-0/rank-1",
        "node-1/rank-2",
        "node-1/rank-3",
    ]
    env = processes[3].content["env"]  # type: ignore[index]
    assert env["RANK"] == "3" and env["LOCAL_RANK"] == "1" and env["WORLD_SIZE"] == "4"
    assert env["PET_NODE_RANK"] == "1" and env["PET_NNODES"] == "2"
    assert env["DISPATCH_JOB"] == "job-1" and env["DISPATCH_ATTEMPT"] == "3"
    assert any("image" in note for note in plan.notes)
    assert not harness.state.exists()
    time.sleep(0.2)
    assert not rank_pids(harness.out)
    assert alive(os.getpid())

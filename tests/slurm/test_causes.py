"""Causes the scheduler imposes, on the real two-node Slurm: a lost node and a preemption.

Both end a job that dispatch submitted with ``--no-requeue``, so Slurm does not run it again
inside the attempt; the job ends NODE_FAIL or PREEMPTED and dispatch reports
``failed``/``node_lost`` or ``failed``/``preempted``, with Slurm's own state and reason in the
evidence. The cluster is shared by the whole session: each test gives back what it took (the
node returned to service, the preempting job cancelled) and waits until both nodes are idle.

Preemption comes from the test cluster's configuration (``data/slurm.conf.in``):
``PreemptType=preempt/partition_prio``, ``PreemptMode=CANCEL`` and a partition ``urgent``
over the same nodes with a higher ``PriorityTier`` than the default ``debug``. The last test
runs the real ``Supervisor``: a policy ``on: [preempted] action: retry`` turns the preempted
attempt 1 into an attempt 2 that succeeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.adapters.slurm import SlurmAdapter
from dispatch.clock import RandomIds, SystemClock
from dispatch.config import ClusterConfig
from dispatch.model import AttemptHandle, Cause, Observation, State, parse_spec
from dispatch.records import SqliteRecords
from dispatch.supervise import Supervisor
from tests.slurm.conftest import run
from tests.slurm.realslurm import RealSlurm
from tests.slurm.test_real_slurm import make_job, recording_adapter, watch_to_end

#: generous: the machine is small and shared
IDLE_TIMEOUT = 60.0
#: every task says it started, then sleeps until something else ends it
STARTED_THEN_SLEEP = ["sh", "-c", "echo started; exec sleep 300"]


@pytest.fixture
def idle_after(real_slurm: RealSlurm) -> Iterator[RealSlurm]:
    """The session's cluster, waited on until both nodes are idle again after the test."""
    yield real_slurm
    real_slurm.wait_until_idle(*real_slurm.nodes, timeout=IDLE_TIMEOUT)


async def until_running(slurm: SlurmAdapter, handle: AttemptHandle) -> Observation:
    """The first observation of ``handle`` running (it must not end before)."""
    async for seen in slurm.watch([handle]):
        assert not seen.outcome.is_terminal, seen.outcome.summary
        if seen.state is State.RUNNING:
            return seen
    raise AssertionError("watch ended before the job ran")


async def until_started(slurm: SlurmAdapter, handle: AttemptHandle, ranks: int) -> None:
    """Wait until every rank's output says ``started`` (srun has launched all tasks)."""
    deadline = asyncio.get_running_loop().time() + IDLE_TIMEOUT
    while True:
        outputs = [[line async for line in slurm.read_output(handle, rank=r)] for r in range(ranks)]
        if all("started" in lines for lines in outputs):
            return
        assert asyncio.get_running_loop().time() < deadline, f"tasks did not start: {outputs}"
        await asyncio.sleep(0.3)


def slurm_states(cluster: RealSlurm, handle: AttemptHandle) -> tuple[str, str]:
    """The job's state as Slurm itself prints it: ``squeue -t all`` and ``scontrol show job``."""
    listed = cluster.run("squeue", "-h", "-t", "all", "-j", handle.native, "-o", "%T").stdout
    shown = cluster.run("scontrol", "--oneliner", "show", "job", handle.native).stdout
    fields = dict(f.split("=", 1) for f in shown.split() if "=" in f)
    return listed.strip(), fields.get("JobState", "")


@pytest.mark.timeout(180)
def test_a_node_taken_down_under_a_running_job_is_node_lost(
    slurm: SlurmAdapter, idle_after: RealSlurm
) -> None:
    cluster = idle_after
    lost = cluster.nodes[1]  # not the batch host: the batch script and its output survive
    job = make_job("nodelost", nodes=2, command=STARTED_THEN_SLEEP)

    async def scenario() -> tuple[list[Observation], Observation]:
        handle = await slurm.start(job, 1)
        await until_running(slurm, handle)
        await until_started(slurm, handle, ranks=2)  # srun is there to see the node fail
        try:
            cluster.run(
                "scontrol", "update", f"nodename={lost}", "state=down", "reason=dispatch-test"
            )
            seen = await watch_to_end(slurm, handle)
        finally:
            # ReturnToService=2 may already have returned the responsive slurmd to service,
            # in which case Slurm refuses the resume ("Invalid node state specified")
            cluster.run("scontrol", "update", f"nodename={lost}", "state=resume", check=False)
            cluster.wait_until_idle(lost, timeout=IDLE_TIMEOUT)
        return seen, await slurm.observe(handle)

    seen, observed = run(scenario())
    for last in (seen[-1], observed):
        assert (last.state, last.outcome.cause) == (State.FAILED, Cause.NODE_LOST)
        assert last.outcome.summary.endswith(f"a node of the allocation failed ({lost})")
        native, output, *kept = last.evidence
        assert all(k.kind == "log" for k in kept)  # the failed tasks' last output, if any
        assert (native.kind, native.data["states"], native.data["reason"]) == (
            "squeue",
            ["NODE_FAIL"],
            "NodeDown",
        )
        assert output.data["nodeFailures"] == [f"srun: error: Node failure on {lost}"]
        failure = last.outcome.first_failure
        assert failure is not None
        assert (failure.where, failure.node) == (lost, 1)
    assert slurm_states(cluster, seen[-1].handle) == ("NODE_FAIL", "NODE_FAIL")
    assert [s.state for s in seen[:-1]] == [State.RUNNING] * (len(seen) - 1)


@pytest.mark.timeout(180)
def test_a_job_of_a_higher_priority_partition_preempts_a_running_job(
    slurm: SlurmAdapter, idle_after: RealSlurm
) -> None:
    cluster = idle_after
    # every CPU of both nodes: the urgent job cannot start beside it
    victim = make_job("victim", nodes=2, resources={"cpu": 2}, command=STARTED_THEN_SLEEP)
    urgent = make_job(
        "urgent", nodes=1, queue="urgent", resources={"cpu": 2}, command=["sleep", "300"]
    )

    async def scenario() -> tuple[list[Observation], Observation, list[Observation]]:
        handle = await slurm.start(victim, 1)
        await until_running(slurm, handle)
        await until_started(slurm, handle, ranks=2)
        urgent_handle = await slurm.start(urgent, 1)
        try:
            seen = await watch_to_end(slurm, handle)
            urgent_running = await until_running(slurm, urgent_handle)
        finally:
            await slurm.cancel(urgent_handle, actor="test", reason="clean up")
        return seen, urgent_running, await watch_to_end(slurm, urgent_handle)

    seen, urgent_running, urgent_seen = run(scenario())
    last = seen[-1]
    assert (last.state, last.outcome.cause) == (State.FAILED, Cause.PREEMPTED)
    assert last.outcome.summary.endswith("PREEMPTED: preempted by the scheduler")
    native = last.evidence[0]
    assert (native.kind, native.data["states"]) == ("squeue", ["PREEMPTED"])
    # Slurm 22.05 itself says PREEMPTED, not CANCELLED, for a job cancelled by preemption
    assert slurm_states(cluster, last.handle) == ("PREEMPTED", "PREEMPTED")
    assert urgent_running.evidence[0].data["nodes"] in cluster.nodes
    assert (urgent_seen[-1].state, urgent_seen[-1].outcome.cause) == (
        State.CANCELLED,
        Cause.CANCELLED,
    )


#: attempt 1 says it started and waits to be preempted; later attempts print who they are
PREEMPTED_FIRST = (
    'echo "attempt=$DISPATCH_ATTEMPT rank=$RANK"; echo started; '
    '[ "$DISPATCH_ATTEMPT" != 1 ] || exec sleep 300'
)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_preempted_attempt_is_retried_as_attempt_2_which_succeeds(
    slurm_cluster: ClusterConfig, slurm: SlurmAdapter, idle_after: RealSlurm, tmp_path: Path
) -> None:
    cluster = idle_after
    clock = SystemClock()
    records = SqliteRecords(tmp_path / "records.db", clock=clock, ids=RandomIds())
    supervised, _ = recording_adapter(slurm_cluster, tmp_path / "supervisor")
    job = records.create_job(
        parse_spec(
            {
                "name": "preemptible",
                "cluster": "testslurm",
                "nodes": 2,
                "resources": {"cpu": 2},  # both nodes whole: the urgent job cannot fit beside
                "command": ["sh", "-c", PREEMPTED_FIRST],
                "recovery": {
                    "rules": [
                        {
                            "on": ["preempted"],
                            "action": "retry",
                            "limit": 1,
                            "backoff": {"initial": "1s"},
                        },
                    ],
                    "unmatched": "fail",
                },
            }
        )
    )
    # short: attempt 2 needs both nodes whole and starts once the urgent job is done
    urgent = make_job("urgent2", nodes=1, queue="urgent", resources={"cpu": 2}, command=["true"])
    supervisor = Supervisor(records, lambda _: supervised, clock, "slurm-test", poll_interval=1.0)

    async def first_attempt() -> AttemptHandle:
        deadline = asyncio.get_running_loop().time() + IDLE_TIMEOUT
        while not (attempts := records.attempts(job.id)) or attempts[0].handle is None:
            assert asyncio.get_running_loop().time() < deadline, "attempt 1 was not started"
            await asyncio.sleep(0.2)
        handle = attempts[0].handle
        await until_running(slurm, handle)
        await until_started(slurm, handle, ranks=2)
        return handle

    async def preempt() -> AttemptHandle:
        await first_attempt()
        urgent_handle = await slurm.start(urgent, 1)
        await watch_to_end(slurm, urgent_handle)
        return urgent_handle

    async def scenario() -> tuple[list[str], Observation]:
        _, urgent_handle = await asyncio.gather(
            supervisor.run(asyncio.Event(), until_idle=True), preempt()
        )
        second = records.attempts(job.id)[1].handle
        assert second is not None
        printed = sorted([line async for line in slurm.read_output(second)])
        return printed, await slurm.observe(urgent_handle)

    printed, urgent_end = run(scenario())

    record = records.get_job(job.id)
    assert (record.state, record.cause) == (State.SUCCEEDED, None)
    attempts = records.attempts(job.id)
    ends = [(a.outcome.state, a.outcome.cause) for a in attempts if a.outcome is not None]
    assert ends == [(State.FAILED, Cause.PREEMPTED), (State.SUCCEEDED, None)]
    decisions = [e.data for e in records.log(job.id) if e.kind == "decision"]
    acted = [(d["action"], d["attempt"]) for d in decisions if d["action"] != "wait"]
    assert acted == [("start", 1), ("start", 2), ("finish", 2)]
    assert "retry 1 of 1" in next(d["reason"] for d in decisions if d["attempt"] == 2)
    assert printed == [
        "[rank 0] attempt=2 rank=0",
        "[rank 0] started",
        "[rank 1] attempt=2 rank=1",
        "[rank 1] started",
    ]
    assert urgent_end.state is State.SUCCEEDED
    # Slurm's own view: attempt 1 preempted, attempt 2 completed, one Slurm job each
    natives = ",".join(a.handle.native for a in attempts if a.handle is not None)
    listed = cluster.run("squeue", "-h", "-t", "all", "-j", natives, "-o", "%j %T")
    assert sorted(listed.stdout.split("\n")[:-1]) == [
        f"dispatch-{job.id}-a1 PREEMPTED",
        f"dispatch-{job.id}-a2 COMPLETED",
    ]

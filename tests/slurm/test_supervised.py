"""The real Supervisor driving jobs on the real two-node Slurm: recovery policy as data.

Attempt 1 runs into its time limit (Slurm's TIMEOUT, which takes 60-100 s: the limit is
rounded up to a minute and checked about every 30 s); the policy retries ``timeout``, so the
supervisor starts attempt 2, which reads ``DISPATCH_ATTEMPT=2`` and succeeds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.adapters.slurm import SlurmAdapter
from dispatch.clock import RandomIds, SystemClock
from dispatch.model import Cause, State, parse_spec
from dispatch.records import SqliteRecords
from dispatch.supervise import Supervisor
from tests.slurm.conftest import run
from tests.slurm.realslurm import RealSlurm

#: attempt 1 outlives its limit; every later attempt prints who it is and succeeds
SLOW_FIRST = (
    'echo "attempt=$DISPATCH_ATTEMPT rank=$RANK"; [ "$DISPATCH_ATTEMPT" != 1 ] || sleep 600'
)
RETRY_TIMEOUT = {
    "rules": [
        {"on": ["timeout"], "action": "retry", "limit": 1, "backoff": {"initial": "1s"}},
        {"on": ["app_error"], "action": "fail"},
    ],
    "unmatched": "fail",
}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_timed_out_attempt_is_retried_as_attempt_2_which_succeeds(
    slurm: SlurmAdapter, real_slurm: RealSlurm, tmp_path: Path
) -> None:
    clock = SystemClock()
    records = SqliteRecords(tmp_path / "records.db", clock=clock, ids=RandomIds())
    spec = parse_spec(
        {
            "name": "retry",
            "cluster": "testslurm",
            "nodes": 2,
            "command": ["sh", "-c", SLOW_FIRST],
            "timeLimit": "30s",
            "recovery": RETRY_TIMEOUT,
        }
    )
    job = records.create_job(spec)
    supervisor = Supervisor(records, lambda _: slurm, clock, "slurm-test", poll_interval=1.0)

    async def scenario() -> list[str]:
        await supervisor.drive(job.id)
        second = records.attempts(job.id)[1].handle
        assert second is not None
        return [line async for line in slurm.read_output(second)]

    printed = run(scenario())

    record = records.get_job(job.id)
    assert (record.state, record.cause) == (State.SUCCEEDED, None)
    attempts = records.attempts(job.id)
    assert [a.attempt for a in attempts] == [1, 2]
    ends = [(a.outcome.state, a.outcome.cause) for a in attempts if a.outcome is not None]
    assert ends == [(State.FAILED, Cause.TIMEOUT), (State.SUCCEEDED, None)]
    decisions = [e.data for e in records.log(job.id) if e.kind == "decision"]
    assert [d["action"] for d in decisions] == ["start", "wait", "start", "finish"]
    assert "retry 1 of 1" in decisions[2]["reason"]
    assert sorted(printed) == ["[rank 0] attempt=2 rank=0", "[rank 1] attempt=2 rank=1"]

    # Slurm's own view: one job per attempt, named after it; attempt 1 ended in TIMEOUT
    natives = [a.handle.native for a in attempts if a.handle is not None]
    listed = real_slurm.run("squeue", "-h", "-t", "all", "-j", ",".join(natives), "-o", "%j %T")
    assert sorted(listed.stdout.split("\n")[:-1]) == [
        f"dispatch-{job.id}-a1 TIMEOUT",
        f"dispatch-{job.id}-a2 COMPLETED",
    ]
    kinds = {e.kind for e in records.evidence(job.id, 1)}
    assert "squeue" in kinds  # the evidence names the tool that answered

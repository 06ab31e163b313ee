"""The real Supervisor driving jobs on the real two-node Slurm: recovery policy as data.

Two jobs are supervised at once by the long-lived loop (``Supervisor.run``: one watch stream
for the cluster, no per-job polling). In each, attempt 1 fails in a way its policy retries,
and attempt 2 reads ``DISPATCH_ATTEMPT=2`` and succeeds:

* ``slow``: attempt 1 runs into its time limit (Slurm's TIMEOUT, 60-100 s after the start:
  the limit is rounded up to a minute and checked about every 30 s);
* ``flaky``: attempt 1 exits 3 on rank 1 (``app_error``, a rule that retries it).

The second job runs during the first one's wait, so the test costs one time-out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dispatch.adapters.slurm.commands import (
    build_json_formats_command,
    build_squeue_json_command,
)
from dispatch.clock import RandomIds, SystemClock
from dispatch.config import ClusterConfig
from dispatch.model import Cause, State, parse_spec
from dispatch.records import SqliteRecords
from dispatch.supervise import Supervisor
from tests.slurm.conftest import run
from tests.slurm.realslurm import RealSlurm
from tests.slurm.test_real_slurm import recording_adapter

#: attempt 1 outlives its limit; later attempts print who they are and succeed
SLOW_FIRST = (
    'echo "attempt=$DISPATCH_ATTEMPT rank=$RANK"; [ "$DISPATCH_ATTEMPT" != 1 ] || sleep 600'
)
#: attempt 1 fails on rank 1 with exit code 3; later attempts succeed
FAILS_FIRST = (
    'echo "attempt=$DISPATCH_ATTEMPT rank=$RANK"; '
    '[ "$DISPATCH_ATTEMPT$RANK" != 11 ] || exit 3; [ "$DISPATCH_ATTEMPT" != 1 ] || sleep 30'
)


def _retry(cause: str) -> Mapping[str, Any]:
    return {
        "rules": [
            {"on": [cause], "action": "retry", "limit": 1, "backoff": {"initial": "2s"}},
            {"on": ["out_of_memory"], "action": "fail"},
        ],
        "unmatched": "fail",
    }


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_failed_attempts_are_retried_as_attempt_2_which_succeeds(
    slurm_cluster: ClusterConfig, real_slurm: RealSlurm, tmp_path: Path
) -> None:
    clock = SystemClock()
    records = SqliteRecords(tmp_path / "records.db", clock=clock, ids=RandomIds())
    slurm, runner = recording_adapter(slurm_cluster, tmp_path)
    base = {"cluster": "testslurm", "nodes": 2, "procsPerNode": 1}
    slow = records.create_job(
        parse_spec(
            {
                **base,
                "name": "slow",
                "command": ["sh", "-c", SLOW_FIRST],
                "timeLimit": "30s",
                "recovery": _retry("timeout"),
            }
        )
    )
    flaky = records.create_job(
        parse_spec(
            {
                **base,
                "name": "flaky",
                "command": ["sh", "-c", FAILS_FIRST],
                "recovery": _retry("app_error"),
            }
        )
    )
    supervisor = Supervisor(records, lambda _: slurm, clock, "slurm-test", poll_interval=1.0)

    async def scenario() -> dict[str, list[str]]:
        await supervisor.run(asyncio.Event(), until_idle=True)
        printed = {}
        for job in (slow, flaky):
            second = records.attempts(job.id)[1].handle
            assert second is not None
            printed[job.id] = sorted([line async for line in slurm.read_output(second)])
        return printed

    printed = run(scenario())

    for job, cause in ((slow, Cause.TIMEOUT), (flaky, Cause.APP_ERROR)):
        record = records.get_job(job.id)
        assert (record.state, record.cause) == (State.SUCCEEDED, None)
        attempts = records.attempts(job.id)
        assert [a.attempt for a in attempts] == [1, 2]
        ends = [(a.outcome.state, a.outcome.cause) for a in attempts if a.outcome is not None]
        assert ends == [(State.FAILED, cause), (State.SUCCEEDED, None)]
        first, second = attempts
        assert first.ended_at is not None
        assert second.created_at >= first.ended_at + 2  # the rule's backoff
        decisions = [e.data for e in records.log(job.id) if e.kind == "decision"]
        acted = [(d["action"], d["attempt"]) for d in decisions if d["action"] != "wait"]
        assert acted == [("start", 1), ("start", 2), ("finish", 2)]
        assert "retry 1 of 1" in next(d["reason"] for d in decisions if d["attempt"] == 2)
        assert printed[job.id] == ["[rank 0] attempt=2 rank=0", "[rank 1] attempt=2 rank=1"]
        # Slurm's own view: one job per attempt, named after it
        natives = ",".join(a.handle.native for a in attempts if a.handle is not None)
        listed = real_slurm.run("squeue", "-h", "-t", "all", "-j", natives, "-o", "%j %T")
        assert sorted(listed.stdout.split()) == sorted(
            [f"dispatch-{job.id}-a1", first_state(cause), f"dispatch-{job.id}-a2", "COMPLETED"]
        )

    flaky_failure = records.attempts(flaky.id)[0].outcome
    assert flaky_failure is not None and flaky_failure.first_failure is not None
    assert (flaky_failure.first_failure.exit_code, flaky_failure.first_failure.rank) == (3, 1)
    # supervised through the cluster's watch stream: job states are read for all jobs at once
    # (name lookups belong to start, which finds an attempt's Slurm job again; the formats
    # listing to the probe)
    listing = build_json_formats_command()
    reads = [
        a
        for a in runner.argvs
        if a[0] == "squeue" and not any("--name" in x for x in a) and a != listing
    ]
    states = build_squeue_json_command(run(slurm.facts()).json_argument)
    assert reads and all(argv == states for argv in reads)
    per_job = [
        a for a in runner.argvs if a[0] == "sacct" or a[1:4] == ["--oneliner", "show", "job"]
    ]
    assert per_job == []


def first_state(cause: Cause) -> str:
    return {Cause.TIMEOUT: "TIMEOUT", Cause.APP_ERROR: "FAILED"}[cause]

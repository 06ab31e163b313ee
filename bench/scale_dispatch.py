"""Child process of the scale benchmark: dispatch's real Supervisor + KubeflowAdapter, one
process, driving N jobs on the emulated cluster until every one has ended.

    python -m bench.scale_dispatch PLAN.json OUT.json

PLAN: {"kubeconfig", "namespace", "state", "pollInterval", "leaseTtl", "owner", "create",
"jobs": [{"name", "scenario"}]}; with ``create`` false the jobs already in the records are
supervised (a supervisor restarted after a kill).
OUT: per job the TrainJob name, final state and cause, and when the supervisor recorded the
attempt's end (the records' log time, wall clock); plus this process's CPU seconds and peak
RSS. The jobs are put in the records first (as ``dispatch submit`` does), then one supervisor
starts and supervises them all (as ``dispatch supervise --exit-when-idle`` does).
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.clock import SystemClock
from dispatch.config import ClusterConfig
from dispatch.model import parse_spec
from dispatch.records import SqliteRecords, database_path
from dispatch.supervise import Supervisor

CLUSTER = "kf"
RUNTIME = {"kind": "ClusterTrainingRuntime", "name": "dispatch-kind"}


def job_spec(name: str, scenario: str) -> dict[str, Any]:
    return {
        "name": name,
        "cluster": CLUSTER,
        "runtime": RUNTIME,
        "nodes": 1,
        "command": ["python", "train.py"],
        "env": {"EMULATOR_SCENARIO": scenario},
        "recovery": {"rules": [], "unmatched": "fail"},
    }


def ended_at(records: SqliteRecords, job_id: str) -> float | None:
    """When the supervisor first recorded a terminal outcome of the job's attempt."""
    for entry in records.log(job_id):
        if entry.kind == "attempt" and entry.data.get("state") in (
            "succeeded",
            "failed",
            "cancelled",
        ):
            return entry.at
    return None


async def supervise(plan: dict[str, Any]) -> dict[str, Any]:
    clock = SystemClock()
    state = Path(plan["state"])
    records = SqliteRecords(database_path(state), clock=clock)
    settings = {"kubeconfig": plan["kubeconfig"], "namespace": plan["namespace"]}
    adapter = KubeflowAdapter(
        ClusterConfig(name=CLUSTER, adapter="kubeflow", settings=settings),
        AdapterContext(state_dir=state / "clusters" / CLUSTER, clock=clock),
    )
    if plan.get("create", True):
        for j in plan["jobs"]:
            records.create_job(parse_spec(job_spec(j["name"], j["scenario"])))
    jobs = sorted((r.job for r in records.list_jobs()), key=lambda job: job.spec.name)
    supervisor = Supervisor(
        records,
        lambda _: adapter,
        clock,
        plan.get("owner", "bench"),
        poll_interval=plan["pollInterval"],
        lease_ttl=plan.get("leaseTtl", 30.0),
    )
    passes = 0

    def count(_: object) -> None:
        nonlocal passes
        passes += 1

    began = time.time()
    await supervisor.run(asyncio.Event(), on_step=count, until_idle=True)
    finished = time.time()
    out = []
    for job in jobs:
        record = records.get_job(job.id)
        attempts = records.attempts(job.id)
        out.append(
            {
                "name": job.spec.name,
                "trainJob": attempts[0].handle.native if attempts and attempts[0].handle else None,
                "attempts": len(attempts),
                "state": record.state.value,
                "cause": record.cause.value if record.cause else None,
                "reportedAt": ended_at(records, job.id),
            }
        )
    records.close()
    return {"began": began, "finished": finished, "passes": passes, "jobs": out}


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    profiler = cProfile.Profile() if plan.get("profile") else None
    if profiler is not None:
        profiler.enable()
    result = asyncio.run(supervise(plan))
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(plan["profile"])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpuSeconds"] = usage.ru_utime + usage.ru_stime
    result["peakRssMiB"] = usage.ru_maxrss / 1024  # KiB on Linux
    Path(sys.argv[2]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()

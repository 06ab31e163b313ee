"""Dump a simulation where it stands: its trace, what the store recorded, and the ground truth.

``dump(simulation, folder)`` writes ``summary.json`` (seed, config, result, the command that
replays it), ``trace.txt`` (one line per step), ``records.json`` (every job with its attempts,
log, evidence keys and lease, and the open intents) and ``truth.json`` (every execution the
memory scheduler holds, with its status at the simulation's current time).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dispatch.sim.simulation import Simulation


def replay_command(simulation: Simulation) -> str:
    """The ``dispatch sim`` command line that replays this run to where it stands."""
    config = simulation.config.describe()
    parts = [
        "dispatch sim",
        f"--seed {simulation.seed}",
        f"--steps {config['steps']}",
        f"--shape {config['shape']}",
        f"--supervisors {config['supervisors']}",
        f"--quiet-steps {config['quietSteps']}",
    ]
    if config["broken"]:
        parts.append(f"--broken {config['broken']}")
    parts.append(f"--stop-at {simulation.step}")
    return " ".join(parts)


def records_snapshot(simulation: Simulation) -> dict[str, Any]:
    store = simulation.store
    jobs = []
    for record in sorted(store.list_jobs(), key=lambda r: r.id):
        lease = store.lease(record.id)
        jobs.append(
            {
                "id": record.id,
                "scenario": record.job.spec.env.get("MEMORY_SCENARIO"),
                "recovery": record.job.spec.recovery.model_dump(mode="json"),
                "state": record.state.value,
                "cause": record.cause.value if record.cause else None,
                "summary": record.summary,
                "cancel": None
                if record.cancel is None
                else {"actor": record.cancel.actor, "reason": record.cancel.reason},
                "releases": record.release_count,
                "lease": None
                if lease is None
                else {"owner": lease.owner, "expiresAt": lease.expires_at, "epoch": lease.epoch},
                "attempts": [
                    {
                        "attempt": a.attempt,
                        "createdAt": a.created_at,
                        "handle": a.handle.to_json() if a.handle else None,
                        "outcome": a.outcome.to_json() if a.outcome else None,
                        "endedAt": a.ended_at,
                        "evidence": [e.key for e in store.evidence(record.id, a.attempt)],
                    }
                    for a in store.attempts(record.id)
                ],
                "log": [
                    {"seq": e.seq, "at": e.at, "kind": e.kind, "data": dict(e.data)}
                    for e in store.log(record.id)
                ],
            }
        )
    intents = [
        {
            "id": i.id,
            "job": i.job_id,
            "attempt": i.attempt,
            "operation": i.operation,
            "owner": i.owner,
            "createdAt": i.created_at,
            "data": dict(i.data),
        }
        for i in store.open_intents()
    ]
    return {"jobs": jobs, "openIntents": intents}


def truth_snapshot(simulation: Simulation) -> dict[str, Any]:
    scheduler, now = simulation.scheduler, simulation.clock.now()
    executions = []
    for execution in scheduler.executions.values():
        status = execution.status(now)
        executions.append(
            {
                "name": execution.name,
                "native": execution.native,
                "job": execution.job_id,
                "attempt": execution.attempt,
                "createdAt": execution.created_at,
                "script": execution.script.result.value,
                "cancelledAt": execution.cancelled_at,
                "cancelledBy": execution.cancelled_by or None,
                "state": status.state.value,
                "cause": status.cause.value if status.cause else None,
                "endedAt": status.ended_at,
                "runs": status.runs,
            }
        )
    return {
        "now": now,
        "executions": executions,
        "creations": {f"{j}/{a}": n for (j, a), n in scheduler.creations.items()},
        "calls": dict(scheduler.calls),
    }


def dump(simulation: Simulation, folder: Path) -> list[Path]:
    """Write the four files into ``folder`` (created); returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = {
        "seed": simulation.seed,
        "step": simulation.step,
        "config": simulation.config.describe(),
        "result": simulation.result.to_json(),
        "replay": replay_command(simulation),
    }
    files = {
        "summary.json": json.dumps(summary, indent=2),
        "trace.txt": "\n".join(simulation.trace) + "\n",
        "records.json": json.dumps(records_snapshot(simulation), indent=2, default=str),
        "truth.json": json.dumps(truth_snapshot(simulation), indent=2, default=str),
    }
    written = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text)
        written.append(path)
    return written

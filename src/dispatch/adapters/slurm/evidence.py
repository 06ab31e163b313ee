"""Evidence records of what the Slurm adapter saw: one per tool answer, one per batch output.

``kind`` and ``data.source`` name the tool that answered (sacct, squeue, scontrol, jobcomp), so
an outcome always says whether accounting was used. Pure; no I/O.
"""

from __future__ import annotations

from dispatch.adapters.slurm.native import SlurmJob
from dispatch.adapters.slurm.output import BatchOutput
from dispatch.model import AttemptHandle, Evidence


def job_evidence(job: SlurmJob, now: float) -> Evidence:
    """The fact one tool reported about a job; the same state seen twice has the same key."""
    states = "+".join(job.states)
    return Evidence(
        kind=str(job.source),
        key=f"{job.source}:{job.job_id}:{states}:{job.reason}",
        observed_at=now,
        summary=f"{job.source}: job {job.job_id} {states} ({job.reason or 'no reason'}), "
        f"exit {job.exit}, derived {job.derived_exit}",
        data={
            "source": str(job.source),
            "jobId": job.job_id,
            "name": job.name,
            "states": list(job.states),
            "reason": job.reason,
            "exitCode": str(job.exit) if job.exit else None,
            "derivedExitCode": str(job.derived_exit) if job.derived_exit else None,
            "nodes": job.nodes,
            "comment": job.comment,
            "cancelledBy": job.cancelled_by,
            "steps": [
                {"id": s.step_id, "state": s.state, "exitCode": str(s.exit), "nodes": s.nodes}
                for s in job.steps
            ],
            "start": job.start_time,
            "end": job.end_time,
        },
    )


def output_evidence(handle: AttemptHandle, output: BatchOutput, now: float) -> Evidence:
    """srun's failure lines from the batch output, kept because the file may be deleted."""
    return Evidence(
        kind="batch-output",
        key=f"batch-output:{handle.native}",
        observed_at=now,
        summary=f"srun reported {len(output.failures)} failed task(s)"
        + (", out of memory" if output.out_of_memory else "")
        + "".join(f", node failure on {n.node}" for n in output.node_failures),
        data={
            "failures": [f.line for f in output.failures],
            "outOfMemory": output.out_of_memory,
            "launchFailed": output.launch_failed,
            "nodeFailures": [n.line for n in output.node_failures],
        },
    )

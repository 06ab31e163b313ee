"""Slurm job states -> dispatch state and cause: annotated tables and one derivation.

The tables are the whole mapping; ``derive_outcome`` only refines a cause with evidence the
state alone does not carry (an out-of-memory step inside a FAILED job, who cancelled, which
task failed first, which node was lost). Names follow https://slurm.schedmd.com/job_state_codes.html. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from dispatch.adapters.slurm.native import ExitStatus, SlurmJob, SlurmStep, expand_hostlist
from dispatch.adapters.slurm.output import BatchOutput
from dispatch.model import Cause, Failure, Outcome, State


@dataclass(frozen=True, slots=True)
class Mapped:
    """What one native state means for dispatch, before refinement."""

    state: State
    cause: Cause | None = None


#: Base states (a job has exactly one).
BASE_STATES: Mapping[str, Mapped] = MappingProxyType(
    {
        # waiting for resources or priority; HELD instead when the reason is a hold (below)
        "PENDING": Mapped(State.QUEUED),
        # has its allocation and the batch script started
        "RUNNING": Mapped(State.RUNNING),
        # allocation kept, processes stopped by the scheduler (gang scheduling, admin)
        "SUSPENDED": Mapped(State.RUNNING),
        # every step exited 0 on every node
        "COMPLETED": Mapped(State.SUCCEEDED),
        # scancel by a user or an administrator (dispatch names itself in the job's comment)
        "CANCELLED": Mapped(State.CANCELLED, Cause.CANCELLED),
        # the batch script exited non-zero; refined to out_of_memory / start_failure below
        "FAILED": Mapped(State.FAILED, Cause.APP_ERROR),
        # ran past --time (the spec's timeLimit, rounded up to a minute)
        "TIMEOUT": Mapped(State.FAILED, Cause.TIMEOUT),
        # a node of the allocation failed or stopped responding
        "NODE_FAIL": Mapped(State.FAILED, Cause.NODE_LOST),
        # preempted; dispatch submits with --no-requeue, so preemption ends the attempt
        "PREEMPTED": Mapped(State.FAILED, Cause.PREEMPTED),
        # a node could not be booted or configured for the job (hardware, cloud node)
        "BOOT_FAIL": Mapped(State.FAILED, Cause.NODE_LOST),
        # passed its --deadline before it could finish
        "DEADLINE": Mapped(State.FAILED, Cause.TIMEOUT),
        # the batch step itself exceeded its memory limit (cgroup)
        "OUT_OF_MEMORY": Mapped(State.FAILED, Cause.OUT_OF_MEMORY),
    }
)

#: State flags that decide over the base state while set, in Slurm's own order of precedence
#: (``job_state_string``). Flags not listed (e.g. UPDATE_DB) leave the base state in charge.
FLAG_STATES: Mapping[str, Mapped] = MappingProxyType(
    {
        # burst-buffer stage-out after the end: processes are done, data is not yet
        "STAGE_OUT": Mapped(State.RUNNING),
        # ended, but processes are still being cleaned up: not over until they are gone
        "COMPLETING": Mapped(State.RUNNING),
        # allocated, nodes being booted or configured for it
        "CONFIGURING": Mapped(State.QUEUED),
        # waiting for nodes to power up
        "POWER_UP_NODE": Mapped(State.QUEUED),
        # allocation being resized
        "RESIZING": Mapped(State.RUNNING),
        # Slurm requeued the job: its work would run again inside this attempt
        "REQUEUED": Mapped(State.FAILED, Cause.UNPLANNED_RECOVERY),
        # requeued in a federation: same as REQUEUED
        "REQUEUE_FED": Mapped(State.FAILED, Cause.UNPLANNED_RECOVERY),
        # requeued and held: same as REQUEUED
        "REQUEUE_HOLD": Mapped(State.FAILED, Cause.UNPLANNED_RECOVERY),
        # requeued and held by a site epilog after a special exit value of the job itself
        "SPECIAL_EXIT": Mapped(State.FAILED, Cause.APP_ERROR),
        # processes stopped with SIGSTOP, allocation kept
        "STOPPED": Mapped(State.RUNNING),
        # federation: the sibling job started on another cluster, this one was revoked
        "REVOKED": Mapped(State.FAILED, Cause.UNKNOWN),
        # held because its advanced reservation was deleted
        "RESV_DEL_HOLD": Mapped(State.HELD),
        # being sent a signal (e.g. --signal before the time limit); still running
        "SIGNALING": Mapped(State.RUNNING),
        # the job could not be launched on its nodes
        "LAUNCH_FAILED": Mapped(State.FAILED, Cause.START_FAILURE),
        # node reconfiguration for the job failed
        "RECONFIG_FAIL": Mapped(State.FAILED, Cause.START_FAILURE),
    }
)

#: A native state nobody listed: keep the attempt alive (never report an end we cannot prove,
#: which could start a second execution); the raw state is in the summary and evidence.
UNKNOWN_STATE = Mapped(State.RUNNING)

#: Pending reasons that mean "held" (scontrol hold / sbatch --hold, or an administrator).
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})

#: Reasons that mean the job could not be launched at all.
LAUNCH_FAILURE_REASONS = frozenset({"JobLaunchFailure", "LaunchFailRequeue"})

#: The dispatch states that end an attempt.
TERMINAL = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})

#: Comment dispatch writes on a job before cancelling it: ``dispatch-cancel:<actor>``.
CANCEL_COMMENT = "dispatch-cancel:"


def map_state(job: SlurmJob) -> Mapped:
    """The table entry that decides this job's coarse state (a flag first, then the base)."""
    for flag in FLAG_STATES:
        if flag in job.flags or job.state == flag:
            return FLAG_STATES[flag]
    mapped = BASE_STATES.get(job.state, UNKNOWN_STATE)
    if mapped.state is State.QUEUED and job.reason in HELD_REASONS:
        return Mapped(State.HELD)
    return mapped


def derive_outcome(job: SlurmJob, output: BatchOutput | None = None) -> Outcome:
    """Dispatch's outcome for one Slurm job, with ``output`` (the batch script's output) when
    it has been read. Never raises for unusual input: unknown states stay non-terminal."""
    mapped = map_state(job)
    where = f"Slurm job {job.job_id} ({job.source})"
    if mapped.state is State.SUCCEEDED:
        return Outcome(State.SUCCEEDED, summary=f"{where} COMPLETED")
    if mapped.state is State.CANCELLED:
        return Outcome(State.CANCELLED, Cause.CANCELLED, summary=f"{where} {_cancelled(job)}")
    if mapped.state is not State.FAILED:
        return Outcome(mapped.state, summary=_progress(job, where))
    cause = mapped.cause or Cause.UNKNOWN
    if cause is Cause.APP_ERROR and job.state == "FAILED":
        cause = _refine_failed(job, output)
    lost = _lost_node(job, output) if cause is Cause.NODE_LOST else None
    failure = lost or _first_failure(job, output)
    explained = _explain(cause, job, failure) + (f" ({lost.where})" if lost else "")
    summary = f"{where} {_shown_state(job)}: {explained}"
    return Outcome(State.FAILED, cause, summary=summary, first_failure=failure)


def is_terminal(outcome: Outcome) -> bool:
    return outcome.state in TERMINAL


def _shown_state(job: SlurmJob) -> str:
    return "+".join(job.states) if job.states else "UNKNOWN"


def _progress(job: SlurmJob, where: str) -> str:
    reason = f" ({job.reason})" if job.reason and job.reason != "None" else ""
    unknown = "" if _known(job) else " (a state dispatch does not know; kept alive)"
    return f"{where} {_shown_state(job)}{reason}{unknown}"


def _known(job: SlurmJob) -> bool:
    """Whether a table maps this job; 22.05 names a flag such as COMPLETING as *the* state."""
    return any(s in BASE_STATES or s in FLAG_STATES for s in (job.state, *job.flags))


def _cancelled(job: SlurmJob) -> str:
    if job.comment.startswith(CANCEL_COMMENT):
        return f"CANCELLED by {job.comment[len(CANCEL_COMMENT) :] or 'dispatch'} (through dispatch)"
    if job.cancelled_by:
        return f"CANCELLED by uid {job.cancelled_by} outside dispatch"
    return "CANCELLED outside dispatch (scancel or an administrator)"


def _oom_seen(job: SlurmJob, output: BatchOutput | None) -> bool:
    exits = (job.exit, job.derived_exit, *(s.exit for s in job.steps))
    return (
        any(e is not None and e.out_of_memory for e in exits)
        or any(s.state.startswith("OUT_OF_ME") for s in job.steps)
        or (output is not None and output.out_of_memory)
    )


def _refine_failed(job: SlurmJob, output: BatchOutput | None) -> Cause:
    """FAILED says only "non-zero exit"; the steps and the output say why."""
    if _oom_seen(job, output):
        # an srun step killed by the cgroup OOM handler: the job is FAILED 1:0 while the
        # step is OUT_OF_MEMORY and the derived exit code is 0:125
        return Cause.OUT_OF_MEMORY
    if job.reason in LAUNCH_FAILURE_REASONS or (output is not None and output.could_not_start):
        return Cause.START_FAILURE
    return Cause.APP_ERROR


def _first_failure(job: SlurmJob, output: BatchOutput | None) -> Failure | None:
    nodes = expand_hostlist(job.nodes)
    first = output.first_failure() if output is not None else None
    if first is not None:
        return Failure(
            rank=first.task,
            node=nodes.index(first.node) if first.node in nodes else None,
            exit_code=first.exit_code,
            signal=first.signal,
            where=first.node,
            message=first.line,
        )
    failed_step = _first_failed_step(job.steps)
    if failed_step is not None and failed_step.exit is not None:
        step_nodes = expand_hostlist(failed_step.nodes)
        node = step_nodes[0] if len(step_nodes) == 1 else None
        return Failure(
            node=nodes.index(node) if node in nodes else None,
            exit_code=failed_step.exit.code or None,
            signal=failed_step.exit.signal or None,
            where=node,
            message=f"step {failed_step.step_id} {failed_step.state} {failed_step.exit}",
        )
    exit = _job_exit(job)
    if exit is None:
        return None
    # Without the output or the steps, which node failed is not known: only the exit status.
    return Failure(
        exit_code=exit.code or None,
        signal=exit.signal or None,
        message=f"exit code {job.exit}, highest step exit code {job.derived_exit}",
    )


def _lost_node(job: SlurmJob, output: BatchOutput | None) -> Failure | None:
    """The node srun reported failed under the step, the first when several did; the exit
    statuses of a job ended by a node failure tell nothing about it."""
    if output is None or not output.node_failures:
        return None
    lost = output.node_failures[0]
    nodes = expand_hostlist(job.nodes)
    return Failure(
        node=nodes.index(lost.node) if lost.node in nodes else None,
        where=lost.node,
        message=lost.line,
    )


def _first_failed_step(steps: Sequence[SlurmStep]) -> SlurmStep | None:
    """The first step (in Slurm's order) that did not complete, ignoring the batch step,
    which fails only because an srun step did."""
    failed = [s for s in steps if s.state not in ("COMPLETED", "RUNNING", "PENDING")]
    own = [s for s in failed if not s.step_id.endswith(("batch", "extern"))]
    candidates = own or failed
    return candidates[0] if candidates else None


def _job_exit(job: SlurmJob) -> ExitStatus | None:
    """The most telling exit status: the highest step's (derived) when set, else the job's."""
    if job.derived_exit is not None and not job.derived_exit.ok:
        return job.derived_exit
    return job.exit


def _explain(cause: Cause, job: SlurmJob, failure: Failure | None) -> str:
    if cause is Cause.OUT_OF_MEMORY:
        return "a step exceeded its memory limit"
    if cause is Cause.TIMEOUT:
        return "reached its time limit" if job.state == "TIMEOUT" else "passed its deadline"
    if cause is Cause.NODE_LOST:
        return "a node of the allocation failed"
    if cause is Cause.PREEMPTED:
        return "preempted by the scheduler"
    if cause is Cause.UNPLANNED_RECOVERY:
        return "Slurm requeued the job inside the attempt"
    if cause is Cause.START_FAILURE:
        return "the job could not be launched"
    if failure is not None and failure.exit_code is not None:
        where = f" on {failure.where}" if failure.where else ""
        rank = f"task {failure.rank}" if failure.rank is not None else "the job"
        return f"{rank} exited with code {failure.exit_code}{where}"
    return "exited non-zero"

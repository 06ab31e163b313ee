"""The job checks ``start`` runs after the runtime rules (spec/kubeflow-adapter.md, section 2).

``check_job(spec, verdict, trainjob)`` returns every reason the job cannot run on this
runtime: ``procs-per-node``, ``reserved-env`` and ``name-length``. They run beside the runtime
rules (a refused runtime still gets them, so one ``Unsupported`` names everything); a check
that needs the runtime is skipped when it was not found. Pure and total: never raises.
"""

from __future__ import annotations

from dispatch.adapters.kubeflow.planning.names import MAX_NAME, longest_pod_name
from dispatch.adapters.kubeflow.planning.rules import RuntimeVerdict
from dispatch.model import JobSpec, Reason

PROCS_PER_NODE_RULE = "procs-per-node"
RESERVED_ENV = "reserved-env"
NAME_LENGTH = "name-length"

#: every job check id, in the order reasons are reported
JOB_CHECKS = (PROCS_PER_NODE_RULE, RESERVED_ENV, NAME_LENGTH)

#: variables Trainer's torch plugin sets on the node container (its webhook rejects them)
TRAINER_RESERVED_ENV = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
)
RESERVED_PREFIX = "DISPATCH_"


def check_job(spec: JobSpec, verdict: RuntimeVerdict, trainjob: str) -> list[Reason]:
    """Every job-check reason for running ``spec`` as TrainJob ``trainjob`` on this runtime."""
    reasons: list[Reason] = []
    if spec.procs_per_node is not None and verdict.found and not verdict.procs_per_node.supported:
        reasons.append(
            Reason(
                PROCS_PER_NODE_RULE,
                f"the job asks for procsPerNode: {spec.procs_per_node}, but "
                f"{verdict.procs_per_node.reason}",
            )
        )
    reserved = sorted(
        key
        for key in spec.env
        if key.upper().startswith(RESERVED_PREFIX) or key in TRAINER_RESERVED_ENV
    )
    if reserved:
        reasons.append(
            Reason(
                RESERVED_ENV,
                f"the job sets {', '.join(reserved)}: DISPATCH_* variables are dispatch's "
                "identity and PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, "
                "PET_MASTER_PORT are set by Trainer; rename them",
            )
        )
    reasons += _name_length(spec, verdict, trainjob)
    return reasons


def _name_length(spec: JobSpec, verdict: RuntimeVerdict, trainjob: str) -> list[Reason]:
    if len(trainjob) > MAX_NAME:
        return [
            Reason(
                NAME_LENGTH,
                f"the TrainJob name {trainjob!r} is {len(trainjob)} characters; at most "
                f"{MAX_NAME} are allowed",
            )
        ]
    reasons: list[Reason] = []
    for job in verdict.jobs:
        pods = spec.nodes if job.is_trainer else job.completions
        longest = longest_pod_name(trainjob, job.name, job.replicas, pods)
        if len(longest) > MAX_NAME:
            over = len(longest) - MAX_NAME
            reasons.append(
                Reason(
                    NAME_LENGTH,
                    f"the pod names of replicated job {job.name!r} would reach {len(longest)} "
                    f"characters (e.g. {longest!r}), over the limit of {MAX_NAME}; shorten the "
                    f"job name by {over} character{'s' if over != 1 else ''} or use fewer nodes",
                )
            )
    return reasons

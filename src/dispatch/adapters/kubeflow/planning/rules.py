"""The runtime rules (spec/kubeflow-adapter.md, section 1) as one pure function.

``check_runtime(raw, settings)`` evaluates *every* rule over a raw runtime object (a dict as
the API or a YAML file gives it) and the cluster's settings and returns a ``RuntimeVerdict``:
every reason found (never only the first), the ProcsPerNode capability answer, and the
weakened-identity reason when ``allowRankRestart`` waives the ``rank-restart`` rule.

Guarantees: no I/O; deterministic; never raises on any input (a malformed shape is a reason
under the rule that reads it); reasons come in the order of ``RULES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.objects import as_list, dig, is_int, names_of, show
from dispatch.adapters.kubeflow.planning.runtime import (
    ANCESTOR_LABEL,
    TRAINER_STEP,
    ReplicatedJob,
    env_injection_targets,
    ml_policies,
    replicated_jobs,
    runtime_identity,
)
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings
from dispatch.adapters.kubeflow.planning.trainer_rules import (
    BACKOFF_LIMIT,
    NODE_CONTAINER_RULE,
    POD_FAILURE_ACTION,
    PUBLISH_INIT_CONTAINER,
    RANK_RESTART,
    RESTART_POLICY,
    check_trainer_job,
)
from dispatch.model import Capability, Reason

ALLOW_LIST = "allow-list"
NOT_FOUND = "not-found"
ML_POLICY = "ml-policy"
REPLICATED_JOBS = "replicated-jobs"
JOBSET_FAILURE_POLICY = "jobset-failure-policy"
POD_GROUP_POLICY = "pod-group-policy"

#: every runtime rule id, in the order reasons are reported
RULES = (
    ALLOW_LIST,
    NOT_FOUND,
    ML_POLICY,
    REPLICATED_JOBS,
    RESTART_POLICY,
    BACKOFF_LIMIT,
    RANK_RESTART,
    POD_FAILURE_ACTION,
    NODE_CONTAINER_RULE,
    PUBLISH_INIT_CONTAINER,
    JOBSET_FAILURE_POLICY,
    POD_GROUP_POLICY,
)

PROCS_PER_NODE = "ProcsPerNode"
#: ML policies dispatch runs; a runtime naming none of them is a plain runtime. In each, only
#: the trainer job's pods start ranks, and nothing restarts them if the trainer job restarts
#: nothing: torch, JAX and XGBoost start one process group per trainer pod; MPI's launcher
#: (the trainer job) starts every rank through mpirun once, the ``node`` job's pods only run
#: sshd for it.
SUPPORTED_POLICIES = ("torch", "mpi", "jax", "xgboost")
#: why a policy is not run
UNSUPPORTED_POLICY_WHY = {
    "flux": "Flux runs its own resource manager inside the pods, which starts and restarts "
    "ranks where dispatch cannot see them",
}
#: the MPI implementations Trainer v2.3 builds (``mlPolicy.mpi.mpiImplementation``)
MPI_IMPLEMENTATIONS = ("OpenMPI",)
#: the MPI runtime's worker job, which runs sshd for the launcher (Trainer's ``node``)
MPI_NODE_JOB = "node"
#: the gang schedulers Trainer v2.3 builds a PodGroup for (``spec.podGroupPolicy``)
POD_GROUP_POLICIES = ("coscheduling", "volcano")
#: policies whose TrainJob ``numProcPerNode`` Trainer uses (torch: torchrun; MPI: slots)
PROCS_PER_NODE_POLICIES = ("torch", "mpi")


@dataclass(frozen=True, slots=True)
class RuntimeVerdict:
    """What the runtime rules say about one runtime under one cluster's settings."""

    kind: str
    name: str
    reasons: tuple[Reason, ...]
    procs_per_node: Capability
    weakened_identity: str | None
    #: True when the runtime has ``mlPolicy.torch`` (Trainer's torch plugin applies)
    torch: bool
    #: the runtime's replicated jobs as read (empty when not found or unreadable)
    jobs: tuple[ReplicatedJob, ...]
    #: False when the runtime does not exist (rule ``not-found``)
    found: bool = True

    @property
    def accepted(self) -> bool:
        return not self.reasons

    @property
    def trainer_job(self) -> ReplicatedJob | None:
        """The one trainer job, when there is exactly one."""
        trainers = [job for job in self.jobs if job.is_trainer]
        return trainers[0] if len(trainers) == 1 else None

    def to_json(self) -> dict[str, Any]:
        """The object ``dispatch check-runtime --output json`` prints (spec section 4)."""
        return {
            "runtime": {"kind": self.kind, "name": self.name},
            "accepted": self.accepted,
            "reasons": [{"rule": r.rule, "message": r.message} for r in self.reasons],
            "weakenedIdentity": self.weakened_identity,
            "capabilities": {PROCS_PER_NODE: self.procs_per_node.to_json()},
        }


def weakened_identity_text(*, ignore_rule: bool, per_index: bool) -> str | None:
    """The exact weakened-identity reason for what the trainer job states, or None."""
    found = [
        text
        for text, present in (
            ("a podFailurePolicy Ignore rule", ignore_rule),
            ("backoffLimitPerIndex", per_index),
        )
        if present
    ]
    if not found:
        return None
    return (
        f"allowRankRestart: the runtime's trainer job states {' and '.join(found)}, so a failed "
        "rank can rerun under the same DISPATCH_ATTEMPT and one execution can contain a "
        "restarted rank"
    )


#: reasons a verdict lists (the rest are counted)
MAX_REASONS = 20


def check_runtime(
    raw: Any,
    settings: KubeflowSettings,
    *,
    kind: str | None = None,
    name: str | None = None,
) -> RuntimeVerdict:
    """Evaluate every runtime rule. ``raw`` None means the runtime does not exist.

    ``kind`` and ``name`` identify the runtime when the caller knows them (the job's
    ``runtime`` reference); otherwise they are read from the object.
    """
    read_kind, read_name = runtime_identity(raw)
    kind = kind or read_kind or "ClusterTrainingRuntime"
    name = name or read_name
    label = f"{kind[:60]} {show(name)}"  # bounded: a file may hold any kind and name
    reasons: list[Reason] = []
    if not settings.allows(kind, name):
        listed = ", ".join(settings.runtimes or ())
        reasons.append(
            Reason(
                ALLOW_LIST,
                f"{label} is not in the cluster's runtimes allow-list ({listed}); "
                "use a listed runtime or add it to `runtimes` in the cluster configuration",
            )
        )
    if raw is None:
        reasons.append(Reason(NOT_FOUND, f"{label} does not exist on the cluster"))
        answer = Capability(PROCS_PER_NODE, False, f"{label} does not exist")
        return RuntimeVerdict(kind, name, tuple(reasons), answer, None, False, (), found=False)
    policies = ml_policies(raw)
    torch = policies is not None and "torch" in policies
    reasons += _ml_policy(policies, raw)
    read = replicated_jobs(raw)
    mpi = policies is not None and "mpi" in policies
    reasons += _replicated_jobs(read, mpi=mpi)
    jobs = read or []
    ignore_rule = per_index = False
    for job in (j for j in jobs if j.is_trainer):
        found = check_trainer_job(job, settings)
        reasons += found.reasons
        ignore_rule, per_index = ignore_rule or found.ignore_rule, per_index or found.per_index
    reasons += _jobset_failure_policy(dig(raw, "spec", "template", "spec", "failurePolicy"))
    reasons += _pod_group_policy(dig(raw, "spec", "podGroupPolicy"))
    weakened = (
        weakened_identity_text(ignore_rule=ignore_rule, per_index=per_index)
        if settings.allow_rank_restart
        else None
    )
    ordered = sorted(reasons, key=lambda r: RULES.index(r.rule))
    if len(ordered) > MAX_REASONS:  # e.g. one per replicated job of a runtime with thousands
        more = Reason(ordered[MAX_REASONS].rule, f"and {len(ordered) - MAX_REASONS:,} more reasons")
        ordered = [*ordered[:MAX_REASONS], more]
    return RuntimeVerdict(
        kind, name, tuple(ordered), _procs_per_node(label, policies), weakened, torch, tuple(jobs)
    )


def _procs_per_node(label: str, policies: list[str] | None) -> Capability:
    if policies is None:
        return Capability(PROCS_PER_NODE, False, f"{label} has an unreadable mlPolicy")
    if "torch" in policies:
        return Capability(
            PROCS_PER_NODE,
            True,
            f"{label} has mlPolicy.torch: Trainer passes numProcPerNode to torchrun",
        )
    if "mpi" in policies:
        return Capability(
            PROCS_PER_NODE,
            True,
            f"{label} has mlPolicy.mpi: Trainer gives each node numProcPerNode MPI slots",
        )
    if not policies:
        return Capability(
            PROCS_PER_NODE,
            False,
            f"{label} has no ML policy (a plain runtime), so Trainer would ignore "
            "numProcPerNode; use a runtime with mlPolicy.torch",
        )
    return Capability(
        PROCS_PER_NODE,
        False,
        f"{label} has mlPolicy {', '.join(policies)}, which starts one process per node; "
        "use a torch or MPI runtime for more",
    )


def _ml_policy(policies: list[str] | None, raw: Any) -> list[Reason]:
    if policies is None:
        return [
            Reason(
                ML_POLICY, f"mlPolicy is not a mapping (got {show(dig(raw, 'spec', 'mlPolicy'))})"
            )
        ]
    reasons = [
        Reason(
            ML_POLICY,
            f"mlPolicy names {policy}: "
            + UNSUPPORTED_POLICY_WHY.get(policy, "a policy dispatch does not know")
            + f"; use a plain runtime or one of {', '.join(SUPPORTED_POLICIES)}",
        )
        for policy in policies
        if policy not in SUPPORTED_POLICIES
    ]
    known = [policy for policy in policies if policy in SUPPORTED_POLICIES]
    if len(known) > 1:
        reasons.append(
            Reason(
                ML_POLICY,
                f"mlPolicy names {' and '.join(known)}: Trainer takes exactly one ML policy",
            )
        )
    implementation = dig(raw, "spec", "mlPolicy", "mpi", "mpiImplementation")
    if "mpi" in known and implementation not in (None, *MPI_IMPLEMENTATIONS):
        reasons.append(
            Reason(
                ML_POLICY,
                f"mlPolicy.mpi.mpiImplementation is {show(implementation)}: Trainer v2.3 "
                f"builds only {', '.join(MPI_IMPLEMENTATIONS)} runtimes",
            )
        )
    torch = dig(raw, "spec", "mlPolicy", "torch")
    if torch is not None and not isinstance(torch, Mapping):
        reasons.append(Reason(ML_POLICY, f"mlPolicy.torch is not a mapping (got {show(torch)})"))
    reasons += _env_injection(raw, dig(torch, "envInjection"))
    return reasons


def _env_injection(raw: Any, injection: Any) -> list[Reason]:
    """Torch ``envInjection`` (Trainer v2.3) names containers the runtime must have: Trainer
    refuses every TrainJob on a runtime whose target is missing."""
    jobs = {job.name: job for job in replicated_jobs(raw) or []}
    reasons = []
    for job_name, container in env_injection_targets(injection):
        pod = (
            dig(jobs[job_name].raw, "template", "spec", "template", "spec")
            if job_name in (jobs)
            else None
        )
        names = set(names_of(dig(pod, "containers"))) | set(names_of(dig(pod, "initContainers")))
        if container not in names:
            reasons.append(
                Reason(
                    ML_POLICY,
                    f"mlPolicy.torch.envInjection names container {container!r} of replicated "
                    f"job {job_name!r}, which the runtime does not have; Trainer refuses every "
                    "TrainJob on it: fix the target or add the container",
                )
            )
    return reasons


def _replicated_jobs(jobs: list[ReplicatedJob] | None, *, mpi: bool = False) -> list[Reason]:
    wanted = f"exactly one replicated job, labelled {ANCESTOR_LABEL}: {TRAINER_STEP}"
    if not jobs:
        return [
            Reason(
                REPLICATED_JOBS,
                f"spec.template.spec.replicatedJobs is missing or empty; the runtime needs {wanted}",
            )
        ]
    reasons: list[Reason] = []
    trainers = [job for job in jobs if job.is_trainer]
    if not trainers:
        reasons.append(
            Reason(
                REPLICATED_JOBS,
                f"no replicated job is the trainer job (none has {ANCESTOR_LABEL}: {TRAINER_STEP} "
                "in replicatedJobs[].template.metadata.labels)",
            )
        )
    elif len(trainers) > 1:
        names = ", ".join(repr(job.name) for job in trainers)
        reasons.append(
            Reason(
                REPLICATED_JOBS,
                f"{len(trainers)} replicated jobs are trainer jobs ({names}); {wanted}",
            )
        )
    for job in jobs:
        if job.is_trainer:
            continue
        if mpi and job.name == MPI_NODE_JOB and job.step is None:
            continue  # MPI's sshd pods: mpirun on the launcher starts the ranks in them
        if not isinstance(job.raw, Mapping):
            what = f"is not a mapping (got {show(job.raw)})"
        elif job.step is not None:
            what = f"is the {job.step!r} step"
        else:
            what = "is not the trainer job"
        reasons.append(
            Reason(
                REPLICATED_JOBS,
                f"replicated job {job.name!r} {what}; only the trainer job is supported "
                "(initializers and other steps were never exercised; an MPI runtime's "
                f"{MPI_NODE_JOB!r} job is the one other job allowed)",
            )
        )
    return reasons


def _jobset_failure_policy(policy: Any) -> list[Reason]:
    if policy is None:
        return []
    if not isinstance(policy, Mapping):
        return [
            Reason(JOBSET_FAILURE_POLICY, f"failurePolicy is not a mapping (got {show(policy)})")
        ]
    reasons: list[Reason] = []
    restarts = policy.get("maxRestarts")
    if restarts is not None and not (is_int(restarts) and restarts == 0):
        reasons.append(
            Reason(
                JOBSET_FAILURE_POLICY,
                f"the JobSet failurePolicy states maxRestarts {show(restarts)}; it must be 0 or "
                "unset, because dispatch restarts nothing natively (a restart the plan never "
                "chose is unplanned recovery)",
            )
        )
    rules = policy.get("rules")
    items = as_list(rules)
    if rules is not None and items is None:
        reasons.append(
            Reason(JOBSET_FAILURE_POLICY, f"failurePolicy.rules is not a list (got {show(rules)})")
        )
    for index, rule in enumerate(items or []):
        action = dig(rule, "action")
        if action != "FailJobSet":
            reasons.append(
                Reason(
                    JOBSET_FAILURE_POLICY,
                    f"the JobSet failurePolicy rules[{index}] has action {show(action)}; every "
                    "rule's action must be FailJobSet",
                )
            )
    return reasons


def _pod_group_policy(policy: Any) -> list[Reason]:
    """Gang scheduling keeps the identity promise: it only delays the start of all ranks
    together, and a gang that never forms ends the attempt ``no_capacity``. Refused: a
    shape Trainer would not build one PodGroup from."""
    if policy is None:
        return []
    if not isinstance(policy, Mapping):
        return [Reason(POD_GROUP_POLICY, f"podGroupPolicy is not a mapping (got {show(policy)})")]
    named = [key for key, value in policy.items() if value is not None]
    unknown = [str(key) for key in named if key not in POD_GROUP_POLICIES]
    reasons = [
        Reason(
            POD_GROUP_POLICY,
            f"podGroupPolicy names {key}, which Trainer v2.3 does not build (known: "
            f"{', '.join(POD_GROUP_POLICIES)})",
        )
        for key in unknown
    ]
    if len([key for key in named if key in POD_GROUP_POLICIES]) > 1:
        reasons.append(
            Reason(
                POD_GROUP_POLICY,
                "podGroupPolicy names both coscheduling and volcano: a pod can be in one gang",
            )
        )
    timeout = dig(policy, "coscheduling", "scheduleTimeoutSeconds")
    if timeout is not None and not (is_int(timeout) and timeout >= 0):
        reasons.append(
            Reason(
                POD_GROUP_POLICY,
                f"podGroupPolicy.coscheduling.scheduleTimeoutSeconds is {show(timeout)}; it must "
                "be a whole number of seconds (0 means the default, 60)",
            )
        )
    return reasons

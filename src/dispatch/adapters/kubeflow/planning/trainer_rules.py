"""The runtime rules on the trainer's replicated job (spec/kubeflow-adapter.md, section 1).

``check_trainer_job(job, settings)`` gives every reason the trainer job of a runtime breaks a
rule (``rules.check_runtime`` runs it on each trainer job and orders all reasons), and what
the job states that can let a rank run twice within one attempt, for the weakened-identity
reason when ``allowRankRestart`` waives ``rank-restart``. Pure; never raises on any input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.objects import as_list, dig, is_int, names_of, show
from dispatch.adapters.kubeflow.planning.runtime import NODE_CONTAINER, ReplicatedJob
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings, PublishVia
from dispatch.model import Reason

RESTART_POLICY = "restart-policy"
BACKOFF_LIMIT = "backoff-limit"
RANK_RESTART = "rank-restart"
POD_FAILURE_ACTION = "pod-failure-action"
NODE_CONTAINER_RULE = "node-container"
PUBLISH_INIT_CONTAINER = "publish-init-container"

#: podFailurePolicy actions the adapter understands (batch/v1)
POD_FAILURE_ACTIONS = ("FailJob", "FailIndex", "Count", "Ignore")


@dataclass(frozen=True, slots=True)
class TrainerJobFindings:
    """What the rules found in one trainer job."""

    #: every reason, the ``rank-restart`` ones left out when the cluster waives that rule
    reasons: list[Reason]
    #: the job has a podFailurePolicy rule with action Ignore
    ignore_rule: bool
    #: the job states backoffLimitPerIndex
    per_index: bool


def check_trainer_job(job: ReplicatedJob, settings: KubeflowSettings) -> TrainerJobFindings:
    """Every rule on the trainer job ``job`` under the cluster's ``settings``."""
    reasons = _restart_policy(job) + _backoff_limit(job)
    ignore_rule, per_index, rank_restart = _rank_restart(job)
    if not settings.allow_rank_restart:
        reasons += rank_restart
    reasons += _pod_failure_actions(job)
    reasons += _node_container(job)
    reasons += _publish_init_container(job, settings)
    return TrainerJobFindings(reasons, ignore_rule, per_index)


def _restart_policy(job: ReplicatedJob) -> list[Reason]:
    policy = dig(job.pod_spec, "restartPolicy")
    if policy == "Never":
        return []
    found = (
        "does not state restartPolicy (JobSet defaults it to OnFailure)"
        if policy is None
        else f"states restartPolicy {show(policy)}"
    )
    return [
        Reason(
            RESTART_POLICY,
            f"the trainer job {job.name!r} {found}; its pod template must state "
            "restartPolicy: Never, because a kubelet restarting a container in place is "
            "neither a new attempt nor a job failure",
        )
    ]


def _backoff_limit(job: ReplicatedJob) -> list[Reason]:
    limit = dig(job.job_spec, "backoffLimit")
    if is_int(limit) and limit == 0:
        return []
    found = (
        "does not state backoffLimit (the Job default is 6)"
        if limit is None
        else f"states backoffLimit {show(limit)}"
    )
    return [
        Reason(
            BACKOFF_LIMIT,
            f"the trainer job {job.name!r} {found}; it must state backoffLimit: 0, because "
            "a higher limit lets the Job replace a failed rank's pod inside one execution",
        )
    ]


def _failure_rules(job: ReplicatedJob) -> list[Any] | None:
    """The trainer job's podFailurePolicy rules; None when the policy is unreadable."""
    policy = dig(job.job_spec, "podFailurePolicy")
    if policy is None:
        return []
    return as_list(dig(policy, "rules")) if isinstance(policy, Mapping) else None


def _rank_restart(job: ReplicatedJob) -> tuple[bool, bool, list[Reason]]:
    """(states an Ignore rule, states backoffLimitPerIndex, the reasons when not waived)."""
    waiver = "set allowRankRestart: true in the cluster configuration to accept it, at the cost of a weaker identity"
    reasons: list[Reason] = []
    ignores = [
        index
        for index, rule in enumerate(_failure_rules(job) or [])
        if dig(rule, "action") == "Ignore"
    ]
    if ignores:
        where = ", ".join(f"rules[{i}]" for i in ignores)
        reasons.append(
            Reason(
                RANK_RESTART,
                f"the trainer job {job.name!r} has a podFailurePolicy rule with action Ignore "
                f"({where}), which lets the Job replace a failed pod without failing; {waiver}",
            )
        )
    per_index = dig(job.job_spec, "backoffLimitPerIndex") is not None
    if per_index:
        reasons.append(
            Reason(
                RANK_RESTART,
                f"the trainer job {job.name!r} states backoffLimitPerIndex, which lets the Job "
                f"rerun a failed index without failing; {waiver}",
            )
        )
    return bool(ignores), per_index, reasons


def _pod_failure_actions(job: ReplicatedJob) -> list[Reason]:
    rules = _failure_rules(job)
    if rules is None:
        policy = dig(job.job_spec, "podFailurePolicy")
        return [
            Reason(
                POD_FAILURE_ACTION,
                f"the trainer job {job.name!r} has a podFailurePolicy without a list of rules "
                f"(got {show(policy)})",
            )
        ]
    known = ", ".join(POD_FAILURE_ACTIONS)
    return [
        Reason(
            POD_FAILURE_ACTION,
            f"the trainer job {job.name!r} podFailurePolicy rules[{index}] has action "
            f"{show(dig(rule, 'action'))}, which the adapter does not understand (known: {known})",
        )
        for index, rule in enumerate(rules)
        if dig(rule, "action") not in POD_FAILURE_ACTIONS
    ]


def _node_container(job: ReplicatedJob) -> list[Reason]:
    names = names_of(dig(job.pod_spec, "containers"))
    if NODE_CONTAINER in names:
        return []
    found = f"its containers are {', '.join(names)}" if names else "it has no named containers"
    return [
        Reason(
            NODE_CONTAINER_RULE,
            f"the trainer job {job.name!r} has no container named {NODE_CONTAINER!r} ({found}); "
            "Trainer applies image, command and env to it and dispatch's runtime patch names it",
        )
    ]


def _publish_init_container(job: ReplicatedJob, settings: KubeflowSettings) -> list[Reason]:
    if settings.publish_via is not PublishVia.INIT_CONTAINER or settings.init_container is None:
        return []
    names = names_of(dig(job.pod_spec, "initContainers"))
    if settings.init_container in names:
        return []
    found = f"its init containers are {', '.join(names)}" if names else "it has no init containers"
    return [
        Reason(
            PUBLISH_INIT_CONTAINER,
            f"the cluster publishes the identity through the init container "
            f"{settings.init_container!r} (publish.via: initContainer), but the trainer job "
            f"{job.name!r} has no such init container ({found}); Trainer would accept the patch "
            "and the job would hold quota with no pods",
        )
    ]

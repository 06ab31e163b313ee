"""Mutations of a valid runtime, each breaking exactly one runtime rule (for the rule tables
and the property tests). Each takes the raw runtime dict and changes it in place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dispatch.adapters.kubeflow.planning import rules
from tests.kubeflow.helpers import pod_spec, trainer_job

Runtime = dict[str, Any]
Mutation = Callable[[Runtime], None]

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def job_spec(runtime: Runtime) -> dict[str, Any]:
    spec: dict[str, Any] = trainer_job(runtime)["template"]["spec"]
    return spec


def failure_rules(runtime: Runtime) -> list[Any]:
    policy = job_spec(runtime).setdefault("podFailurePolicy", {"rules": []})
    rules_: list[Any] = policy.setdefault("rules", [])
    return rules_


def jobs(runtime: Runtime) -> list[Any]:
    found: list[Any] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return found


def jobset_failure_policy(runtime: Runtime) -> dict[str, Any]:
    policy: dict[str, Any] = runtime["spec"]["template"]["spec"].setdefault("failurePolicy", {})
    return policy


def _set(path: Callable[[Runtime], dict[str, Any]], key: str, value: Any) -> Mutation:
    def mutate(runtime: Runtime) -> None:
        path(runtime)[key] = value

    return mutate


def _delete(path: Callable[[Runtime], dict[str, Any]], key: str) -> Mutation:
    def mutate(runtime: Runtime) -> None:
        path(runtime).pop(key, None)

    return mutate


def _ml_policy(runtime: Runtime) -> dict[str, Any]:
    policy: dict[str, Any] = runtime["spec"].setdefault("mlPolicy", {})
    return policy


def _pod_group(runtime: Runtime) -> dict[str, Any]:
    policy: dict[str, Any] = runtime["spec"].setdefault("podGroupPolicy", {})
    return policy


def _both_gangs(runtime: Runtime) -> None:
    _pod_group(runtime).setdefault("coscheduling", {})
    _pod_group(runtime).setdefault("volcano", {})


def _gang_timeout(value: Any) -> Mutation:
    def mutate(runtime: Runtime) -> None:
        _pod_group(runtime).setdefault("coscheduling", {})["scheduleTimeoutSeconds"] = value

    return mutate


def _add_job(name: str, step: str | None) -> Mutation:
    def mutate(runtime: Runtime) -> None:
        labels = {ANCESTOR: step} if step else {}
        jobs(runtime).append(
            {
                "name": name,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"template": {"spec": {"containers": [{"name": name}]}}},
                },
            }
        )

    return mutate


def _duplicate_trainer(runtime: Runtime) -> None:
    import copy

    twin = copy.deepcopy(trainer_job(runtime))
    twin["name"] = "node-twin"
    jobs(runtime).append(twin)


def _remove_ancestor_label(runtime: Runtime) -> None:
    trainer_job(runtime)["template"]["metadata"]["labels"].pop(ANCESTOR)


def _add_failure_rule(action: Any) -> Mutation:
    def mutate(runtime: Runtime) -> None:
        failure_rules(runtime).append(
            {"action": action, "onExitCodes": {"operator": "In", "values": [42]}}
        )

    return mutate


def _rename_node_container(runtime: Runtime) -> None:
    for container in pod_spec(runtime)["containers"]:
        if container.get("name") == "node":
            container["name"] = "trainer"


def _add_jobset_rule(action: Any) -> Mutation:
    def mutate(runtime: Runtime) -> None:
        jobset_failure_policy(runtime).setdefault("rules", []).append(
            {"name": "r", "action": action}
        )

    return mutate


#: (rule id broken, description, mutation) -- every one applies to the `torch` example runtime
#: under default settings and breaks exactly that rule
SINGLE_RULE_MUTATIONS: list[tuple[str, str, Mutation]] = [
    (rules.ML_POLICY, "mpi policy", _set(_ml_policy, "mpi", {"numProcPerNode": 1})),
    (rules.ML_POLICY, "jax policy", _set(_ml_policy, "jax", {})),
    (rules.ML_POLICY, "xgboost policy", _set(_ml_policy, "xgboost", {})),
    (rules.ML_POLICY, "flux policy", _set(_ml_policy, "flux", {"numProcPerNode": 1})),
    (rules.ML_POLICY, "torch policy not a mapping", _set(_ml_policy, "torch", "yes")),
    (rules.ML_POLICY, "an unknown policy", _set(_ml_policy, "deepspeed", {})),
    (rules.REPLICATED_JOBS, "no ancestor label", _remove_ancestor_label),
    (
        rules.REPLICATED_JOBS,
        "an initializer job",
        _add_job("dataset-initializer", "dataset-initializer"),
    ),
    (rules.REPLICATED_JOBS, "a launcher job", _add_job("launcher", None)),
    (rules.REPLICATED_JOBS, "two trainer jobs", _duplicate_trainer),
    (rules.REPLICATED_JOBS, "a job that is not a mapping", lambda r: jobs(r).append("extra")),
    (rules.RESTART_POLICY, "restartPolicy absent", _delete(pod_spec, "restartPolicy")),
    (rules.RESTART_POLICY, "restartPolicy OnFailure", _set(pod_spec, "restartPolicy", "OnFailure")),
    (rules.RESTART_POLICY, "restartPolicy Always", _set(pod_spec, "restartPolicy", "Always")),
    (rules.BACKOFF_LIMIT, "backoffLimit absent", _delete(job_spec, "backoffLimit")),
    (rules.BACKOFF_LIMIT, "backoffLimit 6", _set(job_spec, "backoffLimit", 6)),
    (rules.BACKOFF_LIMIT, "backoffLimit false", _set(job_spec, "backoffLimit", False)),
    (rules.BACKOFF_LIMIT, "backoffLimit '0'", _set(job_spec, "backoffLimit", "0")),
    (rules.RANK_RESTART, "an Ignore rule", _add_failure_rule("Ignore")),
    (rules.RANK_RESTART, "backoffLimitPerIndex 1", _set(job_spec, "backoffLimitPerIndex", 1)),
    (rules.RANK_RESTART, "backoffLimitPerIndex 0", _set(job_spec, "backoffLimitPerIndex", 0)),
    (rules.POD_FAILURE_ACTION, "action Restart", _add_failure_rule("Restart")),
    (rules.POD_FAILURE_ACTION, "action missing", _add_failure_rule(None)),
    (
        rules.POD_FAILURE_ACTION,
        "rules not a list",
        _set(job_spec, "podFailurePolicy", {"rules": "x"}),
    ),
    (rules.NODE_CONTAINER_RULE, "node container renamed", _rename_node_container),
    (rules.NODE_CONTAINER_RULE, "no containers", _delete(pod_spec, "containers")),
    (
        rules.NODE_CONTAINER_RULE,
        "containers not a list",
        _set(pod_spec, "containers", {"node": {}}),
    ),
    (rules.JOBSET_FAILURE_POLICY, "maxRestarts 3", _set(jobset_failure_policy, "maxRestarts", 3)),
    (rules.JOBSET_FAILURE_POLICY, "a RestartJobSet rule", _add_jobset_rule("RestartJobSet")),
    (
        rules.JOBSET_FAILURE_POLICY,
        "a RestartJobSetAndIgnoreMaxRestarts rule",
        _add_jobset_rule("RestartJobSetAndIgnoreMaxRestarts"),
    ),
    (rules.JOBSET_FAILURE_POLICY, "rules not a list", _set(jobset_failure_policy, "rules", 7)),
    (
        rules.JOBSET_FAILURE_POLICY,
        "failurePolicy not a mapping",
        lambda r: r["spec"]["template"]["spec"].__setitem__("failurePolicy", ["FailJobSet"]),
    ),
    (rules.POD_GROUP_POLICY, "an unknown gang scheduler", _set(_pod_group, "kai", {})),
    (rules.POD_GROUP_POLICY, "coscheduling and volcano", _both_gangs),
    (rules.POD_GROUP_POLICY, "a negative gang timeout", _gang_timeout(-1)),
    (rules.POD_GROUP_POLICY, "a gang timeout in words", _gang_timeout("1m")),
    (
        rules.POD_GROUP_POLICY,
        "podGroupPolicy not a mapping",
        lambda r: r["spec"].__setitem__("podGroupPolicy", "coscheduling"),
    ),
]

#: mutations that replace a structure others add to; combining them is not meaningful
REPLACES_STRUCTURE = {
    "rules not a list",
    "failurePolicy not a mapping",
    "containers not a list",
    "no containers",
    "podGroupPolicy not a mapping",
}
COMBINABLE = [case for case in SINGLE_RULE_MUTATIONS if case[1] not in REPLACES_STRUCTURE]

"""The runtime rules, one table per rule: accepting and refusing cases (absent fields
included), several reasons at once, the allowRankRestart waiver and init-container publishing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dispatch.adapters.kubeflow.planning import rules
from dispatch.adapters.kubeflow.planning.rules import check_runtime, weakened_identity_text
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings, PublishVia
from tests.kubeflow.helpers import example_runtime, pod_spec
from tests.kubeflow.planning.mutations import (
    SINGLE_RULE_MUTATIONS,
    failure_rules,
    job_spec,
    jobset_failure_policy,
)

DEFAULT = KubeflowSettings()
WAIVED = KubeflowSettings(allow_rank_restart=True)
REGISTER = KubeflowSettings(publish_via=PublishVia.INIT_CONTAINER, init_container="register")

IGNORE_ONLY = (
    "allowRankRestart: the runtime's trainer job states a podFailurePolicy Ignore rule, so a "
    "failed rank can rerun under the same DISPATCH_ATTEMPT and one execution can contain a "
    "restarted rank"
)
PER_INDEX_ONLY = (
    "allowRankRestart: the runtime's trainer job states backoffLimitPerIndex, so a failed rank "
    "can rerun under the same DISPATCH_ATTEMPT and one execution can contain a restarted rank"
)
BOTH = (
    "allowRankRestart: the runtime's trainer job states a podFailurePolicy Ignore rule and "
    "backoffLimitPerIndex, so a failed rank can rerun under the same DISPATCH_ATTEMPT and one "
    "execution can contain a restarted rank"
)


def rule_ids(raw: Any, settings: KubeflowSettings = DEFAULT) -> list[str]:
    return [reason.rule for reason in check_runtime(raw, settings).reasons]


@pytest.mark.parametrize("stem", ["plain", "torch", "torch-register", "built-in-torch", "mpi"])
def test_example_runtimes(stem: str) -> None:
    settings = REGISTER if stem == "torch-register" else DEFAULT
    expected = (
        [rules.REPLICATED_JOBS, rules.RESTART_POLICY, rules.BACKOFF_LIMIT]
        if stem == "built-in-torch"
        else []
    )
    assert rule_ids(example_runtime(stem), settings) == expected


@pytest.mark.parametrize(
    ("rule", "mutate"),
    [(rule, mutate) for rule, _, mutate in SINGLE_RULE_MUTATIONS],
    ids=[f"{rule}: {what}" for rule, what, _ in SINGLE_RULE_MUTATIONS],
)
def test_each_refusing_case_names_its_rule_and_only_it(
    rule: str, mutate: Callable[[dict[str, Any]], None]
) -> None:
    runtime = example_runtime("torch")
    mutate(runtime)
    ids = rule_ids(runtime)
    assert ids and set(ids) == {rule}


ACCEPTING: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("mlPolicy absent (plain)", lambda r: r["spec"].pop("mlPolicy")),
    ("mlPolicy only numNodes (plain)", lambda r: r["spec"]["mlPolicy"].pop("torch")),
    ("mlPolicy torch null is plain", lambda r: r["spec"]["mlPolicy"].__setitem__("torch", None)),
    ("mlPolicy mpi null is absent", lambda r: r["spec"]["mlPolicy"].__setitem__("mpi", None)),
    (
        "FailJob and Count rules",
        lambda r: failure_rules(r).extend([{"action": "FailJob"}, {"action": "Count"}]),
    ),
    ("FailIndex rule", lambda r: failure_rules(r).append({"action": "FailIndex"})),
    ("no podFailurePolicy", lambda r: job_spec(r).pop("podFailurePolicy")),
    ("backoffLimitPerIndex null", lambda r: job_spec(r).__setitem__("backoffLimitPerIndex", None)),
    ("failurePolicy absent", lambda r: r["spec"]["template"]["spec"].pop("failurePolicy")),
    ("failurePolicy maxRestarts unset", lambda r: jobset_failure_policy(r).pop("maxRestarts")),
    ("failurePolicy without rules", lambda r: jobset_failure_policy(r).pop("rules")),
    (
        "extra containers beside node",
        lambda r: pod_spec(r)["containers"].append({"name": "sidecar"}),
    ),
    ("unknown fields anywhere", lambda r: r["spec"].__setitem__("x-unknown", {"a": [1]})),
]


@pytest.mark.parametrize(("what", "mutate"), ACCEPTING, ids=[w for w, _ in ACCEPTING])
def test_accepting_cases(what: str, mutate: Callable[[dict[str, Any]], None]) -> None:
    runtime = example_runtime("torch")
    mutate(runtime)
    verdict = check_runtime(runtime, DEFAULT)
    assert verdict.accepted, verdict.reasons
    assert verdict.weakened_identity is None


def test_several_reasons_at_once_in_rule_order() -> None:
    runtime = example_runtime("torch")
    pod_spec(runtime).pop("restartPolicy")
    job_spec(runtime)["backoffLimit"] = 6
    failure_rules(runtime).append({"action": "Ignore"})
    failure_rules(runtime).append({"action": "Retry"})
    jobset_failure_policy(runtime)["maxRestarts"] = 2
    runtime["spec"]["mlPolicy"]["mpi"] = {}
    assert rule_ids(runtime, KubeflowSettings(runtimes=("other",))) == [
        rules.ALLOW_LIST,
        rules.ML_POLICY,
        rules.RESTART_POLICY,
        rules.BACKOFF_LIMIT,
        rules.RANK_RESTART,
        rules.POD_FAILURE_ACTION,
        rules.JOBSET_FAILURE_POLICY,
    ]


def test_every_failing_jobset_rule_is_a_reason() -> None:
    runtime = example_runtime("torch")
    jobset_failure_policy(runtime)["rules"] = [
        {"action": "RestartJobSet"},
        {"action": "FailJobSet"},
        {"action": "RestartJob"},
    ]
    messages = [r.message for r in check_runtime(runtime, DEFAULT).reasons]
    assert len(messages) == 2
    assert "rules[0]" in messages[0] and "rules[2]" in messages[1]


@pytest.mark.parametrize(
    ("allowed", "accepted"),
    [
        (None, True),
        (("torch-dispatch",), True),
        (("ClusterTrainingRuntime/torch-dispatch",), True),
        (("TrainingRuntime/torch-dispatch",), False),
        (("dispatch-kind",), False),
        ((), False),
    ],
)
def test_allow_list(allowed: tuple[str, ...] | None, accepted: bool) -> None:
    ids = rule_ids(example_runtime("torch"), KubeflowSettings(runtimes=allowed))
    assert ids == ([] if accepted else [rules.ALLOW_LIST])


def test_not_found_with_the_allow_list_still_evaluated() -> None:
    verdict = check_runtime(
        None, KubeflowSettings(runtimes=("x",)), kind="TrainingRuntime", name="gone"
    )
    assert [r.rule for r in verdict.reasons] == [rules.ALLOW_LIST, rules.NOT_FOUND]
    assert "TrainingRuntime 'gone' does not exist" in verdict.reasons[1].message
    assert not verdict.found
    assert verdict.procs_per_node.supported is False


@pytest.mark.parametrize(
    ("ignore", "per_index", "text"),
    [(True, False, IGNORE_ONLY), (False, True, PER_INDEX_ONLY), (True, True, BOTH)],
)
def test_rank_restart_is_waived_with_the_exact_weakened_identity(
    ignore: bool, per_index: bool, text: str
) -> None:
    runtime = example_runtime("torch")
    if ignore:
        failure_rules(runtime).append(
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
        )
    if per_index:
        job_spec(runtime)["backoffLimitPerIndex"] = 2
    refused = check_runtime(runtime, DEFAULT)
    assert [r.rule for r in refused.reasons] == [rules.RANK_RESTART] * (ignore + per_index)
    assert refused.weakened_identity is None
    waived = check_runtime(runtime, WAIVED)
    assert waived.accepted
    assert waived.weakened_identity == text
    assert weakened_identity_text(ignore_rule=ignore, per_index=per_index) == text


def test_the_waiver_does_not_weaken_a_runtime_without_rank_restart() -> None:
    verdict = check_runtime(example_runtime("torch"), WAIVED)
    assert verdict.accepted and verdict.weakened_identity is None


def test_the_waiver_covers_rank_restart_only() -> None:
    runtime = example_runtime("torch-rank-restart")
    job_spec(runtime)["backoffLimit"] = 3
    verdict = check_runtime(runtime, WAIVED)
    assert [r.rule for r in verdict.reasons] == [rules.BACKOFF_LIMIT]
    assert verdict.weakened_identity == BOTH


@pytest.mark.parametrize(
    ("stem", "settings", "expected"),
    [
        ("torch-register", REGISTER, []),
        ("torch", REGISTER, [rules.PUBLISH_INIT_CONTAINER]),
        ("plain", REGISTER, [rules.PUBLISH_INIT_CONTAINER]),
        ("torch", DEFAULT, []),
        ("torch-register", DEFAULT, []),
        (
            "torch-register",
            KubeflowSettings(publish_via=PublishVia.INIT_CONTAINER, init_container="other"),
            [rules.PUBLISH_INIT_CONTAINER],
        ),
    ],
)
def test_publish_through_an_init_container(
    stem: str, settings: KubeflowSettings, expected: list[str]
) -> None:
    assert rule_ids(example_runtime(stem), settings) == expected


def test_publish_names_the_init_containers_it_found() -> None:
    runtime = example_runtime("torch-register")
    settings = KubeflowSettings(publish_via=PublishVia.INIT_CONTAINER, init_container="catalog")
    (reason,) = check_runtime(runtime, settings).reasons
    assert "'catalog'" in reason.message and "register" in reason.message


@pytest.mark.parametrize(
    ("stem", "supported", "phrase"),
    [("torch", True, "mlPolicy.torch"), ("plain", False, "no ML policy")],
)
def test_procs_per_node_capability(stem: str, supported: bool, phrase: str) -> None:
    answer = check_runtime(example_runtime(stem), DEFAULT).procs_per_node
    assert answer.name == "ProcsPerNode"
    assert answer.supported is supported
    assert phrase in answer.reason


@pytest.mark.parametrize(
    ("policy", "supported"), [("mpi", True), ("jax", False), ("xgboost", False)]
)
def test_procs_per_node_per_policy(policy: str, supported: bool) -> None:
    runtime = example_runtime("plain")
    runtime["spec"]["mlPolicy"][policy] = {}
    answer = check_runtime(runtime, DEFAULT).procs_per_node
    assert answer.supported is supported and policy in answer.reason


# --- the plugins of Trainer v2.3 beyond torch ------------------------------------------------


def launcher(runtime: dict[str, Any]) -> dict[str, Any]:
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    found: dict[str, Any] = next(j for j in jobs if j["name"] == "launcher")
    return found


@pytest.mark.parametrize("policy", ["jax", "xgboost"])
def test_jax_and_xgboost_runtimes_are_run_like_torch(policy: str) -> None:
    runtime = example_runtime("torch")
    runtime["spec"]["mlPolicy"] = {"numNodes": 2, policy: {}}
    assert rule_ids(runtime) == []


def test_an_mpi_launcher_its_job_would_restart_is_refused_by_name() -> None:
    runtime = example_runtime("mpi")
    launcher(runtime)["template"]["spec"]["backoffLimit"] = 6
    del launcher(runtime)["template"]["spec"]["template"]["spec"]["restartPolicy"]
    reasons = check_runtime(runtime, DEFAULT).reasons
    assert [r.rule for r in reasons] == [rules.RESTART_POLICY, rules.BACKOFF_LIMIT]
    assert all("'launcher'" in r.message for r in reasons)


def test_the_mpi_node_job_is_allowed_only_in_an_mpi_runtime() -> None:
    runtime = example_runtime("mpi")
    runtime["spec"]["mlPolicy"] = {"numNodes": 2, "torch": {}}
    reasons = check_runtime(runtime, DEFAULT).reasons
    assert [r.rule for r in reasons] == [rules.REPLICATED_JOBS]
    assert "'node'" in reasons[0].message


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"mpiImplementation": "Intel"}, "builds only OpenMPI"),
        ({"mpiImplementation": "MPICH"}, "builds only OpenMPI"),
    ],
)
def test_mpi_implementations_trainer_does_not_build(change: dict[str, Any], phrase: str) -> None:
    runtime = example_runtime("mpi")
    runtime["spec"]["mlPolicy"]["mpi"].update(change)
    reasons = check_runtime(runtime, DEFAULT).reasons
    assert [r.rule for r in reasons] == [rules.ML_POLICY] and phrase in reasons[0].message


def test_flux_is_refused_with_why() -> None:
    runtime = example_runtime("plain")
    runtime["spec"]["mlPolicy"]["flux"] = {"numProcPerNode": 1}
    (reason,) = check_runtime(runtime, DEFAULT).reasons
    assert reason.rule == rules.ML_POLICY and "resource manager" in reason.message


@pytest.mark.parametrize(
    "policy",
    [
        {"coscheduling": {}},
        {"coscheduling": {"scheduleTimeoutSeconds": 0}},
        {"coscheduling": {"scheduleTimeoutSeconds": 30}},
        {"volcano": {}},
        {"volcano": {"networkTopology": {"mode": "hard"}}},
        {"coscheduling": {}, "volcano": None},
    ],
)
def test_gang_scheduling_is_accepted(policy: dict[str, Any]) -> None:
    runtime = example_runtime("torch")
    runtime["spec"]["podGroupPolicy"] = policy
    assert rule_ids(runtime) == []


def test_check_runtime_json_shape() -> None:
    data = check_runtime(example_runtime("torch-rank-restart"), WAIVED).to_json()
    assert data == {
        "runtime": {"kind": "ClusterTrainingRuntime", "name": "torch-rank-restart"},
        "accepted": True,
        "reasons": [],
        "weakenedIdentity": BOTH,
        "capabilities": {
            "ProcsPerNode": {
                "supported": True,
                "reason": "ClusterTrainingRuntime 'torch-rank-restart' has mlPolicy.torch: "
                "Trainer passes numProcPerNode to torchrun",
            }
        },
    }

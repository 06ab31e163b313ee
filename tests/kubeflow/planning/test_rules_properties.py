"""Properties of the runtime rules: a mutation that breaks a rule is reported under that
rule's id (alone, and combined with others); no input whatsoever crashes the checker or the
planner."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch.adapters.kubeflow.planning import rules
from dispatch.adapters.kubeflow.planning.jobchecks import JOB_CHECKS
from dispatch.adapters.kubeflow.planning.plan import plan_objects
from dispatch.adapters.kubeflow.planning.rules import RuntimeVerdict, check_runtime
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings, PublishVia
from dispatch.model import Job, parse_spec
from tests.kubeflow.helpers import example_runtime
from tests.kubeflow.planning.mutations import COMBINABLE, SINGLE_RULE_MUTATIONS

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
settings_values = st.builds(
    KubeflowSettings,
    runtimes=st.none() | st.tuples(st.sampled_from(["torch-dispatch", "x", "TrainingRuntime/y"])),
    allow_rank_restart=st.booleans(),
    publish_via=st.sampled_from(list(PublishVia)),
    init_container=st.sampled_from([None, "register"]),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a nested dict/list value (for replacing a part with garbage)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], tuple(rest), new)
    return copy


def _well_formed(verdict: RuntimeVerdict) -> None:
    assert all(reason.rule in rules.RULES for reason in verdict.reasons)
    assert all(isinstance(reason.message, str) and reason.message for reason in verdict.reasons)
    json.dumps(verdict.to_json())


@FAST
@given(st.sampled_from(SINGLE_RULE_MUTATIONS))
def test_a_single_mutation_is_reported_under_its_rule_only(case: Any) -> None:
    rule, _, mutate = case
    runtime = example_runtime("torch")
    mutate(runtime)
    ids = {reason.rule for reason in check_runtime(runtime, KubeflowSettings()).reasons}
    assert ids == {rule}


@FAST
@given(st.lists(st.sampled_from(COMBINABLE), min_size=1, max_size=6, unique_by=lambda c: c[0]))
def test_combined_mutations_report_every_broken_rule(cases: list[Any]) -> None:
    runtime = example_runtime("torch")
    for _, _, mutate in cases:
        mutate(runtime)
    ids = {reason.rule for reason in check_runtime(runtime, KubeflowSettings()).reasons}
    broken = {rule for rule, _, _ in cases}
    # a runtime whose trainer job is no longer recognisable has no trainer job to check
    trainer_rules = {
        rules.RESTART_POLICY,
        rules.BACKOFF_LIMIT,
        rules.RANK_RESTART,
        rules.POD_FAILURE_ACTION,
        rules.NODE_CONTAINER_RULE,
    }
    if any(what == "no ancestor label" for _, what, _ in cases):
        broken -= trainer_rules
    assert broken <= ids
    assert ids <= broken | {rules.REPLICATED_JOBS}


@FAST
@given(json_value, settings_values)
def test_no_value_crashes_the_checker(raw: Any, cluster: KubeflowSettings) -> None:
    _well_formed(check_runtime(raw, cluster))


@FAST
@given(st.data(), settings_values)
def test_no_garbage_inside_a_valid_runtime_crashes_the_checker_or_planner(
    data: st.DataObject, cluster: KubeflowSettings
) -> None:
    runtime = example_runtime("torch-register")
    path = data.draw(st.sampled_from(_paths(runtime)))
    broken = _replace(runtime, path, data.draw(json_value))
    verdict = check_runtime(broken, cluster)
    _well_formed(verdict)
    spec = parse_spec(
        {
            "name": "prop",
            "cluster": "kf",
            "nodes": data.draw(st.integers(1, 200)),
            "procsPerNode": data.draw(st.none() | st.integers(1, 8)),
            "command": ["torchrun", "train.py"],
            "runtime": {"name": "torch-register"},
        }
    )
    plan = plan_objects(Job("prop-00001", spec, 0.0), 1, broken, cluster)
    assert {r.rule for r in plan.capabilities.refusals} <= set(rules.RULES) | set(JOB_CHECKS)
    assert bool(plan.artifacts) == plan.accepted
    json.dumps(plan.to_json())

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch.model import Action, Cause, InvalidSpec, JobSpec, parse_spec, parse_spec_text
from tests.conftest import EXAMPLES

DESIGN_EXAMPLE = """
name: mnist-ddp
cluster: local
nodes: 2
procsPerNode: 2
command: ["torchrun", "train.py"]
args: []
env: {EPOCHS: "3"}
image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
resources: {cpu: "2", memory: 4Gi, gpu: 0}
timeLimit: 30m
workingDir: .
queue: team-a
runtime: {kind: ClusterTrainingRuntime, name: torch-distributed}
recovery:
  rules:
    - on: [preempted, node_lost]
      action: retry
      limit: 10
      backoff: {initial: 30s, max: 10m}
    - on: [out_of_memory, app_error]
      action: fail
  unmatched: fail
"""


def fields(exc: InvalidSpec) -> list[str]:
    return [p.field for p in exc.problems]


def test_the_design_example_parses_with_every_field() -> None:
    spec = parse_spec_text(DESIGN_EXAMPLE)
    assert spec.name == "mnist-ddp"
    assert (spec.nodes, spec.procs_per_node, spec.world_size) == (2, 2, 4)
    assert spec.launches_torchrun
    assert spec.time_limit == 1800.0
    assert spec.resources.memory_bytes == 4 * 2**30
    assert spec.resources.cpu_count == 2.0
    assert spec.runtime is not None and spec.runtime.name == "torch-distributed"
    rule = spec.recovery.rule_for(Cause.PREEMPTED)
    assert rule is not None and rule.action is Action.RETRY and rule.limit == 10
    assert rule.backoff.delay(1) == 30 and rule.backoff.delay(10) == 600
    assert spec.recovery.rule_for(Cause.TIMEOUT) is None
    assert spec.recovery.unmatched is Action.FAIL


def test_on_is_a_key_not_a_yaml_1_1_boolean() -> None:
    spec = parse_spec_text(
        "name: a\ncommand: [x]\nrecovery: {rules: [{on: [timeout], action: fail}]}"
    )
    assert spec.recovery.rules[0].on == (Cause.TIMEOUT,)


def test_defaults_for_a_minimal_spec() -> None:
    spec = parse_spec({"name": "tiny", "command": ["python", "x.py"]})
    assert spec.cluster == "local"
    assert spec.nodes == 1
    assert spec.procs_per_node is None
    assert not spec.launches_torchrun
    assert spec.recovery.rules == ()


def test_three_mistakes_are_all_named() -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec({"name": "Bad_Name", "nodes": 0, "command": ["x"], "timelimit": "30m"})
    assert sorted(fields(caught.value)) == ["name", "nodes", "timelimit"]
    unknown = next(p for p in caught.value.problems if p.field == "timelimit")
    assert "timeLimit" in unknown.fix


def test_the_invalid_example_has_three_problems() -> None:
    from dispatch.model import load_spec

    with pytest.raises(InvalidSpec) as caught:
        load_spec(EXAMPLES / "invalid" / "three-mistakes.yaml")
    assert len(caught.value.problems) == 3


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"DISPATCH_JOB": "x"}, "DISPATCH_JOB"),
        ({"dispatch_attempt": "1"}, "dispatch_attempt"),
        ({"EPOCHS": 3}, "quote it"),
        ({"1BAD": "x"}, "invalid variable name"),
    ],
)
def test_env_problems(env: dict[str, Any], needle: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec({"name": "a", "command": ["x"], "env": env})
    assert fields(caught.value) == ["env"]
    assert needle in caught.value.problems[0].message


def test_reserved_env_and_wrong_types_are_reported_together() -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec({"name": "a", "command": ["x"], "env": {"DISPATCH_X": "1", "N": 2}})
    message = caught.value.problems[0].message
    assert "DISPATCH_X" in message and "quote it" in message


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"name": "x" * 41}, "name"),
        ({"name": "ends-"}, "name"),
        ({"command": []}, "command"),
        ({"command": "python train.py"}, "command"),
        ({"timeLimit": "soon"}, "timeLimit"),
        ({"timeLimit": "0s"}, "timeLimit"),
        ({"resources": {"memory": "4 gigs"}}, "resources.memory"),
        ({"resources": {"cpu": "lots"}}, "resources.cpu"),
        ({"resources": {"gpu": -1}}, "resources.gpu"),
        ({"resources": {"gpus": 1}}, "resources.gpus"),
        ({"procsPerNode": 0}, "procsPerNode"),
        ({"runtime": {"kind": "MPIJob", "name": "x"}}, "runtime.kind"),
        ({"recovery": {"rules": [{"on": ["preempted"], "action": "retry"}]}}, "recovery.rules[0]"),
        (
            {"recovery": {"rules": [{"on": ["cancelled"], "action": "retry", "limit": 1}]}},
            "recovery.rules[0]",
        ),
        (
            {"recovery": {"rules": [{"on": ["bad_luck"], "action": "fail"}]}},
            "recovery.rules[0].on[0]",
        ),
        ({"recovery": {"unmatched": "retry"}}, "recovery.unmatched"),
        (
            {
                "recovery": {
                    "rules": [
                        {"on": ["timeout"], "action": "fail"},
                        {"on": ["timeout"], "action": "hold"},
                    ]
                }
            },
            "recovery",
        ),
    ],
)
def test_each_problem_names_its_field(patch: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec({"name": "a", "command": ["x"], **patch})
    assert fields(caught.value) == [field]


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string", "name: [unclosed"])
def test_documents_that_are_not_specs(text: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec_text(text)
    assert caught.value.problems


def test_round_trip_through_yaml_dict() -> None:
    spec = parse_spec_text(DESIGN_EXAMPLE)
    assert parse_spec(spec.to_yaml_dict()) == spec
    assert JobSpec.model_validate_json(spec.model_dump_json(by_alias=True)) == spec


# --- property-based: every input parses or yields InvalidSpec naming fields ---------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["30m", "4Gi", "500m", "retry", "fail", "hold", "preempted", "torchrun"]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=12), st.integers()), children, max_size=4),
    ),
    max_leaves=12,
)
FIELD_NAMES = [
    "name",
    "cluster",
    "nodes",
    "procsPerNode",
    "command",
    "args",
    "env",
    "image",
    "resources",
    "timeLimit",
    "workingDir",
    "queue",
    "runtime",
    "recovery",
]
near_specs = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["ok-name", "Bad", "", "a" * 50]),
        "command": st.one_of(st.just(["python", "x.py"]), values),
    },
    optional={name: values for name in FIELD_NAMES if name not in ("name", "command")},
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(values, near_specs))
def test_any_input_parses_or_names_fields(data: Any) -> None:
    try:
        spec = parse_spec(data)
    except InvalidSpec as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.field
            assert problem.message
    else:
        assert isinstance(spec, JobSpec)

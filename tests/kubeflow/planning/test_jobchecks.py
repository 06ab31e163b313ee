"""The job checks of section 2: procs-per-node, reserved-env, name-length."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.adapters.kubeflow.planning.jobchecks import TRAINER_RESERVED_ENV, check_job
from dispatch.adapters.kubeflow.planning.names import longest_pod_name, trainjob_name
from dispatch.adapters.kubeflow.planning.rules import check_runtime
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings
from dispatch.model import JobSpec, parse_spec
from tests.kubeflow.helpers import example_runtime
from tests.kubeflow.planning.mutations import jobs


def spec(**fields: Any) -> JobSpec:
    return parse_spec({"name": "t", "command": ["torchrun", "x.py"], **fields})


def ids(job_spec: JobSpec, runtime: dict[str, Any], name: str = "t-ab12c-1") -> list[str]:
    verdict = check_runtime(runtime, KubeflowSettings())
    return [r.rule for r in check_job(job_spec, verdict, name)]


@pytest.mark.parametrize(
    ("stem", "procs", "expected"),
    [
        ("torch", 2, []),
        ("torch", None, []),
        ("plain", None, []),
        ("plain", 2, ["procs-per-node"]),
        ("plain", 1, ["procs-per-node"]),
    ],
)
def test_procs_per_node(stem: str, procs: int | None, expected: list[str]) -> None:
    assert ids(spec(procsPerNode=procs), example_runtime(stem)) == expected


def test_procs_per_node_is_not_judged_for_a_missing_runtime() -> None:
    verdict = check_runtime(None, KubeflowSettings(), name="gone")
    assert check_job(spec(procsPerNode=2), verdict, "t-1") == []


@pytest.mark.parametrize("variable", TRAINER_RESERVED_ENV)
def test_trainer_reserved_variables_are_refused(variable: str) -> None:
    assert ids(spec(env={variable: "1"}), example_runtime("torch")) == ["reserved-env"]


def test_dispatch_variables_are_refused_even_when_the_spec_was_built_directly() -> None:
    built = spec().model_copy(update={"env": {"DISPATCH_ATTEMPT": "7", "OK": "1"}})
    assert ids(built, example_runtime("torch")) == ["reserved-env"]


def test_other_pet_variables_are_allowed() -> None:
    assert ids(spec(env={"PET_RDZV_BACKEND": "c10d"}), example_runtime("torch")) == []


def test_the_pod_name_pattern() -> None:
    assert longest_pod_name("tj", "node", 1, 10) == "tj-node-0-9-abcde"
    assert longest_pod_name("tj", "workers", 3, 1) == "tj-workers-2-0-abcde"


@pytest.mark.parametrize(
    ("name_length", "nodes", "refused"),
    [(48, 10, False), (49, 10, True), (48, 11, True), (47, 100, False), (48, 100, True)],
)
def test_name_length_boundaries_with_job_node(name_length: int, nodes: int, refused: bool) -> None:
    name = "a" * name_length
    result = ids(spec(nodes=nodes), example_runtime("torch"), name)
    assert result == (["name-length"] if refused else [])


def test_name_length_counts_every_replicated_job() -> None:
    runtime = example_runtime("built-in-torch")  # has a dataset-initializer job
    assert ids(spec(nodes=2), runtime, "a" * 33) == []
    assert ids(spec(nodes=2), runtime, "a" * 34) == ["name-length"]


def test_a_long_trainer_job_name_shortens_the_budget() -> None:
    runtime = example_runtime("torch")
    jobs(runtime)[0]["name"] = "trainer-" + "x" * 20
    assert ids(spec(nodes=2), runtime, "t-ab12c-1") == []
    assert ids(spec(nodes=2), runtime, "a" * 30) == ["name-length"]


def test_the_longest_job_name_of_the_spec_fits_ten_nodes() -> None:
    job_id = "a" * 40 + "-ab12c"
    assert ids(spec(nodes=10), example_runtime("torch"), trainjob_name(job_id, 9)) == []
    assert ids(spec(nodes=10), example_runtime("torch"), trainjob_name(job_id, 10)) == [
        "name-length"
    ]


def test_every_job_check_at_once() -> None:
    result = ids(
        spec(nodes=200, procsPerNode=2, env={"PET_NODE_RANK": "0"}),
        example_runtime("plain"),
        "a" * 48,
    )
    assert result == ["procs-per-node", "reserved-env", "name-length"]

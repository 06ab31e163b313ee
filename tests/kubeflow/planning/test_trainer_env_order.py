"""Where the TrainJob's ``trainer.env`` lands beside a policy's variables, which no Trainer
v2.3.0 test case pins (its tests compare env sorted by name): PlainML and Torch add it before
their own variables (``plainml.go``, ``torch.go``), JAX leaves it to the JobSet builder
(``builder.go`` ``Trainer``), after its own, so a variable the TrainJob sets wins there."""

from __future__ import annotations

from typing import Any

from dispatch.adapters.kubeflow.planning.jobset import render_jobset
from tests.kubeflow.planning.test_jobset import pod_spec, runtime, trainjob


def _env(ml_policy: dict[str, Any], env: list[dict[str, str]]) -> list[tuple[str, Any]]:
    jobset = render_jobset(trainjob({"numNodes": 2, "env": env}), runtime(ml_policy))
    node = next(c for c in pod_spec(jobset, "node")["containers"] if c["name"] == "node")
    return [(var["name"], var.get("value")) for var in node["env"]]


def test_jax_variables_come_first_and_the_trainjob_may_override_them() -> None:
    got = _env(
        {"jax": {}}, [{"name": "A", "value": "a"}, {"name": "JAX_NUM_PROCESSES", "value": "9"}]
    )
    assert got == [
        ("JAX_NUM_PROCESSES", "9"),
        ("JAX_PROCESS_ID", None),
        ("JAX_COORDINATOR_ADDRESS", "test-job-node-0-0.test-job:29500"),
        ("A", "a"),
    ]


def test_xgboost_comes_after_the_trainjob_env() -> None:
    got = _env({"xgboost": {}}, [{"name": "A", "value": "a"}])
    assert got == [
        ("A", "a"),
        ("DMLC_TRACKER_URI", "test-job-node-0-0.test-job"),
        ("DMLC_TRACKER_PORT", "29500"),
        ("DMLC_TASK_ID", None),
        ("DMLC_NUM_WORKER", "2"),
    ]

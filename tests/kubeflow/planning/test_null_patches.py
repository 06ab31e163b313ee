"""A ``null`` in a TrainJob deletes nothing of the runtime: the API server prunes it (the v2.3
CRD's structural schema marks no field ``nullable``) and Trainer reads the TrainJob into Go
types, so ``runtimePatches`` only add to or replace the runtime's fields."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from dispatch.adapters.kubeflow.objects import without_nulls
from dispatch.adapters.kubeflow.planning.jobset import build
from dispatch.adapters.kubeflow.planning.plan import plan_objects, with_jobset
from dispatch.model import Job, Plan, load_spec
from tests.kubeflow.helpers import JOBS, cluster_settings, example_runtimes

SELECTOR = {"node.kubernetes.io/instance-type": "p5.48xlarge"}


def _plan(stem: str = "torch") -> Plan:
    spec = load_spec(JOBS / f"{stem}.yaml")
    assert spec.runtime is not None
    runtime = example_runtimes()[(spec.runtime.kind.value, spec.runtime.name)]
    job = Job(id=f"{spec.name}-x7k2p", spec=spec, created_at=0.0)
    return plan_objects(job, 1, runtime, cluster_settings(spec.cluster))


def _trainer_pod(obj: dict[str, Any], key: str = "template") -> Any:
    """The trainer replicated job's PodSpec in a runtime (``key`` ``template``) or JobSet."""
    spec = obj["spec"][key]["spec"] if key == "template" else obj["spec"]
    job = next(
        rj
        for rj in spec["replicatedJobs"]
        if rj["template"]["metadata"]["labels"].get("trainer.kubeflow.org/trainjob-ancestor-step")
        == "trainer"
    )
    return job["template"]["spec"]["template"]["spec"], job["name"]


def _null_patch(job_name: str) -> dict[str, Any]:
    pod = {"nodeSelector": None, "serviceAccountName": "patched"}
    return {
        "manager": "example.com/tests",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": job_name, "template": {"spec": {"template": {"spec": pod}}}}
                    ]
                }
            }
        },
    }


def test_without_nulls_drops_null_fields_at_any_depth_and_keeps_list_items() -> None:
    value = {"a": None, "b": {"c": None, "d": [1, None, {"e": None, "f": 0}]}, "g": False}
    assert without_nulls(value) == {"b": {"d": [1, None, {"f": 0}]}, "g": False}
    assert value["a"] is None  # a new value


def test_a_null_in_a_runtime_patch_keeps_the_runtime_field() -> None:
    plan = _plan()
    contents = {a.kind: copy.deepcopy(a.content) for a in plan.artifacts}
    runtime, trainjob = contents["TrainingRuntime"], contents["TrainJob"]
    pod, job_name = _trainer_pod(runtime)
    pod["nodeSelector"] = dict(SELECTOR)
    trainjob["spec"]["runtimePatches"] = [_null_patch(job_name)]
    built_pod, _ = _trainer_pod(build(trainjob, runtime).jobset, key="jobset")
    assert built_pod["nodeSelector"] == SELECTOR
    assert built_pod["serviceAccountName"] == "patched"


def test_show_jobset_renders_the_trainjob_as_stored_with_its_nulls_pruned() -> None:
    plan = _plan()
    contents = {a.kind: copy.deepcopy(a.content) for a in plan.artifacts}
    pod, job_name = _trainer_pod(contents["TrainingRuntime"])
    pod["nodeSelector"] = dict(SELECTOR)
    contents["TrainJob"]["spec"]["runtimePatches"] = [_null_patch(job_name)]
    contents["TrainJob"]["spec"]["suspend"] = None
    artifacts = tuple(replace(a, content=contents[a.kind]) for a in plan.artifacts)
    shown = with_jobset(replace(plan, artifacts=artifacts))
    [jobset] = [a.content for a in shown.artifacts if a.kind == "JobSet"]
    assert jobset["spec"]["suspend"] is False  # the null pruned, then the CRD's default
    assert _trainer_pod(jobset, key="jobset")[0]["nodeSelector"] == SELECTOR

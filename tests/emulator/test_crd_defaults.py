"""The v2.3 TrainJob CRD's defaults, applied by the emulator's API server as a real one does:
``spec.suspend`` defaults to false, so the JobSet Trainer builds is never suspended by the
runtime template's ``suspend: true`` (Trainer's JobSet plugin copies the TrainJob's value)."""

from __future__ import annotations

from typing import Any

from dispatch.testing.k8s.runtimes import torch_distributed

from .scenario_helpers import JOBSET, TRAINER, cluster, find, trainjob, wait_for


def test_suspend_defaults_to_false_and_wins_over_the_runtime_template() -> None:
    rt = torch_distributed()
    rt["metadata"]["name"] = "suspended-template"
    rt["spec"]["template"]["spec"]["suspend"] = True
    with cluster() as emu:
        emu.create(rt)
        emu.create(trainjob("tj", "suspended-template"))
        stored = find(emu, TRAINER, "TrainJob", "tj")
        assert stored is not None and stored["spec"]["suspend"] is False
        jobset: Any = wait_for("the JobSet", lambda: find(emu, JOBSET, "JobSet", "tj"))
        assert jobset["spec"]["suspend"] is False
        held = trainjob("held", "suspended-template", suspend=True)
        emu.create(held)
        assert find(emu, TRAINER, "TrainJob", "held")["spec"]["suspend"] is True  # type: ignore[index]


def test_nulls_are_pruned_so_a_runtime_patch_deletes_nothing() -> None:
    """The CRD's structural schema marks nothing ``nullable``: the API server drops a ``null``
    before storing, so a ``null`` in a runtimePatch never removes the runtime's field."""
    rt = torch_distributed()
    rt["metadata"]["name"] = "with-selector"
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][0]
    selector = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    node["template"]["spec"]["template"]["spec"]["nodeSelector"] = selector
    pod_patch = {"nodeSelector": None, "serviceAccountName": "patched"}
    job_patch = {"name": node["name"], "template": {"spec": {"template": {"spec": pod_patch}}}}
    patch = {
        "manager": "example.com/tests",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job_patch]}}},
    }
    with cluster() as emu:
        emu.create(rt)
        emu.create(trainjob("tj", "with-selector", suspend=None, runtimePatches=[patch]))
        stored: Any = find(emu, TRAINER, "TrainJob", "tj")
        assert stored["spec"]["suspend"] is False  # pruned, then defaulted
        [stored_patch] = stored["spec"]["runtimePatches"]
        stored_pod = stored_patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        assert stored_pod["template"]["spec"]["template"]["spec"] == {
            "serviceAccountName": "patched"
        }
        jobset: Any = wait_for("the JobSet", lambda: find(emu, JOBSET, "JobSet", "tj"))
        pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == selector
        assert pod["serviceAccountName"] == "patched"

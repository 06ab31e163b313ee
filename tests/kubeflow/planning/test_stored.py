"""The v2.3 CRD defaults the API server applies to Trainer objects before Trainer reads them
(manifests/base/crds at tag v2.3.0): each default, and what a user stated is never replaced."""

from __future__ import annotations

from typing import Any

from dispatch.adapters.kubeflow.planning.stored import default_runtime, default_trainjob
from tests.kubeflow.helpers import example_runtime


def test_trainjob_defaults_suspend_and_manager_and_keeps_what_is_stated() -> None:
    assert default_trainjob({"spec": {"runtimeRef": {"name": "x"}}})["spec"] == {
        "runtimeRef": {"name": "x"},
        "suspend": False,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }
    stated = {"suspend": True, "managedBy": "kueue.x-k8s.io/multikueue"}
    assert default_trainjob({"spec": dict(stated)})["spec"] == stated


def test_mpi_policy_defaults() -> None:
    runtime: dict[str, Any] = {"spec": {"mlPolicy": {"mpi": {"numProcPerNode": 4}}}}
    assert default_runtime(runtime)["spec"]["mlPolicy"]["mpi"] == {
        "numProcPerNode": 4,
        "mpiImplementation": "OpenMPI",
        "runLauncherAsNode": False,
        "sshAuthMountPath": "/root/.ssh",
    }


def test_gang_and_jobset_defaults() -> None:
    runtime = example_runtime("torch")
    runtime["spec"]["podGroupPolicy"] = {"coscheduling": {}}
    runtime = default_runtime(runtime)
    assert runtime["spec"]["podGroupPolicy"] == {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    jobset = runtime["spec"]["template"]["spec"]
    assert jobset["failurePolicy"]["restartStrategy"] == "Recreate"
    (job,) = jobset["replicatedJobs"]
    assert (job["groupName"], job["replicas"]) == ("default", 1)
    volcano: dict[str, Any] = {"spec": {"podGroupPolicy": {"volcano": {"networkTopology": {}}}}}
    assert default_runtime(volcano)["spec"]["podGroupPolicy"]["volcano"] == {
        "networkTopology": {"highestTierAllowed": 1, "mode": "hard"}
    }


def test_absent_parents_are_not_made_and_wrong_types_are_left_alone() -> None:
    assert default_runtime({"spec": {"mlPolicy": {"torch": {}}}}) == {
        "spec": {"mlPolicy": {"torch": {}}}
    }
    odd: dict[str, Any] = {"spec": {"mlPolicy": {"mpi": "yes"}, "template": {"spec": []}}}
    assert default_runtime(odd) == {"spec": {"mlPolicy": {"mpi": "yes"}, "template": {"spec": []}}}
    assert default_trainjob({"spec": None}) == {}  # a null is pruned, as any other


def test_nulls_are_pruned_first_and_the_input_is_not_changed() -> None:
    raw: dict[str, Any] = {"spec": {"suspend": None, "trainer": {"image": None, "env": [None]}}}
    assert default_trainjob(raw)["spec"] == {
        "suspend": False,
        "trainer": {"env": [None]},
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }
    assert raw["spec"]["suspend"] is None

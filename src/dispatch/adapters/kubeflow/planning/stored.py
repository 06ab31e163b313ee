"""What the API server stores of a Trainer object: the defaults of the v2.3 CRDs.

A TrainJob or runtime is rendered by Trainer as the API server stored it, after the CRD's
structural defaults (``default:`` in ``manifests/base/crds/trainer.kubeflow.org_*.yaml`` at
tag v2.3.0). The emulator applies them on create and update, and ``dispatch plan
--show-jobset`` renders from them, so both show the JobSet a real cluster would build.

Covered: the Trainer-level defaults that reach the JobSet or the plugins. Not covered: the
defaults inside embedded pod templates (``protocol: TCP`` on ports, empty-string keys), which
Trainer copies through unchanged and the API server would add to the JobSet as well.

First every ``null`` field is dropped: the CRDs' structural schemas mark nothing
``nullable``, so a ``null`` (in a runtimePatch, say) never reaches Trainer and deletes nothing.
Pure: a new dict; a field of the wrong type is left alone (validation reports it).
"""

from __future__ import annotations

from typing import Any

from dispatch.adapters.kubeflow.objects import without_nulls

JsonObj = dict[str, Any]

#: ``spec.managedBy`` when the TrainJob does not say
DEFAULT_MANAGER = "trainer.kubeflow.org/trainjob-controller"
#: per ML policy, its fields' defaults
ML_POLICY_DEFAULTS: dict[str, JsonObj] = {
    "mpi": {
        "mpiImplementation": "OpenMPI",
        "numProcPerNode": 1,
        "runLauncherAsNode": False,
        "sshAuthMountPath": "/root/.ssh",
    },
    "flux": {"numProcPerNode": 1},
}
COSCHEDULING_TIMEOUT = 60
NETWORK_TOPOLOGY_DEFAULTS: JsonObj = {"highestTierAllowed": 1, "mode": "hard"}
REPLICATED_JOB_DEFAULTS: JsonObj = {"groupName": "default", "replicas": 1}


def _fill(obj: Any, defaults: JsonObj) -> None:
    if isinstance(obj, dict):
        for key, value in defaults.items():
            obj.setdefault(key, value)


def _mapping(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def default_trainjob(raw: JsonObj) -> JsonObj:
    """The TrainJob as stored: nulls pruned, ``spec.suspend: false`` (so the JobSet always
    takes the TrainJob's suspend, whatever the runtime template says) and ``spec.managedBy``."""
    obj: JsonObj = without_nulls(raw)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("suspend", False)
        spec.setdefault("managedBy", DEFAULT_MANAGER)
    return obj


def default_runtime(raw: JsonObj) -> JsonObj:
    """The TrainingRuntime / ClusterTrainingRuntime as stored: nulls pruned, CRD defaults."""
    obj: JsonObj = without_nulls(raw)
    spec = obj.get("spec")
    for policy, defaults in ML_POLICY_DEFAULTS.items():
        _fill(_mapping(spec, "mlPolicy", policy), defaults)
    _fill(
        _mapping(spec, "podGroupPolicy", "coscheduling"),
        {"scheduleTimeoutSeconds": COSCHEDULING_TIMEOUT},
    )
    _fill(_mapping(spec, "podGroupPolicy", "volcano", "networkTopology"), NETWORK_TOPOLOGY_DEFAULTS)
    jobset = _mapping(spec, "template", "spec")
    _fill(_mapping(jobset, "failurePolicy"), {"restartStrategy": "Recreate"})
    jobs = _mapping(jobset, "replicatedJobs")
    for job in jobs if isinstance(jobs, list) else []:
        _fill(job, REPLICATED_JOB_DEFAULTS)
    return obj

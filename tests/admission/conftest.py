"""Builders for the guard's tests: AdmissionReview requests as kube-apiserver sends them, a
dispatch TrainJob as the adapter makes it, Kueue's updates as its TrainJob integration makes
them, and a certificate pair for loopback."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("cryptography")

from dispatch.adapters.kubeflow.admission.certs import CertFiles, issue
from dispatch.adapters.kubeflow.admission.contract import (
    ANNOTATION_ENDED,
    KUEUE_MANAGER,
    LABEL_ATTEMPT,
    LABEL_JOB,
)

JsonObj = dict[str, Any]
DISPATCH_USER = "system:serviceaccount:dispatch:dispatch-supervisor"
KUEUE_USER = "system:serviceaccount:kueue-system:kueue-controller-manager"
STRANGER = "alice@example.com"
RESOURCES = {
    "TrainJob": "trainjobs",
    "TrainingRuntime": "trainingruntimes",
    "ClusterTrainingRuntime": "clustertrainingruntimes",
}


def _dispatch_entry(attempt: int) -> JsonObj:
    """dispatch's own runtime patch (its identity variables for the trainer container)."""
    env = [{"name": "DISPATCH_ATTEMPT", "value": str(attempt)}]
    pod = {"spec": {"containers": [{"name": "node", "env": env}]}}
    job = {"name": "node", "template": {"spec": {"template": pod}}}
    return {
        "manager": "dispatch.dev/dispatch",
        "time": "2026-12-02T05:00:00Z",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}},
    }


def trainjob(*, suspend: bool = True, ended: str | None = None, attempt: int = 1) -> JsonObj:
    """A TrainJob as dispatch creates it and Kueue's webhook defaults it (its empty entry)."""
    annotations = {ANNOTATION_ENDED: ended} if ended is not None else {}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": f"train-abc-{attempt}",
            "namespace": "ml",
            "uid": "0f6c3a1e-1111-2222-3333-444455556666",
            "labels": {
                LABEL_JOB: "train-abc",
                LABEL_ATTEMPT: str(attempt),
                "kueue.x-k8s.io/queue-name": "team-a",
            },
            "annotations": annotations,
        },
        "spec": {
            "runtimeRef": {"name": "torch-dispatch-abc", "kind": "TrainingRuntime"},
            "trainer": {"numNodes": 2, "image": "pytorch:2.7", "command": ["python", "train.py"]},
            "suspend": suspend,
            "runtimePatches": [
                _dispatch_entry(attempt),
                {
                    "manager": KUEUE_MANAGER,
                    "time": "2026-12-02T05:00:00Z",
                    "trainingRuntimeSpec": {"template": {"spec": {}}},
                },
            ],
        },
    }


def kueue_entry(tj: JsonObj) -> JsonObj:
    return next(p for p in tj["spec"]["runtimePatches"] if p["manager"] == KUEUE_MANAGER)


def kueue_runs(tj: JsonObj) -> JsonObj:
    """The update Kueue's ``RunWithPodSetsInfo`` makes (still suspended): its entry filled
    with the pod sets' labels, annotations, node selector, tolerations and scheduling gates,
    as Go serializes them (an empty ObjectMeta keeps ``creationTimestamp: null``), and
    Trainer's webhook stamps a new ``time``."""
    new = copy.deepcopy(tj)
    entry = kueue_entry(new)
    entry["time"] = "2026-12-02T05:10:00Z"
    entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = [
        {
            "name": "node",
            "template": {"spec": {"template": {
                "metadata": {
                    "creationTimestamp": None,
                    "labels": {"kueue.x-k8s.io/podset": "node"},
                    "annotations": {"kueue.x-k8s.io/workload": "trainjob-train-abc-1-5f3c"},
                },
                "spec": {
                    "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h100"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
                },
            }}},
        }
    ]  # fmt: skip
    return new


def kueue_restores(tj: JsonObj) -> JsonObj:
    """``RestorePodSetsInfo`` after ``Stop``: the entry's replicated jobs set to nil."""
    new = copy.deepcopy(tj)
    entry = kueue_entry(new)
    entry["time"] = "2026-12-02T05:20:00Z"
    entry["trainingRuntimeSpec"]["template"]["spec"].pop("replicatedJobs", None)
    return new


def with_suspend(tj: JsonObj, suspend: bool) -> JsonObj:
    new = copy.deepcopy(tj)
    new["spec"]["suspend"] = suspend
    return new


def request(
    new: JsonObj | None,
    old: JsonObj | None = None,
    *,
    user: str = STRANGER,
    groups: tuple[str, ...] = ("system:authenticated",),
    operation: str | None = None,
    sub_resource: str = "",
    dry_run: bool = False,
    uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002",
) -> JsonObj:
    """The ``request`` of an AdmissionReview v1 for ``new`` (and ``old`` on UPDATE)."""
    obj = new if new is not None else old
    assert obj is not None
    kind = obj["kind"]
    operation = operation or ("UPDATE" if old is not None and new is not None else "CREATE")
    meta = obj["metadata"]
    gvk = {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": kind}
    gvr = {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": RESOURCES[kind]}
    found: JsonObj = {
        "uid": uid,
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": meta["name"],
        "operation": operation,
        "userInfo": {"username": user, "uid": "u-1", "groups": list(groups)},
        "object": new,
        "oldObject": old,
        "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
    }
    if sub_resource:
        found["subResource"] = sub_resource
    if "namespace" in meta:
        found["namespace"] = meta["namespace"]
    return found


def review(req: JsonObj) -> JsonObj:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


@pytest.fixture
def pair(tmp_path: Path) -> CertFiles:
    """A CA and a serving certificate for loopback."""
    return issue(["localhost", "127.0.0.1"], tmp_path / "tls")

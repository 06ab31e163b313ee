"""Runtimes to install in an emulated cluster: Trainer v2.3's built-in ``torch-distributed``
(``manifests/base/runtimes/torch_distributed.yaml``) and a plain one, as manifests."""

from __future__ import annotations

import copy
from typing import Any

JsonObj = dict[str, Any]
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def _node_job(image: str, **pod_spec: Any) -> JsonObj:
    return {
        "name": "node",
        "template": {
            "metadata": {"labels": {ANCESTOR: "trainer"}},
            "spec": {
                "template": {"spec": {"containers": [{"name": "node", "image": image}], **pod_spec}}
            },
        },
    }


_TORCH_DISTRIBUTED: JsonObj = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {
        "name": "torch-distributed",
        "labels": {"trainer.kubeflow.org/framework": "torch"},
    },
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [_node_job("pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime")]
            }
        },
    },
}


def torch_distributed() -> JsonObj:
    """The built-in ClusterTrainingRuntime: no failure policy, so pods restart in place
    (``OnFailure``) and six restarts fail the TrainJob with ``FailedJobs``."""
    return copy.deepcopy(_TORCH_DISTRIBUTED)


def default_runtimes() -> list[JsonObj]:
    """The runtimes an emulated Kubeflow cluster starts with (``dispatch emulator``): those a
    Trainer v2.3 installation ships that the emulator models."""
    return [torch_distributed()]


def torch_strict(name: str = "torch-strict", max_restarts: int = 0) -> JsonObj:
    """A runtime for one-run-per-rank semantics: ``restartPolicy: Never``, ``backoffLimit: 0``,
    a ``DisruptionTarget`` FailJob rule and a JobSet ``failurePolicy``."""
    job = _node_job("pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime", restartPolicy="Never")
    job["template"]["spec"]["backoffLimit"] = 0
    job["template"]["spec"]["podFailurePolicy"] = {
        "rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    }
    runtime = copy.deepcopy(_TORCH_DISTRIBUTED)
    runtime["metadata"]["name"] = name
    runtime["spec"]["template"]["spec"] = {
        "replicatedJobs": [job],
        "failurePolicy": {"maxRestarts": max_restarts},
    }
    return runtime

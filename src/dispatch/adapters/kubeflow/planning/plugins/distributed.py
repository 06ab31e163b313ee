"""What the ML-policy plugins give the trainer's ``node`` container so its pods find each other.

Follows Trainer v2.3.0 ``pkg/constants`` (``ContainerTrainerPort``,
``JobCompletionIndexFieldPath``), the rank-0 host name every policy builds
(``<trainjob>-node-0-0.<trainjob>``, the JobSet's headless service), and ``pkg/runtime``
``ExtractResourcePerNodeFromRuntime`` / ``GetNumGPUPerNode``: the resources one trainer node
gets and how many GPUs that is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.plugins.base import Context
from dispatch.adapters.kubeflow.planning.podspec import (
    JsonObj,
    ancestor,
    containers,
    same_port,
    upsert,
)
from dispatch.adapters.kubeflow.planning.runtime import NODE_CONTAINER, TRAINER_STEP
from dispatch.model.units import quantity_value

#: the port trainer nodes talk on (rendezvous, coordinator, tracker)
TRAINER_PORT = 29500
#: a pod's index in its Job: every policy's rank
COMPLETION_INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def rank0_host(trainjob: str) -> str:
    """The DNS name of the trainer's first pod."""
    return f"{trainjob}-{NODE_CONTAINER}-0-0.{trainjob}"


def rank_env(name: str) -> JsonObj:
    """``name`` set to the pod's completion index."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}}


def open_trainer_port(node: JsonObj) -> None:
    """Trainer's ``apply.UpsertPort`` of the unnamed trainer port."""
    upsert(node.setdefault("ports", []), {"containerPort": TRAINER_PORT}, same_port)


def resources_per_node(ctx: Context) -> Mapping[str, Any]:
    """The TrainJob's ``resourcesPerNode`` when set, else those of the ``node`` container of
    the first replicated job named ``node`` or labelled the trainer (the runtime's, with the
    TrainJob's patches and ``resourcesPerNode`` already merged in); else none."""
    per_node = dig(ctx.trainer, "resourcesPerNode")
    if isinstance(per_node, Mapping):
        return per_node
    for rjob in ctx.rjobs:
        if rjob.get("name") != NODE_CONTAINER and ancestor(rjob) != TRAINER_STEP:
            continue
        for container in containers(rjob):
            if container.get("name") == NODE_CONTAINER:
                found = container.get("resources")
                return found if isinstance(found, Mapping) else {}
    return {}


def gpus_per_node(resources: Mapping[str, Any]) -> int:
    """The first resource whose name says ``gpu`` among the requests, else among the limits
    (Trainer reads a Go map, so which one of several is unordered: here, by name)."""

    def gpus(part: str) -> int:
        items = sorted((resources.get(part) or {}).items())
        return next((quantity_value(q) for name, q in items if "gpu" in name.lower()), 0)

    return gpus("requests") or max(gpus("limits"), 0)

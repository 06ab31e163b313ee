"""The Volcano plugin (Trainer v2.3.0 ``plugins/volcano``): Volcano's gang scheduling.

``EnforcePodGroupPolicy``: every pod (initializers' included) gets the annotation
``scheduling.k8s.io/group-name: <trainjob>``. ``Build``: a ``scheduling.volcano.sh/v1beta1``
PodGroup named as the TrainJob, owned by it, with ``minMember`` and ``minResources`` summed
over every pod (:mod:`.gang`); ``queue`` from the JobSet template annotation
``scheduling.volcano.sh/queue-name`` (runtime, then runtimePatches); ``priorityClassName``
from the last replicated job whose pod template sets one; ``networkTopology`` (mode and
highest tier allowed, with the CRD's defaults ``hard`` and 1) from the policy. The pods keep
the scheduler name the runtime gives them (Volcano's needs ``schedulerName: volcano``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.plugins.base import Context, Plugin
from dispatch.adapters.kubeflow.planning.plugins.gang import gang, pod_group
from dispatch.adapters.kubeflow.planning.podspec import JsonObj

GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
POD_GROUP_API = "scheduling.volcano.sh/v1beta1"
#: ``networkTopology`` defaults (the CRD's)
DEFAULT_TOPOLOGY_MODE = "hard"
DEFAULT_HIGHEST_TIER = 1


def _policy(ctx: Context) -> Any:
    return dig(ctx.runtime, "spec", "podGroupPolicy", "volcano")


def _template_annotations(ctx: Context) -> dict[str, Any]:
    """The JobSet template's annotations: the runtime's, then each runtimePatch's."""
    found = dict(dig(ctx.runtime, "spec", "template", "metadata", "annotations") or {})
    for patch in dig(ctx.trainjob, "spec", "runtimePatches") or []:
        more = dig(patch, "trainingRuntimeSpec", "template", "metadata", "annotations")
        found.update(more or {})
    return found


def _priority_class(ctx: Context) -> str | None:
    found = None
    for rjob in ctx.rjobs:
        name = dig(rjob, "template", "spec", "template", "spec", "priorityClassName")
        if name is not None:
            found = str(name)
    return found


def _network_topology(policy: Any) -> JsonObj | None:
    topology = dig(policy, "networkTopology")
    if not isinstance(topology, Mapping):
        return None
    return {
        "mode": topology.get("mode") or DEFAULT_TOPOLOGY_MODE,
        "highestTierAllowed": topology.get("highestTierAllowed", DEFAULT_HIGHEST_TIER),
    }


class Volcano(Plugin):
    name = "Volcano"

    def applies(self, ctx: Context) -> bool:
        return _policy(ctx) is not None

    def pod_group(self, ctx: Context) -> None:
        ctx.pod_annotations[GROUP_NAME_ANNOTATION] = ctx.name

    def objects(self, ctx: Context) -> list[JsonObj]:
        found = gang(ctx)
        spec: JsonObj = {"minMember": found.members, "minResources": found.min_resources}
        annotations = _template_annotations(ctx)
        if QUEUE_ANNOTATION in annotations:
            spec["queue"] = annotations[QUEUE_ANNOTATION]
        priority = _priority_class(ctx)
        if priority is not None:
            spec["priorityClassName"] = priority
        topology = _network_topology(_policy(ctx))
        if topology is not None:
            spec["networkTopology"] = topology
        return [pod_group(ctx, POD_GROUP_API, spec)]

"""The coscheduling plugin (Trainer v2.3.0 ``plugins/coscheduling``): scheduler-plugins' gang
scheduling.

``EnforcePodGroupPolicy``: every pod (initializers' included) gets the label
``scheduling.x-k8s.io/pod-group: <trainjob>``. ``Build``: a ``scheduling.x-k8s.io/v1alpha1``
PodGroup named as the TrainJob, owned by it, with ``minMember`` and ``minResources`` summed
over every pod (:mod:`.gang`) and the runtime's ``scheduleTimeoutSeconds`` (the CRD's
default, 60, where the stored runtime lacks it). Trainer leaves an existing PodGroup alone
unless the TrainJob is suspended; creating it only where it is missing is the caller's part.
"""

from __future__ import annotations

from typing import Any

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.plugins.base import Context, Plugin
from dispatch.adapters.kubeflow.planning.plugins.gang import gang, pod_group
from dispatch.adapters.kubeflow.planning.podspec import JsonObj

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1"
#: ``CoschedulingPodGroupPolicySource.scheduleTimeoutSeconds`` default (the CRD's)
DEFAULT_SCHEDULE_TIMEOUT = 60


def _policy(ctx: Context) -> Any:
    return dig(ctx.runtime, "spec", "podGroupPolicy", "coscheduling")


class Coscheduling(Plugin):
    name = "CoScheduling"

    def applies(self, ctx: Context) -> bool:
        return _policy(ctx) is not None

    def pod_group(self, ctx: Context) -> None:
        ctx.pod_labels[POD_GROUP_LABEL] = ctx.name

    def objects(self, ctx: Context) -> list[JsonObj]:
        timeout = dig(_policy(ctx), "scheduleTimeoutSeconds")
        found = gang(ctx)
        spec: JsonObj = {
            "minMember": found.members,
            "minResources": found.min_resources,
            "scheduleTimeoutSeconds": DEFAULT_SCHEDULE_TIMEOUT if timeout is None else timeout,
        }
        return [pod_group(ctx, POD_GROUP_API, spec)]

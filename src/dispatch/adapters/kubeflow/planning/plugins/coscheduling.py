"""The coscheduling plugin (``plugins/coscheduling``): scheduler-plugins' gang scheduling.

Every pod gets the label ``scheduling.x-k8s.io/pod-group: <trainjob>``.
"""

from __future__ import annotations

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.plugins.base import Context, Plugin

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class Coscheduling(Plugin):
    name = "CoScheduling"

    def applies(self, ctx: Context) -> bool:
        return dig(ctx.runtime, "spec", "podGroupPolicy", "coscheduling") is not None

    def pod_group(self, ctx: Context) -> None:
        ctx.pod_labels[POD_GROUP_LABEL] = ctx.name

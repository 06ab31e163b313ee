"""What both PodGroup plugins count: every pod that must start together, and their requests.

Follows Trainer v2.3.0 ``plugins/coscheduling`` and ``plugins/volcano`` ``Build``: the sum
over every pod set (initializers included, as Trainer counts them) of ``count`` members and
``count`` times one pod's requests (``runtime.WithPodSet``: ``resource.PodRequests`` of the
runtime's pod template with the TrainJob's ``resourcesPerNode`` merged in).
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.plugins.base import Context
from dispatch.adapters.kubeflow.planning.podspec import JsonObj
from dispatch.adapters.kubeflow.planning.quantity import (
    ResourceList,
    add_into,
    as_text,
    pod_requests,
)


@dataclass(frozen=True)
class Gang:
    """The pods of one TrainJob that are scheduled all at once or not at all."""

    members: int
    resources: ResourceList

    @property
    def min_resources(self) -> dict[str, str]:
        return as_text(self.resources)


def gang(ctx: Context) -> Gang:
    """Members and summed requests over every replicated job's pods (count at least 1)."""
    members = 0
    total: ResourceList = {}
    for rjob, count in zip(ctx.rjobs, ctx.counts, strict=True):
        count = max(count, 1)
        members += count
        pod = dig(rjob, "template", "spec", "template", "spec") or {}
        add_into(total, {k: q.mul(count) for k, q in pod_requests(pod).items()})
    return Gang(members, total)


def pod_group(ctx: Context, api_version: str, spec: JsonObj) -> JsonObj:
    """The gang's PodGroup (named as the TrainJob, owned by it) with ``spec``."""
    group: JsonObj = {
        "apiVersion": api_version,
        "kind": "PodGroup",
        "metadata": {"name": ctx.name},
        "spec": spec,
    }
    return ctx.owned(group)

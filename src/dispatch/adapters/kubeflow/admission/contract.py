"""The names the cluster-side guard, its manifests and dispatch's adapter share (no I/O).

These are a public contract: the webhook configuration and the ValidatingAdmissionPolicy that
``dispatch admission manifests`` prints select and judge objects by them, and the adapter
writes them.

* ``ANNOTATION_ENDED`` (``dispatch.dev/ended``): written by dispatch on a TrainJob whose
  attempt is over, in the same patch as the retirement note and before the deletion; its value
  is the attempt's cause (``preempted``, ``no_capacity``, ...). A TrainJob carrying it is never
  resumed (``spec.suspend`` true to false), by anyone.
* ``ANNOTATION_STARTED`` (``dispatch.dev/started``): written by dispatch when it first sees a
  rank of the attempt run, on a TrainJob Kueue manages (Kueue resumes what it suspended). A suspension after that ends the attempt, so a TrainJob carrying
  it is never resumed either, whether or not dispatch has seen the suspension yet.
* A TrainJob or runtime copy is dispatch's when it carries ``LABEL_JOB``; only dispatch's
  identities may change its spec, except what Kueue sets (``KUEUE_FIELDS``).
* A runtime labelled ``LABEL_CHECKED`` (or matching the configured selector) must pass the
  runtime rules ``dispatch check-runtime`` applies, on create and on update.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dispatch.adapters.kubeflow.causes.coarse import (
    ANNOTATION_ENDED,
    ANNOTATION_STARTED,
    EVENT_RESUME_REFUSED,
)
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings
from dispatch.adapters.kubeflow.planning.trainjob import (
    LABEL_ATTEMPT,
    LABEL_JOB,
    LABEL_MANAGED_BY,
    MANAGED_BY,
)

__all__ = [
    "ANNOTATION_ENDED",
    "ANNOTATION_STARTED",
    "DEFAULT_IDENTITIES",
    "EVENT_RESUME_REFUSED",
    "KUEUE_MANAGER",
    "LABEL_ATTEMPT",
    "LABEL_CHECKED",
    "LABEL_JOB",
    "LABEL_MANAGED_BY",
    "MANAGED_BY",
    "PATH_IDENTITY",
    "PATH_RUNTIMES",
    "WEBHOOK_IDENTITY",
    "WEBHOOK_RUNTIMES",
    "GuardConfig",
]

#: on a ClusterTrainingRuntime or TrainingRuntime: the guard checks it with the runtime rules
LABEL_CHECKED = "dispatch.dev/checked"
#: the manager of Kueue's entry in ``spec.runtimePatches`` (Kueue's TrainJob integration)
KUEUE_MANAGER = "kueue.x-k8s.io/manager"

#: the webhooks of the ValidatingWebhookConfiguration, and the paths the server answers them on
WEBHOOK_IDENTITY = "identity.guard.dispatch.dev"
WEBHOOK_RUNTIMES = "runtimes.guard.dispatch.dev"
PATH_IDENTITY = "/validate/identity"
PATH_RUNTIMES = "/validate/runtimes"

#: the users dispatch writes as by default: the in-cluster supervisor's service account
#: (deploy/) and nobody else; a site adds its own (a laptop's user, a CI robot)
DEFAULT_IDENTITIES = ("system:serviceaccount:dispatch:dispatch-supervisor",)


@dataclass(frozen=True)
class GuardConfig:
    """What the guard enforces, on one cluster."""

    #: users (``request.userInfo.username``) whose writes are dispatch's
    identities: frozenset[str] = frozenset(DEFAULT_IDENTITIES)
    #: groups whose members' writes are dispatch's (empty: none)
    groups: frozenset[str] = frozenset()
    #: the labels selecting the runtimes the runtime rules are enforced on: key -> value, or
    #: key -> None for "the label exists"
    runtime_selector: Mapping[str, str | None] = field(
        default_factory=lambda: {LABEL_CHECKED: None}
    )
    #: the runtime rules' settings (``allowRankRestart``, ``publish``, the allow-list)
    settings: KubeflowSettings = field(default_factory=KubeflowSettings)

    def is_dispatch(self, username: str, groups: tuple[str, ...] | list[str] = ()) -> bool:
        return username in self.identities or any(g in self.groups for g in groups)

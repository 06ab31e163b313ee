"""Every permission the Kubeflow adapter uses, written once.

``VERB_CHECKS`` lists each verb the adapter uses on each resource (to plan, start, hold,
release, follow, read the output of and cancel attempts). Three things are made from it and
from nothing else:

* the probe (``api/probe.py``) asks one SelfSubjectAccessReview per entry, and reports each
  answer as a capability ``access:<verb> <resource>``;
* ``rbac_objects`` gives the least-privilege Role (the namespaced entries) and ClusterRole (the
  cluster-scoped ones) that ``deploy/base/rbac.yaml`` holds;
* the table of docs/reference/permissions.md.

``scripts/permissions.py`` writes the last two; a test fails when they differ from this list.

Deliberately not listed, so neither checked nor granted: discovery and SelfSubjectAccessReviews
(every authenticated user may: the ``system:discovery`` and ``system:basic-user`` roles), and
the probe's optional reads, each answered without it when refused: the namespace itself (the
probe says it "could not be checked"), and Trainer's version (the ConfigMap
``kubeflow-system/kubeflow-trainer-public``, else the TrainJob CRD: when neither is readable
the version is unknown and ``start`` checks that ``spec.runtimePatches`` was kept).
``dispatch diagnose`` reads more kinds (training-operator jobs, a JobSet's own) than listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.api.client import TRAINER_GROUP

JOBSET_GROUP = "jobset.x-k8s.io"
KUEUE_GROUP = "kueue.x-k8s.io"
COSCHEDULING_GROUP = "scheduling.x-k8s.io"
VOLCANO_GROUP = "scheduling.volcano.sh"
RBAC_API = "rbac.authorization.k8s.io/v1"

#: the order verbs are written in (Kubernetes' own: reads, then writes)
VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete")

JsonObj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class VerbCheck:
    """One verb the adapter uses on one resource; ``for_start`` ones refuse jobs when denied."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    cluster_scoped: bool = False
    for_start: bool = False
    #: asked (and needed) only when the cluster serves this API group; empty: always
    served_group: str = ""
    #: what dispatch does with it (the docs' table)
    purpose: str = ""

    @property
    def name(self) -> str:
        plural = f"{self.resource}.{self.group}" if self.group else self.resource
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"access:{self.verb} {plural}{sub}"

    @property
    def rule_resource(self) -> str:
        """The resource as an RBAC rule names it (``pods/log`` for a subresource)."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def _verbs(group: str, resource: str, verbs: str, purpose: str, **kw: Any) -> list[VerbCheck]:
    return [VerbCheck(v, group, resource, purpose=purpose, **kw) for v in verbs.split()]


#: every verb the adapter needs, one purpose per entry
VERB_CHECKS: tuple[VerbCheck, ...] = (
    # start creates an attempt's TrainJob, or adopts the one a previous start created
    *_verbs(TRAINER_GROUP, "trainjobs", "create get", "start an attempt", for_start=True),
    # follow TrainJobs (one stream); hold and release (suspend), cancel, retire
    *_verbs(TRAINER_GROUP, "trainjobs", "list watch patch delete", "follow, hold, release, cancel"),
    # the attempt's copy of its runtime: created, adopted, then owned by its TrainJob
    *_verbs(
        TRAINER_GROUP,
        "trainingruntimes",
        "create get patch",
        "the attempt's runtime copy",
        for_start=True,
    ),
    # a copy that no TrainJob owns (a refused or failed start) is removed; the copies a crash
    # left waiting for their owner reference are listed by label (api/owners.py)
    *_verbs(TRAINER_GROUP, "trainingruntimes", "delete", "remove an unowned runtime copy"),
    *_verbs(
        TRAINER_GROUP, "trainingruntimes", "list", "find the copies a crash left without owner"
    ),
    # the ClusterTrainingRuntime a job names is read at every plan and start
    *_verbs(
        TRAINER_GROUP,
        "clustertrainingruntimes",
        "get",
        "read the runtime a job names",
        cluster_scoped=True,
    ),
    # evidence: each TrainJob's JobSet (read by name, and followed)
    *_verbs(JOBSET_GROUP, "jobsets", "get list watch", "evidence"),
    # evidence: the JobSet's Jobs
    *_verbs("batch", "jobs", "list watch", "evidence"),
    # evidence, and the pods whose logs are read
    *_verbs("", "pods", "list watch", "evidence, output"),
    # output: per-rank logs, and the last words of failed ranks
    VerbCheck("get", "", "pods", subresource="log", purpose="output"),
    # evidence: events about every object above
    *_verbs("", "events", "list watch", "evidence"),
    # jobs with secretEnv: the attempt's Secret, created, adopted, owned, removed
    *_verbs("", "secrets", "create get patch delete", "the Secret of a job's secretEnv"),
    # evidence: Kueue's Workloads (admission, eviction, preemption)
    *_verbs(KUEUE_GROUP, "workloads", "list watch", "evidence", served_group=KUEUE_GROUP),
    # evidence: gang scheduling's PodGroups (scheduler-plugins, Volcano)
    *_verbs(
        COSCHEDULING_GROUP, "podgroups", "list watch", "evidence", served_group=COSCHEDULING_GROUP
    ),
    *_verbs(VOLCANO_GROUP, "podgroups", "list watch", "evidence", served_group=VOLCANO_GROUP),
    # evidence: the nodes that ran an attempt's pods (node lost)
    *_verbs("", "nodes", "list watch", "evidence", cluster_scoped=True),
)


def rbac_rules(
    checks: Iterable[VerbCheck] = VERB_CHECKS, *, cluster_scoped: bool = False
) -> list[JsonObj]:
    """The RBAC rules granting exactly ``checks`` of one scope: one rule per API group and
    resource, in the order they first appear, verbs in ``VERB_ORDER``."""
    verbs: dict[tuple[str, str], set[str]] = {}
    for check in checks:
        if check.cluster_scoped == cluster_scoped:
            verbs.setdefault((check.group, check.rule_resource), set()).add(check.verb)
    return [
        {
            "apiGroups": [group],
            "resources": [resource],
            "verbs": sorted(found, key=_verb_rank),
        }
        for (group, resource), found in verbs.items()
    ]


def _verb_rank(verb: str) -> tuple[int, str]:
    return (VERB_ORDER.index(verb) if verb in VERB_ORDER else len(VERB_ORDER), verb)


def rbac_objects(name: str, checks: Iterable[VerbCheck] = VERB_CHECKS) -> list[JsonObj]:
    """A Role (the namespaced checks) and a ClusterRole (the cluster-scoped ones), both called
    ``name``; the Role has no namespace (the kustomization or ``kubectl -n`` gives it)."""
    listed = tuple(checks)
    return [
        {
            "apiVersion": RBAC_API,
            "kind": kind,
            "metadata": {"name": name},
            "rules": rbac_rules(listed, cluster_scoped=kind == "ClusterRole"),
        }
        for kind in ("Role", "ClusterRole")
    ]

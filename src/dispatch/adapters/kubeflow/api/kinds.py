"""The object kinds dispatch watches for evidence, and how each is selected on the server.

One watch per kind and namespace covers every supervised attempt of a cluster (never one per
job). The label selector narrows each stream as far as the labels allow; what it cannot say
is decided client-side by ``live.attribution.Attribution``:

| kind | selector | why |
|---|---|---|
| TrainJob | ``app.kubernetes.io/managed-by=dispatch,dispatch.dev/cluster=<cluster>`` | dispatch labels its TrainJobs |
| JobSet | none | matched by name (dispatch's runtime patch labels it ``dispatch.dev/job``, but one made by an older dispatch or another tool's TrainJob would not be) |
| Job | ``jobset.sigs.k8s.io/jobset-name`` (exists) | JobSet labels its Jobs; matched by JobSet name |
| Pod | ``dispatch.dev/job`` (exists) | dispatch's runtime patch labels the trainer pods |
| Event (core/v1) | none | events carry no labels; matched by the object they are about |
| Workload | ``kueue.x-k8s.io/job-uid`` (exists) | Kueue labels Workloads with the TrainJob's uid |
| PodGroup (scheduler-plugins, Volcano) | none | Trainer names a TrainJob's PodGroup after it and owns it |
| Node | none (cluster-scoped) | kept for nodes that ran an attempt's pods |

A stream with many objects is checked for the TrainJobs waiting on it alone (``live.capture``): a
kind's ``narrow`` label names each object's TrainJob, so ``narrowed`` selects just their
objects (TrainJob, JobSet: dispatch's job label, which its runtime patch sets on the JobSet;
Job, Pod: the JobSet's name, which is the TrainJob's; Workload: the TrainJob's uid). Events and
Nodes carry no such label.

Events are watched once, through ``core/v1``. An event recorded through ``events.k8s.io/v1``
(Trainer's, Kueue's, the scheduler's) is the same object in the API server's storage, served
under both groups (``regarding`` as ``involvedObject``, ``note`` as ``message``), so the core
stream delivers it too; a second stream through ``events.k8s.io`` would deliver, and be
checked for, every event twice.
A kind the cluster does not serve (no Kueue, no gang scheduler) is skipped after its first 404. A TrainJob Kueue
does not manage (``kueue_may_manage``) has no Workload: its outcome does not wait on that stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.api.client import TRAINJOBS, Resource
from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.names import label_value
from dispatch.adapters.kubeflow.planning.trainjob import (
    LABEL_CLUSTER,
    LABEL_JOB,
    LABEL_MANAGED_BY,
    LABEL_QUEUE,
    MANAGED_BY,
)

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
JOBS = Resource("batch", "v1", "jobs", "Job")
PODS = Resource("", "v1", "pods", "Pod")
CORE_EVENTS = Resource("", "v1", "events", "Event")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
#: the PodGroups of Trainer's ``podGroupPolicy`` (scheduler-plugins coscheduling, Volcano)
COSCHEDULING_PODGROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
VOLCANO_PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
POD_GROUPS = (COSCHEDULING_PODGROUPS, VOLCANO_PODGROUPS)

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
WORKLOAD_JOB_UID = "kueue.x-k8s.io/job-uid"
#: the manager of the runtime patch Kueue's webhook adds to every TrainJob it manages
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
#: what a ``narrow`` label's value is of the TrainJob
NAME, UID, JOB = "name", "uid", "job"


@dataclass(frozen=True, slots=True)
class WatchedKind:
    """One stream: the resource and its label selector (see the module table)."""

    resource: Resource
    selector: str = ""
    #: the label naming an object's TrainJob, and what of the TrainJob it holds (``NAME``,
    #: ``UID`` or ``JOB``: dispatch's job label); empty: the kind cannot be narrowed
    narrow: str = ""
    narrow_by: str = ""

    @property
    def name(self) -> str:
        return f"{self.resource.plural}.{self.resource.group or 'core'}"

    def narrowed(self, values: Iterable[str]) -> str:
        """The selector of this kind's objects whose ``narrow`` label is one of ``values``."""
        term = f"{self.narrow} in ({','.join(sorted(set(values)))})"
        return f"{self.selector},{term}" if self.selector else term


def watched_kinds(cluster: str) -> tuple[WatchedKind, ...]:
    """Every stream for a cluster named ``cluster``; TrainJobs first (they anchor the rest)."""
    trainjobs = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_CLUSTER}={label_value(cluster)}"
    return (
        WatchedKind(TRAINJOBS, trainjobs, LABEL_JOB, JOB),
        WatchedKind(JOBSETS, "", LABEL_JOB, JOB),
        WatchedKind(JOBS, JOBSET_NAME, JOBSET_NAME, NAME),
        WatchedKind(PODS, LABEL_JOB, JOBSET_NAME, NAME),
        WatchedKind(CORE_EVENTS),
        WatchedKind(WORKLOADS, WORKLOAD_JOB_UID, WORKLOAD_JOB_UID, UID),
        *(WatchedKind(res) for res in POD_GROUPS),
        WatchedKind(NODES),
    )


def kueue_may_manage(trainjob: Mapping[str, Any]) -> bool:
    """Whether Kueue may manage this state of a TrainJob, so that a Workload of it may exist.

    Kueue's mutating webhook, at creation, suspends every TrainJob it manages (one with
    Kueue's queue label, which a default LocalQueue sets too, or any TrainJob when
    ``manageJobsWithoutQueueName`` covers its namespace) and adds its runtime patch (manager
    ``kueue.x-k8s.io/manager``, kept: admission writes into it); platform reference D.2. A
    state with none of the three (queue label, ``spec.suspend``, Kueue's patch) is of a
    TrainJob Kueue left alone. An unreadable spec may be managed.
    """
    labels = dig(trainjob, "metadata", "labels")
    if isinstance(labels, Mapping) and LABEL_QUEUE in labels:
        return True
    spec = trainjob.get("spec")
    if not isinstance(spec, Mapping) or spec.get("suspend"):
        return True
    patches = spec.get("runtimePatches")
    if not isinstance(patches, list):
        return patches is not None
    return any(isinstance(p, Mapping) and p.get("manager") == KUEUE_MANAGER for p in patches)

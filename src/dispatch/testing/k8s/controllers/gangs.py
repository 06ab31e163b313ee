"""Gangs: pods that are placed all at once or not at all, and their PodGroups' status.

Two kinds, as Trainer v2.3 makes them (``plugins/coscheduling``, ``plugins/volcano``):

* scheduler-plugins' coscheduling (``scheduling.x-k8s.io/v1alpha1`` PodGroup): a pod with the
  label ``scheduling.x-k8s.io/pod-group: <group>``. Its status is written by scheduler-plugins'
  PodGroup controller (``pkg/controllers/podgroup_controller.go``), which
  :class:`PodGroupController` follows: phase ``Pending`` once seen, ``Scheduling`` once the
  group has ``minMember`` pods, then from the pods' phases ``Running`` (running + succeeded
  reach ``minMember``), ``Failed`` (a member failed and failed + running + succeeded reach
  ``minMember``), ``Finished`` (succeeded reach ``minMember``); back to ``Pending`` when pods
  go missing; ``Finished`` and ``Failed`` are final. Nothing there, nor in the scheduler
  plugin, writes a status or event when a group does not fit: its pods stay ``Pending`` with
  the scheduler's ``FailedScheduling`` message, and ``scheduleTimeoutSeconds`` bounds only
  how long pods already placed wait for their siblings at ``Permit``.
* Volcano (``scheduling.volcano.sh/v1beta1`` PodGroup): a pod with ``schedulerName: volcano``
  and the annotation ``scheduling.k8s.io/group-name: <group>``. Volcano's scheduler writes its
  status itself (``Pending``, ``Inqueue`` once enqueued, ``Running``); the scheduler
  (:mod:`.scheduler`) writes the first two and the ``Unschedulable`` condition, and
  :class:`PodGroupController` the counts and ``Running`` / ``Completed``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dispatch.testing.k8s.controllers.base import Key, Reconciler, write_status
from dispatch.testing.k8s.rbac import service_account_user
from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]

COSCHEDULING_API = "scheduling.x-k8s.io/v1alpha1"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_SCHEDULER = "volcano"
POD_GROUP_APIS = (COSCHEDULING_API, VOLCANO_API)

# scheduler-plugins PodGroup phases (apis/scheduling/v1alpha1 PodGroupPhase)
PENDING = "Pending"  # accepted, fewer than minMember pods (or not all placeable yet)
SCHEDULING = "Scheduling"  # minMember pods exist, fewer than minMember running
RUNNING = "Running"  # minMember pods running (or succeeded)
FINISHED = "Finished"  # minMember pods succeeded
FAILED = "Failed"  # a member failed, and the group had reached minMember
FINAL = (FINISHED, FAILED)

# Volcano PodGroup phases (volcano.sh/apis scheduling PodGroupPhase)
INQUEUE = "Inqueue"  # enqueued: the cluster may hold its minResources
COMPLETED = "Completed"  # minMember pods succeeded


@dataclass(frozen=True)
class Gang:
    """A group of pods: which PodGroup kind (its apiVersion), namespace and name."""

    api: str
    namespace: str
    name: str

    @property
    def volcano(self) -> bool:
        return self.api == VOLCANO_API


def gang_of(pod: JsonObj) -> Gang | None:
    """The gang a pod belongs to: the coscheduling label, or (scheduled by Volcano) the
    group-name annotation; None for a pod scheduled alone."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    label = (meta.get("labels") or {}).get(COSCHEDULING_LABEL)
    if label:
        return Gang(COSCHEDULING_API, namespace, str(label))
    annotation = (meta.get("annotations") or {}).get(VOLCANO_ANNOTATION)
    if annotation and (pod.get("spec") or {}).get("schedulerName") == VOLCANO_SCHEDULER:
        return Gang(VOLCANO_API, namespace, str(annotation))
    return None


def members(pods: Iterable[JsonObj], gang: Gang) -> list[JsonObj]:
    """The gang's pods not being deleted, by name."""
    found = [
        p
        for p in pods
        if gang_of(p) == gang and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    return sorted(found, key=lambda p: p["metadata"]["name"])


def min_member(group: JsonObj) -> int:
    return int((group.get("spec") or {}).get("minMember") or 1)


def _phase_counts(pods: list[JsonObj]) -> tuple[int, int, int]:
    """(running, succeeded, failed) pods (``getCurrentPodStats``)."""
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    return phases.count("Running"), phases.count("Succeeded"), phases.count("Failed")


def coscheduling_status(group: JsonObj, pods: list[JsonObj]) -> JsonObj:
    """The status scheduler-plugins' PodGroup controller writes next (one step per call)."""
    status = copy.deepcopy(group.get("status") or {})
    phase = status.get("phase") or ""
    need = min_member(group)
    if phase in FINAL:
        return status
    if phase == "":
        status["phase"] = PENDING
    elif phase == PENDING:
        if len(pods) >= need:
            status["phase"] = SCHEDULING
    else:
        running, succeeded, failed = _phase_counts(pods)
        status.update(running=running, succeeded=succeeded, failed=failed)
        if len(pods) < need:
            status["phase"] = PENDING
        else:
            status["phase"] = RUNNING if succeeded + running >= need else SCHEDULING
            if failed and failed + running + succeeded >= need:
                status["phase"] = FAILED
            if succeeded >= need:
                status["phase"] = FINISHED
    return {k: v for k, v in status.items() if v not in (0, "")}


def volcano_status(group: JsonObj, pods: list[JsonObj]) -> JsonObj:
    """Volcano's counts, and ``Running`` / ``Completed`` once ``minMember`` pods run or
    succeeded (``Pending``, ``Inqueue`` and the conditions are the scheduler's)."""
    status = copy.deepcopy(group.get("status") or {})
    running, succeeded, failed = _phase_counts(pods)
    status.update(running=running, succeeded=succeeded, failed=failed)
    need = min_member(group)
    if succeeded >= need:
        status["phase"] = COMPLETED
    elif running + succeeded >= need:
        status["phase"] = RUNNING
    elif not status.get("phase"):
        status["phase"] = PENDING
    return {k: v for k, v in status.items() if v != 0}


class PodGroupController(Reconciler):
    """Writes PodGroup status from the pods of the group (module docstring)."""

    name = "podgroups"
    user = service_account_user("scheduler-plugins", "scheduler-plugins-controller")
    watches = (("v1", "Pod"), (COSCHEDULING_API, "PodGroup"), (VOLCANO_API, "PodGroup"))

    def keys(self, change: Change) -> list[Key]:
        if change.rtype.kind == "PodGroup":
            return [(f"{change.rtype.group}|{change.namespace}", change.name)]
        gang = gang_of(change.obj)
        if gang is None:
            return []
        group = gang.api.split("/")[0]
        return [(f"{group}|{gang.namespace}", gang.name)]

    def reconcile(self, key: Key) -> float | None:
        group_name, _, namespace = key[0].partition("|")
        api = next(a for a in POD_GROUP_APIS if a.startswith(f"{group_name}/"))
        group = self.find(api, "PodGroup", namespace, key[1])
        if group is None or group["metadata"].get("deletionTimestamp"):
            return None
        pods = members(self.cluster.store.objects(self.rtype("v1", "Pod")), Gang(api, *key_of(key)))
        write = volcano_status if api == VOLCANO_API else coscheduling_status
        status = write(group, pods)
        if status != (group.get("status") or {}):
            write_status(self.cluster, self.rtype(api, "PodGroup"), group, status)
        return None


def key_of(key: Key) -> tuple[str, str]:
    """(namespace, name) of a :class:`PodGroupController` key."""
    return key[0].partition("|")[2], key[1]

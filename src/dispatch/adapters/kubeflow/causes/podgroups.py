"""Gangs that never form: a PodGroup whose pods could not all be placed together.

Trainer v2.3 makes one PodGroup per TrainJob, named after it, for a runtime with
``podGroupPolicy`` (``plugins/coscheduling``, ``plugins/volcano``). Read here:

* scheduler-plugins (``scheduling.x-k8s.io``): its PodGroup controller writes only the
  group's phase and pod counts (``Pending``, ``Scheduling``, ``Running``, ``Finished``,
  ``Failed``; ``Failed`` means a member pod failed after the group ran) and nothing when the
  group does not fit: its pods stay unscheduled with the scheduler's message. A group not
  ``Running``/``Finished``/``Failed`` whose pods wait for a node is a wait, and it becomes
  ``no_capacity`` once it outlasts the PodGroup's own ``scheduleTimeoutSeconds`` (0 or unset:
  scheduler-plugins' default, 60), the time the gang is given to form.
* Volcano (``scheduling.volcano.sh``): a ``Pending`` or ``Inqueue`` PodGroup with the
  condition ``Unschedulable`` (Volcano's gang plugin, reason ``NotEnoughResources``) is a wait
  from that condition's time, ``no_capacity`` once it outlasts the cluster's patience (Volcano
  has no deadline of its own).

The PodGroup (and the first waiting pod's scheduler message) is the evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.causes.evidence import ObjectHistory, Sighting
from dispatch.adapters.kubeflow.causes.facts import (
    Facts,
    Wait,
    one_line,
    proof,
    sighting_time,
)
from dispatch.adapters.kubeflow.objects import (
    as_int,
    condition,
    created,
    dig,
    labels_of,
    text_of,
    when,
)
from dispatch.model import Cause, Evidence

COSCHEDULING_GROUP = "scheduling.x-k8s.io"
VOLCANO_GROUP = "scheduling.volcano.sh"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
#: scheduler-plugins' wait when a PodGroup sets no ``scheduleTimeoutSeconds`` (or 0)
DEFAULT_SCHEDULE_TIMEOUT = 60.0
#: phases of a gang that has formed (scheduler-plugins; Volcano)
FORMED = ("Running", "Finished", "Failed", "Completed")
#: Volcano phases of a gang not placed yet
VOLCANO_WAITING = ("", "Pending", "Inqueue")


def read_pod_groups(groups: list[ObjectHistory], pods: list[ObjectHistory], facts: Facts) -> None:
    """The waits of the gangs in ``groups`` (module docstring)."""
    for history in groups:
        api = text_of(history.latest.get("apiVersion"))
        if api.startswith(f"{COSCHEDULING_GROUP}/"):
            _coscheduling(history, _members(history, pods, COSCHEDULING_LABEL), facts)
        elif api.startswith(f"{VOLCANO_GROUP}/"):
            _volcano(history, facts)


def _members(group: ObjectHistory, pods: list[ObjectHistory], label: str) -> list[ObjectHistory]:
    namespace = group.ref.namespace
    return [
        p
        for p in pods
        if text_of(labels_of(p.latest).get(label)) == group.ref.name
        and (not namespace or p.ref.namespace in ("", namespace))
    ]


def _formed(obj: Mapping[str, Any]) -> bool:
    return text_of(dig(obj, "status", "phase")) in FORMED


def _unscheduled(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's ``PodScheduled=False/Unschedulable`` condition while it has no node."""
    found = condition(pod, "PodScheduled")
    if dig(pod, "spec", "nodeName") or found is None or found.get("status") != "False":
        return None
    return found if text_of(found.get("reason")) == "Unschedulable" else None


def _first_wait(members: list[ObjectHistory]) -> tuple[float, Sighting, Mapping[str, Any]] | None:
    """The earliest sighting of a member pod waiting for a node: (since, sighting, condition)."""
    found: tuple[float, Sighting, Mapping[str, Any]] | None = None
    for pod in members:
        for sighting in pod.sightings:
            cond = _unscheduled(sighting.obj)
            since = (when(cond) or sighting_time(sighting)) if cond is not None else None
            if cond is not None and since is not None and (found is None or since < found[0]):
                found = (since, sighting, cond)
    return found


def _formed_at(history: ObjectHistory) -> float | None:
    for sighting in history.sightings:
        if _formed(sighting.obj):
            return sighting_time(sighting)
    return None


def _timeout(obj: Mapping[str, Any]) -> float:
    seconds = as_int(dig(obj, "spec", "scheduleTimeoutSeconds"))
    return float(seconds) if seconds else DEFAULT_SCHEDULE_TIMEOUT


def _coscheduling(history: ObjectHistory, members: list[ObjectHistory], facts: Facts) -> None:
    latest = history.latest
    phase = text_of(dig(latest, "status", "phase"))
    first = _first_wait(members)
    if first is None and (members or phase != "Scheduling"):
        return  # no pod of it waited for a node (or none is known to exist)
    if first is not None:
        since, sighting, cond = first
    else:
        since = created(latest) or 0.0
    need = as_int(dig(latest, "spec", "minMember")) or 1
    timeout = _timeout(latest)
    summary = (
        f"the gang of PodGroup {history.ref.name} never formed: its {need} pods "
        f"(minMember) could not all be placed within its scheduleTimeoutSeconds "
        f"({timeout:g}s; phase {phase or 'not set'})"
    )
    proofs: list[Evidence] = []
    if first is not None:
        message = one_line(text_of(cond.get("message")))
        summary += f": {message}" if message else ""
        pod = next(p for p in members if sighting in p.sightings)
        proofs.append(
            proof(pod.ref, sighting.obj, "status.conditions[PodScheduled]", cond, since, summary)
        )
    group_proof = proof(history.ref, latest, "status.phase", phase, since, summary)
    waiting = not _formed(latest) and not history.was_deleted
    ongoing = waiting and (not members or any(_unscheduled(p.latest) for p in members))
    until = history.sightings[-1].at if ongoing else (_formed_at(history) or facts.latest)
    facts.waits.append(
        Wait(
            Cause.NO_CAPACITY,
            since,
            until,
            ongoing,
            summary,
            (group_proof, *proofs),
            patience=timeout,
        )
    )


def _volcano(history: ObjectHistory, facts: Facts) -> None:
    found: tuple[float, Sighting, Mapping[str, Any]] | None = None
    for sighting in history.sightings:
        obj = sighting.obj
        cond = condition(obj, "Unschedulable")
        waiting = text_of(dig(obj, "status", "phase")) in VOLCANO_WAITING
        if cond is None or cond.get("status") != "True" or not waiting:
            continue
        since = when(cond) or sighting_time(sighting)
        if since is not None:
            found = (since, sighting, cond)
            break
    if found is None:
        return
    since, sighting, cond = found
    latest = history.latest
    reason = text_of(cond.get("reason")) or "no reason given"
    message = one_line(text_of(cond.get("message")))
    summary = f"the gang of PodGroup {history.ref.name} (Volcano) is unschedulable ({reason})"
    summary += f": {message}" if message else ""
    evidence = proof(
        history.ref, sighting.obj, "status.conditions[Unschedulable]", cond, since, summary
    )
    still = condition(latest, "Unschedulable")
    ongoing = (
        not history.was_deleted
        and text_of(dig(latest, "status", "phase")) in VOLCANO_WAITING
        and still is not None
        and still.get("status") == "True"
    )
    until = history.sightings[-1].at if ongoing else (_formed_at(history) or facts.latest)
    facts.waits.append(Wait(Cause.NO_CAPACITY, since, until, ongoing, summary, (evidence,)))

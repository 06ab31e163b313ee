"""Facts read from Events (``core/v1`` and ``events.k8s.io/v1``), read the same way.

Events outlive the pods they describe (for an hour, by default), so they are often the only
evidence left when a failed pod was deleted: ``Preempted``, ``TaintManagerEviction``,
``Evicted`` and kubelet start failures on pods; Kueue's ``Stopped`` on the TrainJob;
``TrainJobResourcesCreationFailed``; the Job controller's ``SuccessfulCreate`` (which proves
pods existed) and its failure reasons. An event's time is its first occurrence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from dispatch.adapters.kubeflow.causes.cluster import EVICTIONS
from dispatch.adapters.kubeflow.causes.evidence import ObjectHistory, Ref, event_subject
from dispatch.adapters.kubeflow.causes.facts import (
    Fact,
    Facts,
    Wait,
    one_line,
    proof,
    where,
)
from dispatch.adapters.kubeflow.objects import as_int, created, dig, format_time, text_of, when
from dispatch.model import Cause

_STARTED = re.compile(r"^Started container (?P<name>\S+)")
_CREATED = re.compile(r"^Created pod: (?P<name>\S+)")
#: kubelet messages (reason ``Failed``/``BackOff``) that mean a container cannot start
_START_FAILURE_WORDS = (
    "ErrImagePull",
    "ImagePullBackOff",
    "Failed to pull image",
    "Back-off pulling image",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
)
#: Kueue's Workload event reasons for an eviction: ``EvictedDueTo<Reason>`` and ``Preempted``
_EVICTED_DUE_TO = "EvictedDueTo"


@dataclass(frozen=True, slots=True)
class EventView:
    """One event, whichever API wrote it."""

    ref: Ref
    obj: Any
    kind: str
    name: str
    reason: str
    message: str
    first: float | None
    last: float | None
    count: int
    #: the part of the object it is about (``spec.initContainers{init}``), or ""
    field_path: str = ""


def view(history: ObjectHistory) -> EventView | None:
    obj = history.latest
    subject = event_subject(obj)
    if subject is None:
        return None
    message = text_of(dig(obj, "message")) or text_of(dig(obj, "note"))
    first = when(obj, "firstTimestamp", "eventTime", "deprecatedFirstTimestamp") or created(obj)
    last = (
        when(obj, "lastTimestamp", "deprecatedLastTimestamp")
        or when(dig(obj, "series"), "lastObservedTime")
        or first
    )
    count = as_int(dig(obj, "count")) or as_int(dig(obj, "series", "count")) or 1
    subject_field = text_of(dig(obj, "involvedObject", "fieldPath")) or text_of(
        dig(obj, "regarding", "fieldPath")
    )
    return EventView(
        history.ref,
        obj,
        subject[0],
        subject[1],
        text_of(dig(obj, "reason")),
        one_line(message),
        first,
        last,
        count,
        subject_field,
    )


def read_events(
    events: list[ObjectHistory], facts: Facts, init_containers: dict[str, set[str]]
) -> None:
    """Add the facts every event proves. ``init_containers``: pod -> its init container names."""
    for history in events:
        event = view(history)
        if event is None:
            continue
        facts.saw(event.last)
        handler = _HANDLERS.get(event.kind)
        if handler is not None:
            handler(event, facts, init_containers)


def _fact(event: EventView, cause: Cause, summary: str, **where_: Any) -> Fact:
    value = {
        "reason": event.reason,
        "message": event.message,
        "about": f"{event.kind}/{event.name}",
        "count": event.count,
        "last": format_time(event.last),
    }
    evidence = proof(event.ref, event.obj, event.reason or "reason", value, event.first, summary)
    return Fact(cause, event.first, summary, (evidence,), **where_)


def _on_pod(event: EventView, facts: Facts, init_containers: dict[str, set[str]]) -> None:
    pod = event.name
    rank = facts.rank_of(pod)
    who = where(rank, pod)
    reason, message = event.reason, event.message
    place = {"rank": rank, "pod": pod}
    init = _init_container(event, init_containers.get(pod))
    if init and reason in ("BackOff", "Failed"):
        # an init container that keeps failing: the training container never ran
        summary = f"init container {init} of {who} keeps failing ({reason}): {message}"
        facts.failures.append(_fact(event, Cause.START_FAILURE, summary, **place))
    elif reason == "Preempted":
        facts.failures.append(
            _fact(event, Cause.PREEMPTED, f"{who} was preempted: {message}", **place)
        )
    elif reason == "TaintManagerEviction":
        facts.failures.append(
            _fact(
                event,
                Cause.NODE_LOST,
                f"{who} was evicted by the taint manager: {message}",
                **place,
            )
        )
    elif reason == "Evicted":
        facts.failures.append(
            _fact(event, Cause.PREEMPTED, f"{who} was evicted by the kubelet: {message}", **place)
        )
    elif reason == "NodeNotReady":
        summary = f"the node under {who} is not ready: {message}"
        facts.node_troubles.setdefault(f"pod:{pod}", []).append(
            _fact(event, Cause.NODE_LOST, summary, **place)
        )
    elif reason == "FailedScheduling" and event.first is not None:
        summary = f"{who} could not be scheduled: {message}"
        evidence = _fact(event, Cause.NO_CAPACITY, summary).proofs
        facts.waits.append(
            Wait(Cause.NO_CAPACITY, event.first, event.last, False, summary, evidence, rank, pod)
        )
    elif reason == "BackOff" and "restarting failed container" in message:
        fact = _fact(
            event,
            Cause.UNPLANNED_RECOVERY,
            f"{who} is restarting a failed container: {message}",
            **place,
        )
        # the kubelet restarts a container only when the pod's restartPolicy asks it to
        facts.recoveries.append(replace(fact, planned=f"spec.restartPolicy of pod {pod}"))
    elif reason in ("Failed", "BackOff", "InspectFailed", "ErrImageNeverPull") and any(
        word in message for word in _START_FAILURE_WORDS
    ):
        facts.failures.append(
            _fact(event, Cause.START_FAILURE, f"{who} cannot start: {message}", **place)
        )
    elif reason == "Started":
        match = _STARTED.match(message)
        container = match.group("name") if match else ""
        known = init_containers.get(pod)
        if (known is not None and container and container not in known) or (
            known is None and container == "node"
        ):
            facts.starts.append(
                _fact(event, Cause.UNKNOWN, f"container {container} of {who} started", **place)
            )
    facts.pods_seen = True


def _init_container(event: EventView, known: set[str] | None) -> str:
    """The init container an event is about (its ``fieldPath``, else its message), or ""."""
    path = event.field_path
    if path.startswith("spec.initContainers{") and path.endswith("}"):
        return path[len("spec.initContainers{") : -1]
    match = _BACKOFF_CONTAINER.search(event.message)
    if match and known and match.group("name") in known:
        return match.group("name")
    return ""


_BACKOFF_CONTAINER = re.compile(r"restarting failed container[= ](?P<name>[\w.-]+)")


def _on_job(event: EventView, facts: Facts, _: dict[str, set[str]]) -> None:
    reason, message = event.reason, event.message
    if reason == "SuccessfulCreate" and _CREATED.match(message):
        facts.pods_seen = True
    elif reason == "DeadlineExceeded":
        facts.failures.append(_fact(event, Cause.TIMEOUT, f"Job {event.name}: {message}"))
    elif reason in (
        "BackoffLimitExceeded",
        "PodFailurePolicy",
        "FailedIndexes",
        "MaxFailedIndexesExceeded",
    ):
        facts.ends.append(
            _fact(event, Cause.UNKNOWN, f"Job {event.name} failed ({reason}): {message}")
        )


def _on_trainjob(event: EventView, facts: Facts, _: dict[str, set[str]]) -> None:
    reason, message = event.reason, event.message
    if reason == "TrainJobResourcesCreationFailed":
        facts.failures.append(
            _fact(
                event,
                Cause.START_FAILURE,
                f"Trainer could not create the TrainJob's objects: {message}",
            )
        )
    elif reason == "Stopped":
        cause = Cause.NO_CAPACITY if "PodsReady timeout" in message else Cause.PREEMPTED
        facts.evictions.append(_fact(event, cause, f"Kueue stopped the TrainJob: {message}"))
    elif reason == "Started" and "Admitted" in message:
        facts.admissions.append(
            _fact(event, Cause.UNKNOWN, f"Kueue admitted the TrainJob: {message}")
        )


def _on_jobset(event: EventView, facts: Facts, _: dict[str, set[str]]) -> None:
    reason, message = event.reason, event.message
    if reason == "Restarting" or (
        reason.startswith("Restart") and reason.endswith("FailurePolicyAction")
    ):
        fact = _fact(event, Cause.UNPLANNED_RECOVERY, f"the JobSet restarted ({reason}): {message}")
        planned = facts.plans.get(f"JobSet/{event.name}", "")
        facts.recoveries.append(replace(fact, planned=planned))
    elif reason == "FailJobSetFailurePolicyAction":
        facts.ends.append(_fact(event, Cause.UNKNOWN, f"the JobSet failed ({reason}): {message}"))


def _on_workload(event: EventView, facts: Facts, _: dict[str, set[str]]) -> None:
    reason, message = event.reason, event.message
    if reason.startswith(_EVICTED_DUE_TO) or reason == "Preempted":
        kueue_reason = (
            reason[len(_EVICTED_DUE_TO) :] if reason.startswith(_EVICTED_DUE_TO) else "Preempted"
        )
        cause = EVICTIONS.get(kueue_reason, Cause.PREEMPTED)
        facts.evictions.append(
            _fact(event, cause, f"Kueue evicted the workload ({kueue_reason}): {message}")
        )
    elif reason == "Pending" and "> maximum capacity" in message:
        facts.failures.append(
            _fact(
                event, Cause.NO_CAPACITY, f"the workload can never fit its ClusterQueue: {message}"
            )
        )
    elif reason in ("QuotaReserved", "Admitted"):
        facts.admissions.append(
            _fact(event, Cause.UNKNOWN, f"Kueue admitted the workload: {message}")
        )


#: node events that say the node stopped working (node lifecycle and cloud node controllers)
NODE_TROUBLES = frozenset({"NodeNotReady", "RemovingNode", "DeletingNode", "NodeShutdown"})


def _on_node(event: EventView, facts: Facts, _: dict[str, set[str]]) -> None:
    # which rank ran there is known only from the pods: ``cluster.read_nodes`` joins them
    if event.reason in NODE_TROUBLES:
        summary = f"node {event.name}: {event.reason}: {event.message}"
        facts.node_troubles.setdefault(event.name, []).append(
            _fact(event, Cause.NODE_LOST, summary)
        )


_HANDLERS = {
    "Pod": _on_pod,
    "Job": _on_job,
    "TrainJob": _on_trainjob,
    "JobSet": _on_jobset,
    "Workload": _on_workload,
    "Node": _on_node,
}

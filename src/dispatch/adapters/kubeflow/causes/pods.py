"""Facts read from Pods: disruptions, container exits, start failures, restarts, replacements.

Every sighting of a pod is read, not only the last: a watch may have seen ``lastState`` or a
condition that a later state no longer shows. The same fact seen in several sightings is
reported once.

Consequences are left out here: a container that exited after its pod's deletion was
requested (``deletionTimestamp`` minus the grace period) was killed by that deletion (a Job
failure, a JobSet restart, Kueue suspending the TrainJob, the deadline, a cancel), so its
exit code proves nothing about the application. Only states seen while a deletion was asked
for get that treatment (with the ``SKEW`` tolerance): an exit recorded in a state without
``deletionTimestamp`` came before the deletion, however soon after it the pod was deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dispatch.adapters.kubeflow.causes.evidence import ObjectHistory, Sighting
from dispatch.adapters.kubeflow.causes.facts import (
    Fact,
    Facts,
    Wait,
    one_line,
    proof,
    sighting_time,
    where,
)
from dispatch.adapters.kubeflow.causes.workloads import restart_policy
from dispatch.adapters.kubeflow.objects import (
    as_int,
    as_list,
    conditions,
    created,
    dig,
    labels_of,
    parse_time,
    text_of,
    when,
)
from dispatch.model import Cause, Evidence

#: seconds of clock difference between nodes and the control plane that ordering tolerates
SKEW = 2.0

#: DisruptionTarget reasons (platform reference C.4) -> (cause, what happened)
DISRUPTIONS: dict[str, tuple[Cause, str]] = {
    # kube-scheduler preempted it for a higher-priority pod
    "PreemptionByScheduler": (Cause.PREEMPTED, "was preempted by the scheduler"),
    # kubectl drain, cluster-autoscaler/Karpenter scale-down, spot-interruption handlers
    "EvictionByEvictionAPI": (Cause.PREEMPTED, "was evicted through the Eviction API"),
    # node-pressure eviction or graceful node shutdown (spot/preemptible reclaim)
    "TerminationByKubelet": (Cause.PREEMPTED, "was terminated by the kubelet"),
    # NoExecute taint not tolerated: node unreachable / not ready past tolerationSeconds
    "DeletionByTaintManager": (Cause.NODE_LOST, "was deleted by the taint manager"),
    # bound to a node that no longer exists, or on an out-of-service node
    "DeletionByPodGC": (Cause.NODE_LOST, "was deleted by PodGC"),
    # a device (DRA) taint: the hardware under the pod failed
    "DeletionByDeviceTaintManager": (Cause.NODE_LOST, "was deleted by the device taint manager"),
}

#: pod ``status.reason`` values that say why a pod was stopped -> (cause, what happened)
POD_REASONS: dict[str, tuple[Cause, str]] = {
    "Evicted": (Cause.PREEMPTED, "was evicted by the kubelet"),  # node pressure (not OOM)
    "Terminated": (Cause.PREEMPTED, "was terminated for a node shutdown"),
    "Shutdown": (Cause.PREEMPTED, "was terminated for a node shutdown"),  # before 1.27
    "NodeLost": (Cause.NODE_LOST, "was lost with its node"),
    "DeadlineExceeded": (Cause.TIMEOUT, "exceeded its active deadline"),
    "UnexpectedAdmissionError": (Cause.START_FAILURE, "was rejected by the kubelet"),
}

#: container ``state.waiting.reason`` values that mean it cannot start (C.7)
START_FAILURES = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "RegistryUnavailable",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "PreCreateHookError",
        "PreStartHookError",
    }
)


#: pod ``status.reason`` values given only to a pod that was running: it ran, whatever else
#: the dump (no ``startTime``, no container state) says
RAN_REASONS = frozenset({"Evicted", "Terminated", "Shutdown"})


def read_pods(
    pods: list[ObjectHistory], facts: Facts, replacing: dict[str, str] | None = None
) -> None:
    """Add every pod's facts, then the replacement pods (two pods for one index).

    ``replacing``: for a pod, the field of its controller's spec that asks for a failed pod
    to be replaced (``Job.spec.backoffLimit 6``), when one does."""
    for history in pods:
        _read_pod(history, facts)
    _replacements(pods, facts, replacing or {})


def deletion_requested(history: ObjectHistory) -> float | None:
    """When deletion of the pod was asked for: ``deletionTimestamp`` minus the grace period."""
    times: list[float] = []
    for obj in history.objects():
        at = parse_time(dig(obj, "metadata", "deletionTimestamp"))
        if at is not None:
            grace = as_int(dig(obj, "metadata", "deletionGracePeriodSeconds")) or 0
            times.append(at - grace)
    if history.deleted_at is not None:
        times.append(history.deleted_at)
    return min(times) if times else None


def node_of(history: ObjectHistory) -> str | None:
    for obj in reversed(history.objects()):
        node = dig(obj, "spec", "nodeName")
        if isinstance(node, str) and node:
            return node
    return None


def finished_at(pod: Any) -> float | None:
    """When every main container had terminated (None while one is not terminated)."""
    ends: list[float] = []
    statuses = _statuses(pod, "containerStatuses")
    if not statuses:
        return None
    for status in statuses:
        end = when(dig(status, "state", "terminated"), "finishedAt")
        if end is None:
            return None
        ends.append(end)
    return max(ends)


def _statuses(pod: Any, key: str) -> list[Mapping[str, Any]]:
    return [s for s in as_list(dig(pod, "status", key)) or [] if isinstance(s, Mapping)]


def _read_pod(history: ObjectHistory, facts: Facts) -> None:
    latest = history.latest
    facts.pods_seen = facts.pods_in_evidence = True
    facts.saw(created(latest))
    phase = dig(latest, "status", "phase")
    unfinished = finished_at(latest) is None and phase not in ("Succeeded", "Failed")
    if unfinished and not history.was_deleted:
        facts.live_pods = True
    reader = _PodReader(history, facts)
    for sighting in history.sightings:
        reader.read(sighting)


class _PodReader:
    """Reads the sightings of one pod into ``facts``, each fact once."""

    def __init__(self, history: ObjectHistory, facts: Facts) -> None:
        self.history = history
        self.facts = facts
        self.name = history.ref.name
        self.rank = facts.rank_of(self.name)
        self.node = node_of(history)
        self.deleting = deletion_requested(history)
        self.seen: set[tuple[Any, ...]] = set()

    def add(self, bucket: list[Fact], key: tuple[Any, ...], fact: Fact) -> None:
        if key not in self.seen:
            self.seen.add(key)
            bucket.append(fact)
            self.facts.saw(fact.at)

    def fact(
        self,
        cause: Cause,
        at: float | None,
        summary: str,
        obj: Any,
        field_path: str,
        value: Any,
        exit_code: int | None = None,
    ) -> Fact:
        evidence = proof(self.history.ref, obj, field_path, value, at, summary)
        return Fact(cause, at, summary, (evidence,), self.rank, self.name, self.node, exit_code)

    @property
    def who(self) -> str:
        return where(self.rank, self.name)

    def read(self, sighting: Sighting) -> None:
        obj = sighting.obj
        fallback = sighting_time(sighting)
        for cond in conditions(obj):
            kind, reason = cond.get("type"), text_of(cond.get("reason"))
            status = cond.get("status")
            if kind == "DisruptionTarget" and status == "True":
                self.disruption(obj, cond, reason, when(cond) or fallback)
            elif kind == "PodScheduled" and reason == "Unschedulable" and status == "False":
                self.unschedulable(sighting, cond)
        self.pod_reason(obj, fallback)
        # a state seen while no deletion was asked for came before it (watches deliver in order)
        undeleted = not sighting.deleted and dig(obj, "metadata", "deletionTimestamp") is None
        for init, key in ((True, "initContainerStatuses"), (False, "containerStatuses")):
            for index, status in enumerate(_statuses(obj, key)):
                self.container(obj, status, init, key, index, fallback, undeleted)

    def disruption(self, obj: Any, cond: Mapping[str, Any], reason: str, at: float | None) -> None:
        cause, text = DISRUPTIONS.get(
            reason, (Cause.UNKNOWN, f"was disrupted (reason {reason or 'not given'})")
        )
        message = one_line(text_of(cond.get("message")))
        summary = f"{self.who} {text}" + (f" on node {self.node}" if self.node else "")
        summary += f": {message}" if message else ""
        fact = self.fact(cause, at, summary, obj, "status.conditions[DisruptionTarget]", cond)
        self.add(self.facts.failures, ("disruption", reason), fact)

    def unschedulable(self, sighting: Sighting, cond: Mapping[str, Any]) -> None:
        since = when(cond) or sighting_time(sighting)
        if since is None or ("unschedulable",) in self.seen:
            return
        self.seen.add(("unschedulable",))
        history = self.history
        ongoing = not dig(history.latest, "spec", "nodeName") and not history.was_deleted
        message = one_line(text_of(cond.get("message")))
        summary = f"{self.who} could not be scheduled" + (f": {message}" if message else "")
        evidence = proof(
            history.ref, sighting.obj, "status.conditions[PodScheduled]", cond, since, summary
        )
        last = history.sightings[-1]
        until = last.at if ongoing else sighting_time(last)
        self.facts.waits.append(
            Wait(
                Cause.NO_CAPACITY, since, until, ongoing, summary, (evidence,), self.rank, self.name
            )
        )

    def pod_reason(self, obj: Any, fallback: float | None) -> None:
        reason = text_of(dig(obj, "status", "reason"))
        if reason not in POD_REASONS and not reason.startswith("OutOf"):
            return
        cause, text = POD_REASONS.get(
            reason, (Cause.START_FAILURE, f"was rejected by the kubelet ({reason})")
        )
        message = one_line(text_of(dig(obj, "status", "message")))
        summary = f"{self.who} {text}" + (f": {message}" if message else "")
        value = {"reason": reason, "message": dig(obj, "status", "message")}
        at = _disruption_time(obj) or fallback
        self.add(
            self.facts.failures,
            ("reason", reason),
            self.fact(cause, at, summary, obj, "status.reason", value),
        )
        if reason in RAN_REASONS:
            # only a running pod is evicted or shut down: it had started by then at the latest
            began = parse_time(dig(obj, "status", "startTime")) or at
            text = f"{self.who} was running ({reason} is given only to a running pod)"
            fact = self.fact(Cause.UNKNOWN, began, text, obj, "status.reason", value)
            self.add(self.facts.starts, ("ran", reason), fact)

    def container(
        self,
        obj: Any,
        status: Mapping[str, Any],
        init: bool,
        key: str,
        index: int,
        fallback: float | None,
        undeleted: bool = False,
    ) -> None:
        name = text_of(status.get("name")) or f"#{index}"
        path = f"status.{key}[{name}]"
        for which in ("lastState", "state"):
            term = dig(status, which, "terminated")
            if isinstance(term, Mapping):
                self.terminated(obj, term, f"{path}.{which}.terminated", init, name, undeleted)
            started = when(dig(status, which, "running"), "startedAt")
            if started is None and isinstance(term, Mapping):
                started = when(term, "startedAt")
            if started is not None and not init:
                summary = f"container {name} of {self.who} started"
                fact = self.fact(
                    Cause.UNKNOWN, started, summary, obj, f"{path}.{which}", status.get(which)
                )
                self.add(self.facts.starts, ("start", name, started), fact)
        waiting = text_of(dig(status, "state", "waiting", "reason"))
        if waiting in START_FAILURES:
            message = one_line(text_of(dig(status, "state", "waiting", "message")))
            summary = f"container {name} of {self.who} cannot start: {waiting}"
            summary += f": {message}" if message else ""
            value = dig(status, "state", "waiting")
            fact = self.fact(
                Cause.START_FAILURE, fallback, summary, obj, f"{path}.state.waiting", value
            )
            self.add(self.facts.failures, ("waiting", name, waiting), fact)
        restarts = as_int(status.get("restartCount")) or 0
        if isinstance(dig(status, "lastState", "terminated"), Mapping):
            restarts = max(restarts, 1)  # the kubelet keeps lastState only across a restart
        if restarts > 0 and not init:
            times = [
                when(dig(status, "state", "running"), "startedAt"),
                when(dig(status, "lastState", "terminated"), "finishedAt"),
            ]
            # the restart came after the crash it recovered from
            at = max((t for t in times if t is not None), default=fallback)
            summary = (
                f"container {name} of {self.who} was restarted in place (restartCount {restarts})"
            )
            value = {"restartCount": restarts, "lastState": status.get("lastState")}
            fact = self.fact(
                Cause.UNPLANNED_RECOVERY, at, summary, obj, f"{path}.restartCount", value
            )
            # the kubelet restarts a container only when the pod's restartPolicy asks it to
            policy = f"spec.restartPolicy {restart_policy(obj)} of pod {self.name}"
            self.add(self.facts.recoveries, ("restart", name), replace(fact, planned=policy))

    def terminated(
        self,
        obj: Any,
        term: Mapping[str, Any],
        field_path: str,
        init: bool,
        container: str,
        undeleted: bool = False,
    ) -> None:
        """``undeleted``: seen in a state with no deletion asked for, so the exit cannot be a
        consequence of the deletion, however close in time the deletion followed."""
        code = as_int(term.get("exitCode"))
        reason = text_of(term.get("reason"))
        end = when(term, "finishedAt")
        node = f" on node {self.node}" if self.node else ""
        if reason == "OOMKilled":
            summary = f"container {container} of {self.who} was OOMKilled"
            summary += (f" (exit code {code})" if code is not None else "") + node
            fact = self.fact(Cause.OUT_OF_MEMORY, end, summary, obj, field_path, term, code)
            self.add(self.facts.failures, ("exit", container, end, code), fact)
            return
        if code is None or code == 0 or reason == "ContainerStatusUnknown":
            return
        killed = self.deleting is not None and end is not None and end >= self.deleting - SKEW
        if killed and not undeleted:
            return  # killed by the pod's deletion: a consequence, not a cause
        cause = Cause.START_FAILURE if init else Cause.APP_ERROR
        what = "init container" if init else "container"
        summary = f"{what} {container} of {self.who} exited with code {code}"
        summary += (f" ({reason})" if reason and reason != "Error" else "") + node
        fact = self.fact(cause, end, summary, obj, field_path, term, code)
        self.add(self.facts.failures, ("exit", container, end, code), fact)


def _rerun(
    facts: Facts,
    history: ObjectHistory,
    born: float | None,
    summary: str,
    evidence: Evidence,
    replacing: dict[str, str],
) -> None:
    """Record that the pod ``history`` ran its rank again (planned when its controller's
    spec asks for replacements: ``replacing``)."""
    name = history.ref.name
    facts.recoveries.append(
        Fact(
            Cause.UNPLANNED_RECOVERY,
            born,
            summary,
            (evidence,),
            facts.rank_of(name),
            name,
            node_of(history),
            planned=replacing.get(name, ""),
        )
    )


def _recreated(
    pods: list[ObjectHistory],
    facts: Facts,
    replacing: dict[str, str],
    started: dict[str, float | None],
) -> None:
    """A pod seen under a new uid (training-operator pods keep their name when the operator
    re-creates them): the rank ran again if the earlier pod had started."""
    for history in pods:
        name = history.ref.name
        uids: list[tuple[str, Any]] = []
        for obj in history.objects():
            uid = text_of(dig(obj, "metadata", "uid"))
            if uid and uid not in [u for u, _ in uids]:
                uids.append((uid, obj))
        if len(uids) < 2 or name not in started:
            continue
        for uid, obj in uids[1:]:
            born = created(obj)
            summary = f"pod {name} was created again (uid {uid}) after its earlier pod had run"
            evidence = proof(history.ref, obj, "metadata.uid", uid, born, summary)
            _rerun(facts, history, born, summary, evidence, replacing)


def _disruption_time(pod: Any) -> float | None:
    for cond in conditions(pod):
        if cond.get("type") == "DisruptionTarget":
            return when(cond)
    return None


def _replacements(pods: list[ObjectHistory], facts: Facts, replacing: dict[str, str]) -> None:
    """A pod created for an index whose earlier pod had already started: work ran twice."""
    started = {f.pod: f.at for f in facts.starts if f.pod is not None}
    groups: dict[tuple[Any, ...], list[tuple[float, ObjectHistory]]] = {}
    for history in pods:
        latest = history.latest
        rank = facts.rank_of(history.ref.name)
        if rank is None:
            continue
        labels = labels_of(latest)
        job = (
            text_of(labels.get("jobset.sigs.k8s.io/replicatedjob-name")),
            text_of(labels.get("jobset.sigs.k8s.io/job-index")),
        )
        if job == ("", ""):
            job = (text_of(labels.get("batch.kubernetes.io/job-name")), "")
        if job == ("", ""):
            job = (text_of(labels.get("training.kubeflow.org/job-name")), "")
        born = created(latest) or history.first_seen
        if born is not None:
            groups.setdefault((*job, rank), []).append((born, history))
    _recreated(pods, facts, replacing, started)
    for members in groups.values():
        members.sort(key=lambda pair: (pair[0], pair[1].ref.name))
        for position, (born, history) in enumerate(members[1:], start=1):
            earlier = [h for _, h in members[:position] if h.ref.name in started]
            ran = [h for h in earlier if (started[h.ref.name] or born) <= born + SKEW]
            if not ran:
                continue
            name, first = history.ref.name, ran[0].ref.name
            rank = facts.rank_of(name)
            summary = f"a second pod {name} was created for rank {rank} after pod {first} had run"
            evidence = proof(
                history.ref,
                history.latest,
                "metadata.creationTimestamp",
                {"replaces": first, "labels": dict(labels_of(history.latest))},
                born,
                summary,
            )
            _rerun(facts, history, born, summary, evidence, replacing)

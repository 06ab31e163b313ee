"""Facts read from the objects around the pods: TrainJob, JobSet, Jobs, Kueue Workload, Nodes.

Sources: the platform reference (A.4, A.7, B.2, C.1, C.6, D.2, D.3). Conditions are read in
every sighting, because Kueue resets ``Evicted``/``Preempted`` on readmission and a JobSet may
be deleted (by the deadline, by Trainer) after it failed.
"""

from __future__ import annotations

from typing import Any

from dispatch.adapters.kubeflow.causes.coarse import ANNOTATION_STARTED
from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet, ObjectHistory, Ref
from dispatch.adapters.kubeflow.causes.facts import (
    Fact,
    Facts,
    Wait,
    add_once,
    one_line,
    proof,
    sighting_time,
    where,
)
from dispatch.adapters.kubeflow.causes.pods import SKEW, finished_at, node_of
from dispatch.adapters.kubeflow.causes.workloads import jobset_max_restarts
from dispatch.adapters.kubeflow.objects import (
    annotations_of,
    as_int,
    as_list,
    condition,
    conditions,
    created,
    dig,
    is_true,
    labels_of,
    latest_condition_time,
    parse_time,
    text_of,
    when,
)
from dispatch.model import Cause, Evidence

#: the Kueue label that puts a TrainJob in a LocalQueue (D.3)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: who cancelled, when dispatch (or a person through it) deleted or suspended the TrainJob
CANCELLED_BY = "dispatch.dev/cancelled-by"
#: the node controller marks a node Unknown after this many seconds without a heartbeat
#: (node-monitor-grace-period, 40 s by default): the node was lost that long before [inferred]
NODE_GRACE = 40.0

#: Kueue eviction reasons (Workload ``Evicted``) -> the cause when ranks had started (D.3)
EVICTIONS: dict[str, Cause] = {
    "Preempted": Cause.PREEMPTED,  # quota reclaimed for another workload
    "PodsReadyTimeout": Cause.NO_CAPACITY,  # its pods could not all become ready in time
    "AdmissionCheck": Cause.PREEMPTED,  # an admission check withdrew it
    "ClusterQueueStopped": Cause.PREEMPTED,  # an administrator stopped the queue
    "LocalQueueStopped": Cause.PREEMPTED,
    "Deactivated": Cause.PREEMPTED,  # spec.active=false (see DeactivationTarget)
    "InactiveWorkload": Cause.PREEMPTED,  # Kueue <= 0.9 name of Deactivated
    "NodeFailures": Cause.NODE_LOST,  # TAS: a node of its topology failed
    "FlavorMigration": Cause.PREEMPTED,
}

#: Workload ``QuotaReserved=False`` message marking a request larger than the queue can ever give
EXCEEDS = "> maximum capacity"


def read_root(history: ObjectHistory, facts: Facts) -> None:
    """The workload judged, whatever its kind: identity, queue, suspension; its deletion."""
    latest = history.latest
    ref = history.ref
    facts.workload_kind = ref.kind
    facts.workload = ref.name
    facts.workload_created = created(latest)
    facts.saw(facts.workload_created)
    facts.kueue = bool(labels_of(latest).get(QUEUE_LABEL))
    suspend = dig(latest, "spec", "suspend")
    if suspend is None:
        suspend = dig(latest, "spec", "runPolicy", "suspend")  # training-operator v1
    facts.suspended = suspend is True
    value = {
        "creationTimestamp": dig(latest, "metadata", "creationTimestamp"),
        "suspend": suspend,
        QUEUE_LABEL: labels_of(latest).get(QUEUE_LABEL),
    }
    text = f"{ref.kind} {ref.name} created"
    facts.workload_proof = (proof(ref, latest, "metadata", value, facts.workload_created, text),)
    deleted = parse_time(dig(latest, "metadata", "deletionTimestamp")) or history.deleted_at
    if deleted is not None:
        actor = text_of(annotations_of(latest).get(CANCELLED_BY))
        summary = f"the {ref.kind} was deleted" + (f" by {actor}" if actor else "")
        value = {
            "deletionTimestamp": dig(latest, "metadata", "deletionTimestamp"),
            CANCELLED_BY: actor or None,
        }
        facts.cancels.append(
            Fact(
                Cause.CANCELLED,
                deleted,
                summary,
                (proof(ref, latest, "metadata.deletionTimestamp", value, deleted, summary),),
            )
        )


def read_trainjob(history: ObjectHistory, facts: Facts) -> None:
    """Success, deadline, runtime not supported, other failures; suspension; and the start
    dispatch itself saw and marked (``dispatch.dev/started``), which outlives the pods."""
    ref = history.ref
    for obj in history.objects():
        mark = dig(obj, "metadata", "annotations", ANNOTATION_STARTED)
        started = parse_time(mark)
        if started is not None:
            summary = f"a rank had started by {mark} ({ANNOTATION_STARTED}, written by dispatch)"
            path = f"metadata.annotations[{ANNOTATION_STARTED}]"
            add_once(
                facts.starts,
                Fact(
                    Cause.UNKNOWN,
                    started,
                    summary,
                    (proof(ref, obj, path, mark, started, summary),),
                ),
            )
        for cond in conditions(obj):
            at = when(cond)
            facts.saw(at)
            if cond.get("status") != "True":
                continue
            kind, reason = cond.get("type"), text_of(cond.get("reason"))
            message = one_line(text_of(cond.get("message")))
            path = f"status.conditions[{kind}]"
            if kind == "Complete":
                summary = f"the TrainJob completed ({reason or 'Complete'})"
                add_once(
                    facts.successes,
                    Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, path, cond, at, summary),)),
                )
            elif kind == "Failed":
                cause = {
                    "DeadlineExceeded": Cause.TIMEOUT,
                    "TrainingRuntimeNotSupported": Cause.START_FAILURE,
                }.get(reason)
                summary = (
                    f"the TrainJob failed ({reason}): {message}"
                    if message
                    else f"the TrainJob failed ({reason})"
                )
                fact = Fact(
                    cause or Cause.UNKNOWN, at, summary, (proof(ref, obj, path, cond, at, summary),)
                )
                add_once(facts.failures if cause else facts.ends, fact)
            elif kind == "Suspended" and not facts.kueue:
                summary = "the TrainJob was suspended (not by Kueue: it names no queue)"
                add_once(
                    facts.suspensions,
                    Fact(Cause.CANCELLED, at, summary, (proof(ref, obj, path, cond, at, summary),)),
                )


def read_jobset(history: ObjectHistory, facts: Facts) -> None:
    """Completed/Failed conditions, restarts, and a JobSet re-created under the same TrainJob."""
    ref = history.ref
    uids: list[tuple[float | None, str, Any]] = []
    for sighting in history.sightings:
        obj = sighting.obj
        uid = dig(obj, "metadata", "uid")
        if isinstance(uid, str) and uid not in [u for _, u, _ in uids]:
            uids.append((created(obj) or sighting.at, uid, obj))
        for cond in conditions(obj):
            at = when(cond)
            facts.saw(at)
            if cond.get("status") != "True":
                continue
            kind, reason = cond.get("type"), text_of(cond.get("reason"))
            path = f"status.conditions[{kind}]"
            message = one_line(text_of(cond.get("message")))
            if kind == "Completed":
                summary = f"the JobSet completed ({reason})"
                add_once(
                    facts.successes,
                    Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, path, cond, at, summary),)),
                )
            elif kind == "Failed":
                summary = f"the JobSet failed ({reason}): {message}"
                add_once(
                    facts.ends,
                    Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, path, cond, at, summary),)),
                )
        restarts = as_int(dig(obj, "status", "restarts")) or 0
        if restarts > 0:
            restarting = condition(obj, "RestartingJobSet")
            at = when(restarting) or sighting_time(sighting)
            summary = (
                f"the JobSet restarted its jobs {restarts} time(s) (status.restarts {restarts})"
            )
            value = {"restarts": restarts, "RestartingJobSet": restarting}
            allowed = jobset_max_restarts(obj)
            fact = Fact(
                Cause.UNPLANNED_RECOVERY,
                at,
                summary,
                (proof(ref, obj, "status.restarts", value, at, summary),),
                planned=f"spec.failurePolicy.maxRestarts {allowed} of JobSet {ref.name}"
                if allowed
                else "",
            )
            add_once(facts.recoveries, fact)
            add_once(facts.ran_proofs, fact)
    for born, uid, obj in uids[1:]:
        summary = f"the JobSet was re-created (uid {uid}) and the TrainJob ran again"
        add_once(
            facts.recoveries,
            Fact(
                Cause.UNPLANNED_RECOVERY,
                born,
                summary,
                (proof(ref, obj, "metadata.uid", uid, born, summary),),
            ),
        )


def read_job(history: ObjectHistory, facts: Facts, *, root: bool = False) -> None:
    """A Job's terminal condition: deadline, a podFailurePolicy exit code, or a plain failure;
    its completion when it is the workload judged; its pod counts (pods existed)."""
    ref = history.ref
    for obj in history.objects():
        _job_counts(ref, obj, facts)
        success = condition(obj, "Complete") or condition(obj, "SuccessCriteriaMet")
        if root and success is not None and is_true(success):
            at = when(success)
            facts.saw(at)
            summary = f"the Job completed ({text_of(success.get('reason')) or 'Complete'})"
            path = f"status.conditions[{success.get('type')}]"
            add_once(
                facts.successes,
                Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, path, success, at, summary),)),
            )
        for kind in ("FailureTarget", "Failed"):
            cond = condition(obj, kind)
            if cond is None or not is_true(cond):
                continue
            at = when(cond)
            reason = text_of(cond.get("reason"))
            message = one_line(text_of(cond.get("message")))
            path = f"status.conditions[{kind}]"
            summary = f"Job {ref.name} failed ({reason}): {message}"
            evidence = (proof(ref, obj, path, cond, at, summary),)
            if reason == "DeadlineExceeded":
                add_once(facts.failures, Fact(Cause.TIMEOUT, at, summary, evidence))
            elif reason == "PodFailurePolicy" and " exit code " in message:
                pod, code = _policy_exit(message)
                rank = facts.rank_of(pod) if pod else None
                text = f"{where(rank, pod)} exited with code {code} (Job {ref.name}: {reason})"
                add_once(
                    facts.failures, Fact(Cause.APP_ERROR, at, text, evidence, rank, pod, None, code)
                )
            else:
                add_once(facts.ends, Fact(Cause.UNKNOWN, at, summary, evidence))


def read_workload(history: ObjectHistory, facts: Facts) -> None:
    """Kueue: evictions (every sighting), admission, quota that can never fit, deactivation."""
    ref = history.ref
    latest = history.latest
    facts.saw(created(latest))
    for obj in history.objects():
        for cond in conditions(obj):
            at = when(cond)
            facts.saw(at)
            kind, reason = cond.get("type"), text_of(cond.get("reason"))
            message = one_line(text_of(cond.get("message")))
            path = f"status.conditions[{kind}]"
            if kind == "PodsReady" and (is_true(cond) or reason == "WaitForRecovery"):
                # Kueue says all pods were ready (or, waiting for recovery, had been): ranks ran
                summary = f"Kueue saw the workload's pods ready ({reason or 'PodsReady'})"
                fact = Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, path, cond, at, summary),))
                add_once(facts.starts, fact)
                add_once(facts.ran_proofs, fact)
            if cond.get("status") != "True":
                continue
            if kind == "Evicted":
                cause = EVICTIONS.get(reason, Cause.PREEMPTED)
                summary = f"Kueue evicted the workload ({reason}): {message}"
                add_once(
                    facts.evictions,
                    Fact(cause, at, summary, (proof(ref, obj, path, cond, at, summary),)),
                )
            elif kind == "Preempted":
                summary = f"Kueue preempted the workload ({reason}): {message}"
                add_once(
                    facts.evictions,
                    Fact(Cause.PREEMPTED, at, summary, (proof(ref, obj, path, cond, at, summary),)),
                )
            elif kind in ("QuotaReserved", "Admitted"):
                summary = f"Kueue admitted the workload: {message or reason}"
                add_once(
                    facts.admissions,
                    Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, path, cond, at, summary),)),
                )
            elif kind == "DeactivationTarget":
                cause = (
                    Cause.TIMEOUT if reason == "MaximumExecutionTimeExceeded" else Cause.NO_CAPACITY
                )
                summary = f"Kueue deactivated the workload ({reason}): {message}"
                add_once(
                    facts.failures,
                    Fact(cause, at, summary, (proof(ref, obj, path, cond, at, summary),)),
                )
            elif kind == "Finished" and reason == "Succeeded":
                summary = f"Kueue saw the workload finish: {message}"
                add_once(
                    facts.successes,
                    Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, path, cond, at, summary),)),
                )
    _had_been_ready(history, facts)
    _workload_now(history, facts)


def _had_been_ready(history: ObjectHistory, facts: Facts) -> None:
    """``status.schedulingStats.evictions[]`` with ``underlyingCause: WaitForRecovery``: Kueue
    evicted it while waiting for pods that had all been ready to recover, so ranks ran before
    that eviction (dated just before its ``Evicted`` condition, when the dump has one)."""
    ref, latest = history.ref, history.latest
    for entry in as_list(dig(latest, "status", "schedulingStats", "evictions")) or []:
        if text_of(dig(entry, "underlyingCause")) != "WaitForRecovery":
            continue
        reason = text_of(dig(entry, "reason"))
        evicted = condition(latest, "Evicted")
        at = when(evicted) if evicted is not None and evicted.get("reason") == reason else None
        if at is None:  # readmitted since: the eviction's event (Stopped, EvictedDueTo...) dates it
            words = (
                ("PodsReady timeout", "PodsReadyTimeout") if "PodsReady" in reason else (reason,)
            )
            dated = [
                e.at
                for e in facts.evictions
                if e.at is not None and any(w in e.summary for w in words)
            ]
            at = min(dated, default=None)
        before = at - 1.0 if at is not None else None
        summary = f"Kueue evicted it ({reason}) while waiting for pods that had been ready"
        path = "status.schedulingStats.evictions"
        fact = Fact(Cause.UNKNOWN, before, summary, (proof(ref, latest, path, entry, at, summary),))
        add_once(facts.starts, fact)
        add_once(facts.ran_proofs, fact)


def _workload_now(history: ObjectHistory, facts: Facts) -> None:
    """What the latest sighting says: admitted, or waiting (and for how long), or never to fit."""
    ref, latest = history.ref, history.latest
    reserved = condition(latest, "QuotaReserved")
    admitted = condition(latest, "Admitted")
    facts.admitted_now = is_true(admitted) or (admitted is None and is_true(reserved))
    if facts.admitted_now:
        return
    message = one_line(text_of(dig(reserved, "message")))
    reason = text_of(dig(reserved, "reason"))
    at = when(reserved) or sighting_time(history.sightings[-1])
    if reason == "ExceedsMaxQuota" or EXCEEDS in message:
        summary = f"the workload can never fit its ClusterQueue ({reason}): {message}"
        add_once(
            facts.failures,
            Fact(
                Cause.NO_CAPACITY,
                at,
                summary,
                (proof(ref, latest, "status.conditions[QuotaReserved]", reserved, at, summary),),
            ),
        )
        return
    bases = [created(latest)] + [when(condition(latest, k)) for k in ("Evicted", "Requeued")]
    since = max((b for b in bases if b is not None), default=None)
    if since is None:
        return
    summary = f"Kueue has not admitted the workload ({reason or 'no quota reserved'})" + (
        f": {message}" if message else ""
    )
    value = (
        reserved if reserved is not None else {"conditions": dig(latest, "status", "conditions")}
    )
    evidence = proof(ref, latest, "status.conditions[QuotaReserved]", value, since, summary)
    facts.waits.append(
        Wait(Cause.NO_CAPACITY, since, history.sightings[-1].at, True, summary, (evidence,))
    )


def read_nodes(evidence: EvidenceSet, pods: list[ObjectHistory], facts: Facts) -> None:
    """A node lost under a pod that had not finished: ``node_lost``, at the earliest signal.

    Signals: the Node not Ready (``Unknown`` is dated back by ``NODE_GRACE``, the silence the
    node controller waits for), the Node deleted, and node-trouble events. An event is
    ignored when the node is Ready again since a later time (it recovered).
    """
    healthy: dict[str, float | None] = {}
    signals: dict[str, list[tuple[float | None, str, tuple[Evidence, ...]]]] = {}
    for history in evidence.histories("Node"):
        name, latest = history.ref.name, history.latest
        ready = condition(latest, "Ready")
        if history.was_deleted:
            at = parse_time(dig(latest, "metadata", "deletionTimestamp")) or history.deleted_at
            text = "was deleted"
            value: Any = {"deleted": True}
            path = "metadata"
        elif ready is not None and ready.get("status") != "True":
            at = when(ready)
            if at is not None and ready.get("status") == "Unknown":
                at -= NODE_GRACE
            reason = text_of(ready.get("reason")) or str(ready.get("status"))
            text = f"is not ready ({reason}: {one_line(text_of(ready.get('message')))})"
            value, path = ready, "status.conditions[Ready]"
        else:
            healthy[name] = when(ready) if ready is not None else None
            continue
        summary = f"node {name} {text}"
        signals.setdefault(name, []).append(
            (at, text, (proof(history.ref, latest, path, value, at, summary),))
        )
    for troubled, troubles in facts.node_troubles.items():
        if troubled.startswith("pod:"):
            continue
        for fact in troubles:
            if not _recovered(healthy, troubled, fact.at):
                signals.setdefault(troubled, []).append((fact.at, fact.summary, fact.proofs))
    known = {pod.ref.name: pod for pod in pods}
    for pod in pods:
        node = node_of(pod) or ""
        done = finished_at(pod.latest)
        for at, text, proofs in sorted(signals.get(node, []), key=_time_key):
            if done is not None and at is not None and done < at - SKEW:
                continue
            name = pod.ref.name
            rank = facts.rank_of(name)
            summary = f"node {node} under {where(rank, name)}: {text}"
            facts.failures.append(Fact(Cause.NODE_LOST, at, summary, proofs, rank, name, node))
            facts.saw(at)
            break
    for key, troubles in facts.node_troubles.items():
        if not key.startswith("pod:"):
            continue
        found = known.get(key[4:])
        on = node_of(found) if found else None
        for fact in troubles:
            if on is None or not _recovered(healthy, on, fact.at):
                facts.failures.append(fact)


def _recovered(healthy: dict[str, float | None], node: str, at: float | None) -> bool:
    """The node is Ready now, since after ``at``."""
    if node not in healthy:
        return False
    since = healthy[node]
    return since is not None and at is not None and since > at


def _time_key(signal: tuple[float | None, str, Any]) -> float:
    return signal[0] if signal[0] is not None else float("inf")


def _policy_exit(message: str) -> tuple[str | None, int | None]:
    """(pod, exit code) from ``Container c for pod ns/p failed with exit code n matching ...``."""
    words = message.split()
    pod = code = None
    for i, word in enumerate(words):
        if word == "pod" and i + 1 < len(words):
            pod = words[i + 1].split("/")[-1]
        if word == "code" and i + 1 < len(words):
            code = as_int(words[i + 1].rstrip(",.;"))
    return pod, code


def _job_counts(ref: Ref, obj: Any, facts: Facts) -> None:
    """Pods a Job counted (``status.failed``/``succeeded``/``uncountedTerminatedPods``) existed,
    whether or not they are still there."""
    status = dig(obj, "status")
    counts = {k: as_int(dig(status, k)) or 0 for k in ("failed", "succeeded")}
    uncounted = dig(status, "uncountedTerminatedPods")
    pending = sum(len(as_list(dig(uncounted, k)) or []) for k in ("failed", "succeeded"))
    if not any(counts.values()) and not pending:
        return
    at = latest_condition_time(obj) or created(obj)
    shown = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
    summary = f"Job {ref.name} counted pods that ran ({shown or 'uncounted terminated pods'})"
    value = {**counts, "uncountedTerminatedPods": uncounted}
    add_once(
        facts.ran_proofs,
        Fact(Cause.UNKNOWN, at, summary, (proof(ref, obj, "status", value, at, summary),)),
    )

"""A TrainJob's coarse state, read from the TrainJob alone (pure).

This is the first, coarse reading of an attempt: it never needs pods, Jobs or Workloads. The
typed causes (preempted, out_of_memory, ...) come from the evidence of every object kind and
are derived elsewhere; here a failure has cause ``unknown`` with its condition as evidence.

| the TrainJob | state | cause |
|---|---|---|
| condition ``Complete=True`` | succeeded | |
| condition ``Failed=True`` | failed | unknown (the condition is the evidence) |
| annotated ``dispatch.dev/cancelled-by`` (cancel writes it before deleting) | cancelled | cancelled |
| ``spec.suspend`` with a Kueue queue label | queued | (Kueue admits it by unsuspending) |
| ``spec.suspend`` without a queue | held | (dispatch's hold) |
| ``status.jobsStatus`` with an active or ready Job | running | |
| anything else | queued | (Trainer has not started a Job yet) |

A condition that ended the job wins over a later cancellation: an attempt that ended on its
own is not re-labelled cancelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.objects import dig, true_condition
from dispatch.adapters.kubeflow.planning.trainjob import LABEL_QUEUE
from dispatch.model import Cause, Evidence, Outcome, State

ANNOTATION_CANCELLED_BY = "dispatch.dev/cancelled-by"
ANNOTATION_CANCEL_REASON = "dispatch.dev/cancel-reason"
#: why dispatch deleted a TrainJob whose attempt was over (``live.verdict.Verdicts.must_retire``)
ANNOTATION_RETIRED = "dispatch.dev/retired"
#: the cause of a TrainJob's attempt, written with the retirement note before the deletion: the
#: cluster-side guard (``admission``) refuses to resume a TrainJob carrying it
ANNOTATION_ENDED = "dispatch.dev/ended"
#: when dispatch first saw a rank of the TrainJob's attempt run (on TrainJobs Kueue manages,
#: which Kueue resumes by itself): a suspension after it ends the
#: attempt, so the cluster-side guard refuses to resume a TrainJob carrying it even before
#: dispatch saw the suspension (a supervisor down, or behind)
ANNOTATION_STARTED = "dispatch.dev/started"
#: the reason of the Event the cluster-side guard records on a TrainJob whose resume it refused
EVENT_RESUME_REFUSED = "DispatchResumeRefused"


def _name(trainjob: Mapping[str, Any]) -> str:
    return str(dig(trainjob, "metadata", "name") or "?")


def _condition_evidence(
    trainjob: Mapping[str, Any], condition: Mapping[str, Any], at: float
) -> Evidence:
    name = _name(trainjob)
    reason, message = condition.get("reason", ""), condition.get("message", "")
    return Evidence(
        kind="trainjob",
        key=f"trainjob/{name}/{condition.get('type')}",
        observed_at=at,
        summary=f"TrainJob {name} {condition.get('type')}: {reason}: {message}".rstrip(": "),
        data={
            "trainJob": name,
            "uid": dig(trainjob, "metadata", "uid"),
            "condition": dict(condition),
        },
    )


def trainjob_outcome(trainjob: Mapping[str, Any], observed_at: float) -> Outcome:
    """The coarse outcome of the attempt this TrainJob runs (see the module table)."""
    name = _name(trainjob)
    complete = true_condition(trainjob, "Complete")
    if complete is not None:
        evidence = (_condition_evidence(trainjob, complete, observed_at),)
        return Outcome(State.SUCCEEDED, summary=f"TrainJob {name} completed", evidence=evidence)
    failed = true_condition(trainjob, "Failed")
    if failed is not None:
        evidence = (_condition_evidence(trainjob, failed, observed_at),)
        detail = ": ".join(str(p) for p in (failed.get("reason"), failed.get("message")) if p)
        return Outcome(
            State.FAILED,
            Cause.UNKNOWN,
            summary=f"TrainJob {name} failed" + (f" ({detail})" if detail else ""),
            evidence=evidence,
        )
    annotations = dig(trainjob, "metadata", "annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    actor = annotations.get(ANNOTATION_CANCELLED_BY)
    if actor:
        why = annotations.get(ANNOTATION_CANCEL_REASON) or "cancelled"
        fact = Evidence(
            kind="trainjob",
            key=f"trainjob/{name}/cancelled",
            observed_at=observed_at,
            summary=f"TrainJob {name} cancelled by {actor}: {why}",
            data={"trainJob": name, "actor": actor, "reason": why},
        )
        return Outcome(
            State.CANCELLED,
            Cause.CANCELLED,
            summary=f"cancelled by {actor}: {why}",
            evidence=(fact,),
        )
    if dig(trainjob, "spec", "suspend") is True:
        queue = dig(trainjob, "metadata", "labels", LABEL_QUEUE)
        if queue:
            return Outcome(State.QUEUED, summary=f"waiting in Kueue queue {queue}")
        return Outcome(State.HELD, summary=f"TrainJob {name} is suspended (held)")
    jobs = dig(trainjob, "status", "jobsStatus")
    for job in jobs if isinstance(jobs, list) else []:
        if isinstance(job, Mapping) and any(
            isinstance(job.get(k), int) and job[k] > 0 for k in ("active", "ready")
        ):
            return Outcome(State.RUNNING, summary=f"TrainJob {name} has running Jobs")
    return Outcome(State.QUEUED, summary=f"TrainJob {name} created; no Job running yet")

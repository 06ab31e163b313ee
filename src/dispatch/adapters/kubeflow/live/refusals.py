"""Refused resumes: the records proving the cluster-side guard kept an ended attempt from
running again (pure, no I/O).

Kueue resumes what it suspended: once an attempt it evicted is over, Kueue may admit its
Workload again and set the TrainJob's ``spec.suspend`` to false, which would run the attempt's
ranks a second time under the same ``DISPATCH_ATTEMPT``. dispatch retires such a TrainJob
(``verdict``), and marks it ended first (``dispatch.dev/ended``); the cluster-side guard
(``dispatch admission``) refuses the resume in between. The refusal is recorded as the
attempt's evidence, the attempt's outcome unchanged, from one of two facts:

* **the guard's Event** (``DispatchResumeRefused`` on the TrainJob; the webhook records it):
  proof, with the guard's message and who asked;
* **Kueue admitted the Workload again and the TrainJob stayed suspended** for ``GRACE``
  seconds after that admission (a ValidatingAdmissionPolicy records no Event): Kueue
  unsuspends a TrainJob in the same reconcile that finds its Workload admitted, so a
  TrainJob still suspended that long after was refused. The admission counts from when
  dispatch saw it, or, when it happened before the outcome was final (no supervisor was
  watching), from its ``Admitted`` condition's time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.causes.coarse import (
    ANNOTATION_ENDED,
    ANNOTATION_STARTED,
    EVENT_RESUME_REFUSED,
)
from dispatch.adapters.kubeflow.causes.evidence import event_subject
from dispatch.adapters.kubeflow.objects import dig, text_of, true_condition, when
from dispatch.model import Evidence

#: ``Evidence.data["guard"]`` of a refused resume
RESUME_REFUSED = "resume-refused"
#: seconds a TrainJob must stay suspended after its Workload's readmission was seen before the
#: resume counts as refused
GRACE = 5.0


def refused_by_event(record: Evidence, name: str) -> Evidence | None:
    """The guard record of a refusal Event about TrainJob ``name``, or None."""
    event = record.data
    if record.kind != "event" or dig(event, "reason") != EVENT_RESUME_REFUSED:
        return None
    if event_subject(event) != ("TrainJob", name):
        return None
    uid = text_of(dig(event, "metadata", "uid")) or text_of(dig(event, "metadata", "name"))
    message = text_of(dig(event, "message")) or "(no message)"
    at = text_of(dig(event, "lastTimestamp")) or text_of(dig(event, "eventTime"))
    return Evidence(
        kind="guard",
        key=f"guard/{name}/{RESUME_REFUSED}/{uid}",
        observed_at=record.observed_at,
        summary=f"the cluster-side guard refused to resume TrainJob {name}: {message}",
        data={
            "guard": RESUME_REFUSED,
            "trainJob": name,
            "source": "event",
            "message": message,
            "at": at,
            "count": dig(event, "count"),
        },
    )


def readmitted(record: Evidence) -> str | None:
    """The name of the Workload this record shows admitted by Kueue, or None."""
    if record.kind != "workload" or not true_condition(record.data, "Admitted"):
        return None
    return text_of(dig(record.data, "metadata", "name")) or "?"


def admitted_at(record: Evidence) -> float | None:
    """When Kueue admitted the Workload this record shows admitted (its ``Admitted``
    condition's transition), or None."""
    return when(true_condition(record.data, "Admitted"))


def refused_by_inference(
    name: str,
    trainjob: Mapping[str, Any] | None,
    workload: str,
    seen_at: float,
    now: float,
    grace: float = GRACE,
) -> Evidence | None:
    """The guard record of a resume refused without an Event: Workload ``workload`` was seen
    admitted again at ``seen_at``, after the attempt ended, and the TrainJob, marked ended (or
    started), is still suspended ``grace`` seconds later. None while that is not (yet) so."""
    if trainjob is None or now - seen_at < grace:
        return None
    if dig(trainjob, "spec", "suspend") is not True or dig(
        trainjob, "metadata", "deletionTimestamp"
    ):
        return None
    annotations = dig(trainjob, "metadata", "annotations")
    marks = annotations if isinstance(annotations, Mapping) else {}
    ended = marks.get(ANNOTATION_ENDED)
    if not isinstance(ended, str):
        if ANNOTATION_STARTED not in marks:
            return None
        ended = "suspended after its ranks started"
    waited = now - seen_at
    return Evidence(
        kind="guard",
        key=f"guard/{name}/{RESUME_REFUSED}/{workload}",
        observed_at=now,
        summary=(
            f"Kueue admitted Workload {workload} of TrainJob {name} again after its attempt "
            f"ended ({ended}); the TrainJob stayed suspended {waited:.0f} s since: its resume "
            "was refused"
        ),
        data={
            "guard": RESUME_REFUSED,
            "trainJob": name,
            "source": "inference",
            "workload": workload,
            "ended": ended,
            "waited": round(waited, 3),
        },
    )

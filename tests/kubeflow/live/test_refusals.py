"""Refused resumes of ended attempts: the guard's Event, Kueue's readmission of a TrainJob that
stays suspended, and how ``Verdicts`` and the supervisor record them (the outcome unchanged)."""

from __future__ import annotations

from typing import Any

from dispatch.adapters.kubeflow.causes.coarse import (
    ANNOTATION_ENDED,
    ANNOTATION_STARTED,
    EVENT_RESUME_REFUSED,
)
from dispatch.adapters.kubeflow.live.refusals import (
    GRACE,
    RESUME_REFUSED,
    readmitted,
    refused_by_event,
    refused_by_inference,
)
from dispatch.adapters.kubeflow.live.verdict import MAX_REFUSALS, Standing, Verdicts
from dispatch.model import Cause, Evidence, Outcome, State

NAME = "train-abcde-1"


def _event(reason: str = EVENT_RESUME_REFUSED, subject: str = NAME, uid: str = "e1") -> Evidence:
    data = {
        "kind": "Event",
        "metadata": {"name": f"{subject}.1", "namespace": "ml", "uid": uid},
        "involvedObject": {"kind": "TrainJob", "name": subject, "namespace": "ml"},
        "reason": reason,
        "message": "TrainJob ml/x is attempt 1 of job train-abcde, which ended (preempted)",
        "lastTimestamp": "2026-12-02T06:00:00Z",
        "count": 1,
    }
    return Evidence(kind="event", key=f"Event/ml/{uid}@1", observed_at=200.0, summary="", data=data)


def _workload(admitted: bool, at: float) -> Evidence:
    status = "True" if admitted else "False"
    data = {
        "kind": "Workload",
        "metadata": {"name": "trainjob-x-1a2b3", "namespace": "ml", "resourceVersion": str(at)},
        "status": {"conditions": [{"type": "Admitted", "status": status}]},
    }
    return Evidence(
        kind="workload", key=f"Workload/ml/w@{at}", observed_at=at, summary="", data=data
    )


def _trainjob(
    *, suspend: bool = True, ended: str | None = "preempted", deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": NAME, "namespace": "ml"}
    if ended is not None:
        meta["annotations"] = {ANNOTATION_ENDED: ended}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T06:00:00Z"
    return {"kind": "TrainJob", "metadata": meta, "spec": {"suspend": suspend}}


def test_the_guards_event_is_a_refused_resume_with_its_message() -> None:
    found = refused_by_event(_event(), NAME)
    assert found is not None
    assert found.kind == "guard" and found.data["guard"] == RESUME_REFUSED
    assert found.data["source"] == "event"
    assert "which ended (preempted)" in found.summary and NAME in found.summary
    assert refused_by_event(_event(reason="Stopped"), NAME) is None
    assert refused_by_event(_event(subject="another-1"), NAME) is None


def test_a_readmission_is_a_refusal_only_once_the_trainjob_stayed_suspended_past_the_grace() -> (
    None
):
    assert readmitted(_workload(True, 10.0)) == "trainjob-x-1a2b3"
    assert readmitted(_workload(False, 10.0)) is None
    seen = 100.0
    assert refused_by_inference(NAME, _trainjob(), "w", seen, seen + GRACE - 0.1) is None
    found = refused_by_inference(NAME, _trainjob(), "w", seen, seen + GRACE)
    assert found is not None and found.data["source"] == "inference"
    assert "stayed suspended 5 s" in found.summary and "(preempted)" in found.summary
    later = seen + 60
    assert refused_by_inference(NAME, _trainjob(suspend=False), "w", seen, later) is None
    assert refused_by_inference(NAME, _trainjob(ended=None), "w", seen, later) is None
    assert refused_by_inference(NAME, _trainjob(deleting=True), "w", seen, later) is None
    assert refused_by_inference(NAME, None, "w", seen, later) is None


def _ended_verdicts() -> Verdicts:
    verdicts = Verdicts(patience=600.0)
    final = Outcome(State.FAILED, Cause.PREEMPTED, summary="preempted by Kueue")
    verdicts.standings[NAME] = Standing(final=final, terminal_since=100.0)
    return verdicts


def test_verdicts_record_refusal_events_after_the_end_without_changing_the_outcome() -> None:
    verdicts = _ended_verdicts()
    events = [_event(uid=f"e{i}") for i in range(MAX_REFUSALS + 3)]
    outcome = verdicts.judge(NAME, events, 300.0)
    assert outcome is not None and outcome.cause is Cause.PREEMPTED
    assert verdicts.guarded_names() == [NAME]
    taken = verdicts.take_guard_records(NAME)
    assert len(taken) == MAX_REFUSALS  # Kueue retries for ever: the records are bounded
    assert verdicts.take_guard_records(NAME) == [] and verdicts.guarded_names() == []


def test_verdicts_infer_a_refusal_from_a_readmission_after_the_end_only() -> None:
    verdicts = _ended_verdicts()
    verdicts.judge(NAME, [_workload(True, 50.0)], 300.0)  # admitted before the end: the run
    verdicts.refusal_due(NAME, _trainjob(), 400.0)
    assert verdicts.take_guard_records(NAME) == []
    verdicts = _ended_verdicts()
    verdicts.judge(NAME, [_workload(True, 150.0)], 151.0)
    verdicts.refusal_due(NAME, _trainjob(), 152.0)  # within the grace: Kueue may not have tried
    assert verdicts.take_guard_records(NAME) == []
    verdicts.refusal_due(NAME, _trainjob(), 150.0 + GRACE)
    verdicts.refusal_due(NAME, _trainjob(), 150.0 + 2 * GRACE)  # once
    [found] = verdicts.take_guard_records(NAME)
    assert found.data["workload"] == "trainjob-x-1a2b3"


def test_an_event_makes_the_inference_unnecessary() -> None:
    verdicts = _ended_verdicts()
    verdicts.judge(NAME, [_workload(True, 150.0), _event()], 151.0)
    verdicts.refusal_due(NAME, _trainjob(), 500.0)
    [found] = verdicts.take_guard_records(NAME)
    assert found.data["source"] == "event"


def test_a_trainjob_marked_started_counts_as_ended_for_the_inference() -> None:
    started = _trainjob(ended=None)
    started["metadata"]["annotations"] = {ANNOTATION_STARTED: "2026-12-02T06:00:00Z"}
    found = refused_by_inference(NAME, started, "w", 100.0, 100.0 + GRACE)
    assert found is not None and "(suspended after its ranks started)" in found.summary


def test_what_was_recorded_before_the_end_is_read_when_the_outcome_becomes_final() -> None:
    """A supervisor that was down when the guard refused: the Event and the Workload admitted
    again are already among the records when the attempt's outcome becomes final."""
    verdicts = Verdicts(patience=600.0, settle=0.0)
    outcome = Outcome(State.FAILED, Cause.PREEMPTED, summary="preempted by Kueue")
    standing = Standing(terminal_since=10.0)
    verdicts.standings[NAME] = standing
    records = [_workload(False, 5.0), _event(), _workload(True, 8.0)]
    standing.judged = ((len(records), None), outcome)  # the judgement, as the records give it
    assert verdicts.judge(NAME, records, 20.0) == outcome
    [found] = verdicts.take_guard_records(NAME)
    assert found.data["source"] == "event"
    assert standing.readmission == ("trainjob-x-1a2b3", 20.0)

"""Attribution of observed objects to TrainJobs, and the verdict rules (pure, no cluster)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dispatch.adapters.kubeflow.causes.decide import Inputs, diagnose
from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet, object_evidence
from dispatch.adapters.kubeflow.live.attribution import Attribution
from dispatch.adapters.kubeflow.live.verdict import Verdicts
from dispatch.model import Cause, State

NS = "ml-team"
T0 = "2026-01-01T00:00:00Z"


def meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": NS, "creationTimestamp": T0, **extra}


def trainjob(name: str = "tj", uid: str = "u1", **status: Any) -> dict[str, Any]:
    return {"kind": "TrainJob", "metadata": meta(name, uid=uid, resourceVersion="1"),
            "spec": {}, "status": status}  # fmt: skip


def pod(name: str, index: int, rv: str, **status: Any) -> dict[str, Any]:
    labels = {"jobset.sigs.k8s.io/jobset-name": "tj",
              "batch.kubernetes.io/job-completion-index": str(index)}  # fmt: skip
    return {"kind": "Pod", "metadata": meta(name, labels=labels, resourceVersion=rv),
            "spec": {"nodeName": "node-1", "containers": [{"name": "node"}]}, "status": status}  # fmt: skip


def test_objects_seen_before_their_trainjob_are_adopted_later() -> None:
    index = Attribution()
    early = pod("tj-node-0-0-abcde", 0, "5")
    assert index.assign(early) == []
    index.keep_orphan(early)
    event = {"kind": "Event", "metadata": meta("tj-node-0-0-abcde.1"),
             "involvedObject": {"kind": "Pod", "name": "tj-node-0-0-abcde", "namespace": NS}}  # fmt: skip
    assert index.assign(trainjob()) == [(NS, "tj")] and index.new_trainjob
    assert [ref for ref, _ in index.adopt_orphans()] == [(NS, "tj")]
    assert index.assign(event) == [(NS, "tj")]  # by the pod it is about
    node = {"kind": "Node", "metadata": {"name": "node-1"}}
    assert index.assign(node) == [(NS, "tj")]  # the node its pod ran on
    other = {"kind": "Workload", "metadata": meta("wl", labels={"kueue.x-k8s.io/job-uid": "u1"})}
    assert index.assign(other) == [(NS, "tj")]
    assert index.assign({"kind": "JobSet", "metadata": meta("unrelated")}) == []


def _event_about(kind: str, name: str) -> dict[str, Any]:
    return {"kind": "Event", "metadata": meta(f"{name}.{kind.lower()}"),
            "involvedObject": {"kind": kind, "name": name, "namespace": NS}}  # fmt: skip


def test_a_new_trainjob_adopts_its_own_orphans_and_leaves_the_others() -> None:
    index = Attribution()
    # events about the objects of "tj", of "tj-2" (a name "tj" is a prefix of) and of a
    # Workload named after "tj-2"; one about a node; all kept before any TrainJob is known
    for event in (
        _event_about("Pod", "tj-node-0-0-abcde"),
        _event_about("Job", "tj-2-node-0"),
        _event_about("Workload", "trainjob-tj-2-1a2b3"),
        _event_about("Node", "node-1"),
    ):
        assert index.assign(event) == []
        index.keep_orphan(event)
    index.keep_orphan(pod("tj-node-0-0-abcde", 0, "5"))
    assert index.assign(trainjob("tj-2", uid="u2")) == [(NS, "tj-2")]
    taken = sorted(obj["metadata"]["name"] for _, obj in index.adopt_orphans())
    assert taken == ["tj-2-node-0.job", "trainjob-tj-2-1a2b3.workload"]  # the longest name wins
    assert index.assign(trainjob("tj")) == [(NS, "tj")]
    adopted = index.adopt_orphans()
    assert sorted(obj["kind"] for _, obj in adopted) == ["Event", "Event", "Pod"]
    assert {ref for ref, _ in adopted} == {(NS, "tj")}  # the node event: by the pod on it
    assert index.adopt_orphans() == []  # each handed out once
    index.forget((NS, "tj"))
    assert index.assign(_event_about("Pod", "tj-node-0-0-abcde")) == []
    assert index.assign({"kind": "Node", "metadata": {"name": "node-1"}}) == []


def _failed_pod(rv: str) -> dict[str, Any]:
    terminated = {"exitCode": 3, "reason": "Error", "startedAt": T0,
                  "finishedAt": "2026-01-01T00:00:10Z"}  # fmt: skip
    return pod("tj-node-0-1-abcde", 1, rv, phase="Failed",
               containerStatuses=[{"name": "node", "state": {"terminated": terminated}}])  # fmt: skip


def jobset(uid: str, rv: str) -> dict[str, Any]:
    return {"kind": "JobSet", "metadata": meta("tj", uid=uid, resourceVersion=rv)}


def test_a_terminal_outcome_waits_for_the_streams_then_stays_final() -> None:
    verdicts = Verdicts(patience=600.0)
    records = [object_evidence(trainjob(), 1.0), object_evidence(_failed_pod("7"), 2.0)]
    behind = verdicts.judge("tj", records, 20.0, position=7, caught_up=lambda v, since: False)
    assert behind is None and verdicts.pending("tj")  # not reported before the streams catch up
    final = verdicts.judge("tj", records, 21.0, position=9, caught_up=lambda v, since: v <= 8)
    assert final is not None and (final.state, final.cause) == (State.FAILED, Cause.APP_ERROR)
    assert final.first_failure is not None and final.first_failure.rank == 1
    later = [*records, object_evidence({**trainjob(), "metadata": meta("tj", uid="u1",
             resourceVersion="12", annotations={"dispatch.dev/cancelled-by": "x"})}, 30.0)]  # fmt: skip
    assert verdicts.judge("tj", later, 31.0) == final  # a terminal attempt stays terminal


def test_a_rerun_after_the_end_is_reported_and_retired() -> None:
    verdicts = Verdicts(patience=600.0)
    failed = trainjob(conditions=[{"type": "Failed", "status": "True", "reason": "FailedJobs",
                                   "lastTransitionTime": "2026-01-01T00:00:11Z"}])  # fmt: skip
    records = [object_evidence(failed, 1.0), object_evidence(jobset("js1", "3"), 1.0),
               object_evidence(_failed_pod("7"), 2.0)]  # fmt: skip
    assert verdicts.judge("tj", records, 20.0, settled=True) is not None
    assert verdicts.must_retire("tj", failed) is None  # failed, not suspended: kept for people
    rerun = [*records, object_evidence(jobset("js2", "20"), 40.0)]  # Trainer re-created it (A.7)
    verdicts.judge("tj", rerun, 41.0)
    why = verdicts.must_retire("tj", failed)
    assert why is not None and "ran again" in why
    proof = verdicts.rerun("tj")
    assert proof is not None and proof.data["cause"] == "unplanned_recovery"
    verdicts.retired("tj")
    assert verdicts.must_retire("tj", failed) is None


def test_a_jobset_first_shown_after_the_end_is_the_attempts_own_not_a_rerun() -> None:
    # the TrainJob's Failed (deadline) arrived before the JobSet stream showed its JobSet
    verdicts = Verdicts(patience=600.0)
    late = trainjob(conditions=[{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                                 "lastTransitionTime": "2026-01-01T00:00:11Z"}])  # fmt: skip
    records = [object_evidence(late, 1.0)]
    final = verdicts.judge("tj", records, 20.0, settled=True)
    assert final is not None and final.cause is Cause.TIMEOUT
    shown = [*records, object_evidence(jobset("js1", "3"), 21.0)]
    verdicts.judge("tj", shown, 22.0)
    assert verdicts.rerun("tj") is None and verdicts.must_retire("tj", late) is None
    again = [*shown, object_evidence(jobset("js2", "30"), 40.0)]  # then a real re-run
    verdicts.judge("tj", again, 41.0)
    assert verdicts.rerun("tj") is not None


def test_an_attempt_ended_while_its_trainjob_is_suspended_is_retired() -> None:
    verdicts = Verdicts(patience=60.0)
    queued = {**trainjob(), "spec": {"suspend": True}}
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    wl = {"kind": "Workload", "metadata": meta("wl", uid="w", resourceVersion="2",
          labels={"kueue.x-k8s.io/job-uid": "u1"}),
          "status": {"conditions": [{"type": "QuotaReserved", "status": "False",
                     "reason": "ExceedsMaxQuota", "lastTransitionTime": T0,
                     "message": "couldn't assign flavors: ExceedsMaxQuota"}]}}  # fmt: skip
    outcome = verdicts.judge("tj", [object_evidence(queued, 0.0), object_evidence(wl, 0.0)],
                             1.0, settled=True)  # fmt: skip
    assert outcome is not None and outcome.cause is Cause.NO_CAPACITY
    why = verdicts.must_retire("tj", queued)
    assert why is not None and "no_capacity" in why


def test_a_waiting_attempt_is_judged_again_at_its_patience_not_on_every_change() -> None:
    verdicts = Verdicts(patience=600.0)
    created = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    records = [object_evidence(trainjob(), created + 1.0)]
    diagnosis = diagnose(EvidenceSet.from_evidence(records), Inputs(now=created + 5.0))
    assert diagnosis.changes_at == created + 600.0  # no pod yet: start_failure at the patience
    waiting = verdicts.judge(
        "tj", records, created + 5.0, position=1, caught_up=lambda v, since: True
    )
    assert waiting is not None and not waiting.is_terminal
    # nothing new about it and the patience not reached: no reason to judge it again
    assert not verdicts.pending("tj", created + 300.0)
    assert verdicts.pending("tj", created + 600.0)
    late = verdicts.judge(
        "tj", records, created + 601.0, position=1, caught_up=lambda v, since: True
    )
    assert late is not None and (late.state, late.cause) == (State.FAILED, Cause.START_FAILURE)


def test_a_running_attempt_does_not_change_with_time_alone() -> None:
    started = {"phase": "Running", "startTime": T0,
               "containerStatuses": [{"name": "node", "state": {"running": {"startedAt": T0}}}]}  # fmt: skip
    records = [object_evidence(trainjob(), 1.0), object_evidence(pod("tj-node-0-0-a", 0, "4", **started), 2.0)]  # fmt: skip
    diagnosis = diagnose(EvidenceSet.from_evidence(records), Inputs(now=10_000_000_000.0))
    assert diagnosis.outcome.state is State.RUNNING and diagnosis.changes_at is None
    verdicts = Verdicts(patience=600.0)
    assert verdicts.judge("tj", records, 50.0) == diagnosis.outcome
    assert not verdicts.pending("tj", 10_000_000_000.0)


FAILED_TJ = [{"type": "Failed", "status": "True", "reason": "FailedJobs",
              "lastTransitionTime": "2026-01-01T00:00:12Z"}]  # fmt: skip


def test_a_failed_rank_leaves_its_trainjob_for_post_mortems_in_either_order() -> None:
    """The pod's exit first, Trainer's Failed later (or never): the runtime lets no rank
    restart, so the TrainJob fails by itself and is not deleted; it is only retired if it has
    not failed ``end_grace`` seconds after the end. Failed first, exit later: kept too."""
    exit_first = Verdicts(patience=600.0, end_grace=300.0)
    running = trainjob()
    records = [object_evidence(running, 1.0), object_evidence(_failed_pod("7"), 2.0)]
    final = exit_first.judge("tj", records, 20.0, settled=True)
    assert final is not None and final.cause is Cause.APP_ERROR
    assert exit_first.must_retire("tj", running, 21.0) is None  # Failed not written yet
    assert exit_first.awaits_end("tj", running, 21.0)
    failed = trainjob(conditions=FAILED_TJ)
    assert exit_first.must_retire("tj", failed, 25.0) is None
    assert not exit_first.awaits_end("tj", failed, 25.0)
    why = exit_first.must_retire("tj", running, 20.0 + 300.0)  # never failed on its own
    assert why is not None and "did not fail on its own within 300 s" in why

    failed_first = Verdicts(patience=600.0, end_grace=300.0)
    records = [object_evidence(failed, 1.0), object_evidence(_failed_pod("7"), 2.0)]
    final = failed_first.judge("tj", records, 20.0, settled=True)
    assert final is not None and final.cause is Cause.APP_ERROR
    assert failed_first.must_retire("tj", failed, 21.0) is None
    assert failed_first.must_retire("tj", failed, 10_000.0) is None


def test_a_trainjob_that_could_run_again_is_retired_at_once() -> None:
    """A runtime that lets ranks restart (allowRankRestart), or an attempt dispatch ended
    with no failed pod (a wait, an image that never pulls): nothing fails the TrainJob."""
    restarts = Verdicts(patience=600.0, restarts_allowed=True)
    running = trainjob()
    records = [object_evidence(running, 1.0), object_evidence(_failed_pod("7"), 2.0)]
    assert restarts.judge("tj", records, 20.0, settled=True) is not None
    why = restarts.must_retire("tj", running, 21.0)
    assert why is not None and "could still run" in why

    waiting = Verdicts(patience=60.0)
    outcome = waiting.judge("tj", [object_evidence(running, 0.0)], 1.0e10, settled=True)
    assert outcome is not None and outcome.cause is Cause.START_FAILURE
    why = waiting.must_retire("tj", running, 1.0e10)
    assert why is not None and "could still run" in why

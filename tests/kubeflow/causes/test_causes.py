"""The cause function on small hand-built evidence sets: time ordering, consequences versus
causes, the Kueue rule, recorded histories (objects seen several times), inputs."""

from __future__ import annotations

import copy
from typing import Any

from dispatch.adapters.kubeflow.causes.decide import Inputs, derive_outcome, diagnose
from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet, Ref, object_evidence
from dispatch.adapters.kubeflow.causes.workloads import scoped as scoped_to
from dispatch.adapters.kubeflow.objects import parse_time
from dispatch.model import Cause, State
from tests.kubeflow.causes.objects import (
    TRAINJOB,
    cond,
    container_status,
    ended_conditions,
    epoch,
    event,
    job,
    jobset,
    node,
    pod,
    running,
    running_conditions,
    terminated,
    trainjob,
    ts,
    workload,
)

JOB0 = f"{TRAINJOB}-node-0"


def outcome(*objects: dict[str, Any], **inputs: Any) -> Any:
    return derive_outcome(EvidenceSet.from_objects(objects), Inputs(**inputs))


def crashed(
    index: int,
    code: int,
    at: float,
    *,
    suffix: str = "",
    reason: str = "Error",
    deletion: float | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    return pod(
        index,
        suffix=suffix or f"aaa{index}{index}",
        node=node_name or f"gpu-node-{index + 1}",
        phase="Failed",
        deletion=deletion,
        containers=[container_status(terminated(code, 40, at, reason=reason))],
        conditions=ended_conditions(6, 45, at),
    )


def alive(
    index: int,
    *,
    suffix: str = "",
    node_name: str | None = None,
    started: float = 40,
    created: float = 4,
) -> dict[str, Any]:
    return pod(
        index,
        suffix=suffix or f"bbb{index}{index}",
        node=node_name or f"gpu-node-{index + 1}",
        phase="Running",
        created=created,
        containers=[container_status(running(started), ready=True)],
        conditions=running_conditions(created + 2, started + 5),
    )


def disrupted(index: int, reason: str, at: float, *, suffix: str = "") -> dict[str, Any]:
    item = alive(index, suffix=suffix)
    item["status"]["conditions"].append(cond("DisruptionTarget", "True", at, reason, "disrupted"))
    return item


# --- time: the first failure wins -------------------------------------------------------------


def test_the_first_exit_wins_and_later_peers_are_consequences() -> None:
    result = outcome(trainjob(), crashed(0, 1, 1210), crashed(1, 3, 1200), crashed(2, 1, 1205))
    assert (result.state, result.cause) == (State.FAILED, Cause.APP_ERROR)
    assert (result.first_failure.rank, result.first_failure.exit_code) == (1, 3)
    assert result.first_failure.where == f"{JOB0}-1-aaa11"
    assert result.first_failure.at == epoch(1200)


def test_a_disruption_before_peer_exits_is_the_cause() -> None:
    result = outcome(trainjob(), crashed(0, 1, 930), disrupted(1, "PreemptionByScheduler", 900))
    assert result.cause is Cause.PREEMPTED
    assert result.first_failure.rank == 1


def test_an_exit_before_a_later_disruption_is_the_cause() -> None:
    # the order decides, not the kind of evidence: the app failed first
    result = outcome(trainjob(), crashed(0, 2, 800), disrupted(1, "EvictionByEvictionAPI", 900))
    assert (result.cause, result.first_failure.rank) == (Cause.APP_ERROR, 0)


def test_within_the_clock_skew_a_disruption_outranks_an_exit() -> None:
    result = outcome(trainjob(), crashed(0, 1, 899), disrupted(1, "DeletionByTaintManager", 900))
    assert result.cause is Cause.NODE_LOST


def test_an_exit_after_the_pods_deletion_is_not_a_cause() -> None:
    # killed with SIGTERM by the Job controller: nothing else explains the end
    killed = crashed(0, 143, 1001, deletion=1000)
    result = outcome(
        trainjob([cond("Failed", "True", 1002, "FailedJobs", "jobset failed")]), killed
    )
    assert (result.state, result.cause) == (State.FAILED, Cause.UNKNOWN)
    assert "nothing in the dump says why" in result.summary
    assert any("#status.conditions[Failed]" in e.key for e in result.evidence)


def test_an_exit_recorded_before_a_prompt_deletion_is_the_cause() -> None:
    # rank 1 exits 7 and its pod is force-deleted half a second later (a clean-up): the state
    # recorded before the deletion shows the exit came first, whatever the clock skew
    failed = crashed(1, 7, 1000)
    records = [
        object_evidence(failed, epoch(1000.2)),
        object_evidence(failed, epoch(1000.5), deleted=True),
        object_evidence(
            trainjob([cond("Failed", "True", 1002, "FailedJobs", "jobset failed")]), epoch(1002)
        ),
    ]
    result = derive_outcome(EvidenceSet.from_evidence(records), Inputs())
    assert (result.state, result.cause) == (State.FAILED, Cause.APP_ERROR)
    assert result.first_failure is not None
    assert (result.first_failure.rank, result.first_failure.exit_code) == (1, 7)
    # seen only in its deletion record, the same exit is not told apart from a kill
    gone = derive_outcome(EvidenceSet.from_evidence(records[1:]), Inputs())
    assert gone.cause is Cause.UNKNOWN


def test_oom_in_last_state_counts_and_node_pressure_is_not_oom() -> None:
    oom = alive(0)
    oom["status"]["containerStatuses"][0]["lastState"] = terminated(
        137, 40, 500, reason="OOMKilled"
    )
    restarted = outcome(trainjob(), oom)
    assert restarted.cause is Cause.UNPLANNED_RECOVERY  # the kubelet ran it again
    assert (restarted.first_failure.exit_code, "OOMKilled" in restarted.summary) == (137, True)
    result = outcome(trainjob(), oom, restarts_allowed=True)
    assert (result.cause, result.first_failure.exit_code) == (Cause.OUT_OF_MEMORY, 137)
    evicted = crashed(1, 137, 530)
    evicted["status"].update(reason="Evicted", message="The node was low on resource: memory. ")
    evicted["status"]["conditions"].append(
        cond(
            "DisruptionTarget",
            "True",
            500,
            "TerminationByKubelet",
            "The node was low on resource: memory. ",
        )
    )
    assert outcome(trainjob(), evicted).cause is Cause.PREEMPTED


# --- Kueue ------------------------------------------------------------------------------------


def _evicted_workload(at: float) -> dict[str, Any]:
    return workload(
        [
            cond("Evicted", "True", at, "Preempted", "Preempted to accommodate a workload"),
            cond("QuotaReserved", "False", at, "Pending", ""),
        ],
        admitted_cq=None,
    )


def test_a_kueue_eviction_before_any_rank_started_is_not_the_end() -> None:
    pending = pod(
        0,
        suffix="ccc00",
        node=None,
        phase="Pending",
        containers=[],
        conditions=[cond("PodScheduled", "False", 5, "Unschedulable", "0/4 nodes")],
        deletion=60,
    )
    result = outcome(
        trainjob(queue="team-a", suspend=True), _evicted_workload(60), pending, patience=3600
    )
    assert (result.state, result.cause) == (State.QUEUED, None)
    assert "before any rank started" in result.summary


def test_a_kueue_eviction_after_a_rank_started_ends_it_as_preempted() -> None:
    result = outcome(
        trainjob(queue="team-a", suspend=True),
        _evicted_workload(600),
        crashed(0, 143, 601, deletion=600),
    )
    assert (result.state, result.cause) == (State.FAILED, Cause.PREEMPTED)
    assert result.first_failure is None


def test_dispatch_s_started_mark_proves_a_start_the_pods_no_longer_show() -> None:
    """Kueue's suspension deleted the pods before this reader saw them run; the TrainJob's
    ``dispatch.dev/started`` (written by dispatch when it saw a rank run, at the start's time)
    still makes the eviction end the attempt. A start marked after the eviction does not."""
    pending = pod(
        0,
        suffix="ccc00",
        node=None,
        phase="Pending",
        containers=[],
        conditions=[cond("PodScheduled", "False", 5, "Unschedulable", "0/4 nodes")],
        deletion=600,
    )
    marked = trainjob(queue="team-a", suspend=True, annotations={"dispatch.dev/started": ts(300)})
    result = outcome(marked, _evicted_workload(600), pending)
    assert (result.state, result.cause) == (State.FAILED, Cause.PREEMPTED)
    late = trainjob(queue="team-a", suspend=True, annotations={"dispatch.dev/started": ts(900)})
    result = outcome(late, _evicted_workload(600), pending, patience=3600)
    assert (result.state, result.cause) == (State.RUNNING, None)


def test_an_eviction_seen_once_survives_kueue_resetting_it_on_readmission() -> None:
    evicted = _evicted_workload(600)
    readmitted = copy.deepcopy(evicted)
    readmitted["metadata"]["resourceVersion"] = "99999"
    readmitted["status"]["conditions"] = [
        cond("Evicted", "False", 700, "QuotaReserved", ""),
        cond("QuotaReserved", "True", 700, "QuotaReserved", ""),
    ]
    started = alive(0)
    records = [
        object_evidence(trainjob(queue="team-a"), epoch(10)),
        object_evidence(started, epoch(50)),
        object_evidence(evicted, epoch(601)),
        object_evidence(readmitted, epoch(701)),
    ]
    result = derive_outcome(EvidenceSet.from_evidence(records))
    assert result.cause is Cause.PREEMPTED
    assert any("#status.conditions[Evicted]" in e.key for e in result.evidence)


def test_kueue_resuming_a_preempted_attempt_is_unplanned_recovery() -> None:
    first = crashed(0, 143, 601, suffix="old00", deletion=600)
    again = alive(0, suffix="new00", node_name="gpu-node-7", started=920, created=900)
    result = outcome(trainjob(queue="team-a"), _evicted_workload(600), first, again)
    assert (result.state, result.cause) == (State.RUNNING, Cause.UNPLANNED_RECOVERY)
    assert "Kueue evicted" in result.summary  # what it recovered from


def test_new_pods_after_an_eviction_before_start_are_not_a_replacement() -> None:
    never_ran = pod(
        0,
        suffix="old00",
        node=None,
        phase="Pending",
        containers=[],
        conditions=[cond("PodScheduled", "False", 5, "Unschedulable", "")],
        deletion=60,
    )
    now_runs = pod(
        0,
        suffix="new00",
        node="gpu-node-1",
        phase="Running",
        created=300,
        containers=[container_status(running(320), ready=True)],
        conditions=running_conditions(301, 325),
    )
    result = outcome(trainjob(queue="team-a"), _evicted_workload(60), never_ran, now_runs)
    assert (result.state, result.cause) == (State.RUNNING, None)


# --- recovery, cancel, inputs -----------------------------------------------------------------


def test_rank_restarts_are_expected_when_the_runtime_allows_them() -> None:
    restarted = alive(0)
    restarted["status"]["containerStatuses"][0].update(
        restartCount=1, lastState=terminated(1, 40, 500)
    )
    assert outcome(trainjob(), restarted).cause is Cause.UNPLANNED_RECOVERY
    allowed = outcome(trainjob(), restarted, restarts_allowed=True)
    assert allowed.cause is Cause.APP_ERROR  # still the failure it is


def test_a_jobset_recreated_under_the_same_trainjob_is_unplanned_recovery() -> None:
    # A.7: a failed TrainJob re-run when its JobSet disappears
    old, new = jobset(created=2, uid_seed="a"), jobset(created=3000, uid_seed="b")
    records = [
        object_evidence(old, epoch(5)),
        object_evidence(alive(0), epoch(60)),
        object_evidence(new, epoch(3001)),
    ]
    result = derive_outcome(
        EvidenceSet.from_evidence([object_evidence(trainjob(), epoch(1)), *records])
    )
    assert result.cause is Cause.UNPLANNED_RECOVERY
    assert "re-created" in result.summary


def test_a_cancel_by_dispatch_wins_over_what_followed_it() -> None:
    killed = crashed(0, 1, 1010)
    result = outcome(trainjob(), killed, cancelled_by="bob", cancelled_at=epoch(1000))
    assert (result.state, result.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert "bob" in result.summary
    late = outcome(trainjob(), killed, cancelled_by="bob", cancelled_at=epoch(1100))
    assert late.cause is Cause.APP_ERROR  # it had already failed


def test_a_suspended_trainjob_without_a_queue_is_held_until_it_ran() -> None:
    held = trainjob(
        [cond("Suspended", "True", 1, "Suspended", "TrainJob is suspended")], suspend=True
    )
    assert outcome(held).state is State.HELD
    suspended_later = trainjob(
        [cond("Suspended", "True", 500, "Suspended", "TrainJob is suspended")], suspend=True
    )
    result = outcome(suspended_later, crashed(0, 143, 501, deletion=500))
    assert (result.state, result.cause) == (State.CANCELLED, Cause.CANCELLED)


def test_coarse_states_while_nothing_ended() -> None:
    assert derive_outcome(EvidenceSet()).state is State.PENDING
    assert outcome(trainjob()).state is State.QUEUED
    assert outcome(trainjob(queue="team-a", suspend=True), patience=10**6).state is State.QUEUED
    assert outcome(trainjob(), alive(0)).state is State.RUNNING


def test_waiting_past_patience_for_kueue_and_for_pods() -> None:
    queued = trainjob(queue="team-a", suspend=True)
    waiting_wl = workload(
        [cond("QuotaReserved", "False", 1, "Pending", "insufficient unused quota")],
        admitted_cq=None,
    )
    assert outcome(queued, waiting_wl, now=epoch(300)).state is State.QUEUED
    late = outcome(queued, waiting_wl, now=epoch(1200))
    assert late.cause is Cause.NO_CAPACITY
    assert "patience 10m" in late.summary
    no_pods = outcome(trainjob(), now=epoch(1200))
    assert no_pods.cause is Cause.START_FAILURE


def test_a_replaced_rank_shows_every_proof_of_its_eviction_even_a_second_apart() -> None:
    """The kubelet's Evicted event and the pod's DisruptionTarget condition are written
    together, yet their second-precision times may fall a second apart: while the Job's
    replacement runs, both are evidence, whichever came first."""
    message = "The node was low on resource: memory."
    evicted = pod(
        1,
        suffix="evict",
        node="gpu-node-2",
        phase="Failed",
        reason="Evicted",
        message=message,
        containers=[container_status(terminated(137, 40, 100))],
        conditions=ended_conditions(6, 45, 100),
    )
    evicted["status"]["conditions"].append(
        cond("DisruptionTarget", "True", 101, "TerminationByKubelet", message)
    )
    replacement = alive(1, suffix="again", node_name="gpu-node-3", started=103, created=102)
    replaced = job(active=2, failed=1)
    replaced["spec"]["backoffLimit"] = 2
    kubelet = event("Pod", f"{JOB0}-1-evict", "Evicted", message, 100, type_="Warning")
    result = outcome(replaced, alive(0), evicted, kubelet, replacement)
    assert (result.state, result.cause) == (State.RUNNING, None), result.summary
    keys = [e.key.partition("#")[2] for e in result.evidence]
    assert {"Evicted", "status.conditions[DisruptionTarget]", "status.reason"} <= set(keys), keys


def test_a_node_that_recovered_is_not_lost() -> None:
    on_node = alive(0, node_name="gpu-node-9")
    flap = event(
        "Node", "gpu-node-9", "NodeNotReady", "Node gpu-node-9 status is now: NodeNotReady", 300
    )
    ready_again = node(
        "gpu-node-9", cond("Ready", "True", 340, "KubeletReady", "kubelet is posting ready status")
    )
    assert outcome(trainjob(), on_node, flap, ready_again).state is State.RUNNING
    not_ready = node(
        "gpu-node-9",
        cond("Ready", "Unknown", 340, "NodeStatusUnknown", "Kubelet stopped posting node status."),
    )
    lost = outcome(trainjob(), on_node, flap, not_ready)
    assert (lost.cause, lost.first_failure.rank) == (Cause.NODE_LOST, 0)
    assert lost.first_failure.at == epoch(300)  # the earliest signal


def test_a_pod_that_finished_before_its_node_was_lost_is_not_affected() -> None:
    done = crashed(0, 0, 200, reason="Completed", node_name="gpu-node-9")
    gone = node("gpu-node-9", cond("Ready", "Unknown", 900, "NodeStatusUnknown", ""))
    complete = trainjob(
        [cond("Complete", "True", 210, "AllJobsCompleted", "jobset completed successfully")]
    )
    assert outcome(complete, done, gone).state is State.SUCCEEDED


# --- evidence representation ------------------------------------------------------------------


def test_recorded_evidence_round_trips_with_deletion() -> None:
    seen = alive(0)
    records = [object_evidence(seen, epoch(50)), object_evidence(seen, epoch(80), deleted=True)]
    assert records[0].key != records[1].key
    history = EvidenceSet.from_evidence(reversed(records)).get("Pod", seen["metadata"]["name"])
    assert history is not None
    assert [s.at for s in history.sightings] == [epoch(50), epoch(80)]
    assert history.deleted_at == epoch(80)


def test_scoping_keeps_the_trainjobs_objects_only() -> None:
    mine, other = alive(0), alive(0, suffix="zzz00")
    other["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] = "other"
    other["metadata"]["labels"]["trainer.kubeflow.org/trainjob-name"] = "other"
    evidence = EvidenceSet.from_objects(
        [trainjob(), mine, other, event("Pod", "x-0-abcde", "Preempted", "m", 5)]
    )
    scoped = scoped_to(evidence, Ref("TrainJob", "", TRAINJOB))
    assert [h.ref.name for h in scoped.histories("Pod")] == [mine["metadata"]["name"]]
    assert scoped.histories("Event") == []


def test_timestamps() -> None:
    assert parse_time("2026-08-27T10:00:00Z") == epoch(0)
    assert parse_time("2026-08-27T10:00:00.500000Z") == epoch(0.5)
    assert parse_time("yesterday") is None
    assert parse_time(None) is None


def test_the_diagnosis_json_names_the_trainjob() -> None:
    data = diagnose(EvidenceSet.from_objects([trainjob(), crashed(0, 4, 100)])).to_json()
    assert data["trainJob"] == TRAINJOB
    assert data["firstFailure"] == {"rank": 0, "pod": f"{JOB0}-0-aaa00", "exitCode": 4}

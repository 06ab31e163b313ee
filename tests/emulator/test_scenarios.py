"""Scenario tests: the platform behaviours of the reference, through the emulator's controllers."""

from __future__ import annotations

import pytest

from dispatch.testing.k8s.scenario import PodBehaviour, PodRule, Scenario

from .scenario_helpers import (
    JOBSET,
    TRAINER,
    cluster,
    cond,
    events,
    find,
    pods,
    trainjob,
    trainjob_condition,
    wait_for,
)


def test_two_nodes_complete() -> None:
    with cluster() as emu:
        emu.create(trainjob("ok", trainer={"numNodes": 2}))
        done = trainjob_condition(emu, "ok", "Complete")
        assert (done["reason"], done["message"]) == (
            "AllJobsCompleted",
            "jobset completed successfully",
        )
        js = find(emu, JOBSET, "JobSet", "ok")
        assert js is not None and js["status"]["terminalState"] == "Completed"
        node_pods = pods(emu, "ok")
        assert sorted(
            p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            for p in node_pods
        ) == ["0", "1"]
        assert {p["status"]["phase"] for p in node_pods} == {"Succeeded"}
        tj = find(emu, TRAINER, "TrainJob", "ok")
        assert tj is not None
        assert tj["status"]["jobsStatus"] == [
            {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        ]
        snapshot = find(emu, "v1", "ConfigMap", "ok-runtime-snapshot")
        assert snapshot is not None and "torch-distributed" in snapshot["data"]["runtime"]


def test_default_runtime_fails_after_in_place_restarts_with_failed_jobs() -> None:
    """A.9: rank 1 keeps crashing; OnFailure restarts it in place; six restarts exceed the
    Job's backoffLimit; JobSet Failed/FailedJobs; the TrainJob copies reason and message; the
    crash-looping pods are deleted with the Job's failure (their evidence goes with them)."""
    scenario = Scenario(pods=(PodRule(PodBehaviour(start_after=1, run_for=2, exit_code=3), index=1),),
                        default=PodBehaviour(run_for=None))  # fmt: skip
    with cluster(scenario) as emu:
        emu.create(trainjob("crash", trainer={"numNodes": 2}))
        restarts = wait_for(
            "rank 1 restarted in place",
            lambda: [p for p in pods(emu, "crash")
                     if p["status"].get("containerStatuses", [{}])[0].get("restartCount", 0) >= 2],
        )  # fmt: skip
        last = restarts[0]["status"]["containerStatuses"][0]["lastState"]["terminated"]
        assert (last["exitCode"], last["reason"]) == (3, "Error")
        failed = trainjob_condition(emu, "crash", "Failed")
        assert failed["reason"] == "FailedJobs"
        assert (
            failed["message"]
            == "jobset failed due to one or more job failures (first failed job: crash-node-0)"
        )
        job = find(emu, "batch/v1", "Job", "crash-node-0")
        assert (
            cond(job, "Failed") is not None
            and cond(job, "Failed")["reason"] == "BackoffLimitExceeded"
        )
        assert cond(job, "FailureTarget") is not None
        assert cond(job, "Failed")["message"] == "Job has reached the specified backoff limit"
        wait_for("pods deleted", lambda: not pods(emu, "crash"))


def test_pod_scenario_from_trainjob_env_oom_and_logs() -> None:
    """The pod's own scenario (EMULATOR_SCENARIO in the TrainJob env): rank 0 is OOMKilled once
    (attempt 1) then succeeds; its log is readable."""
    wanted = '{"pods": [{"index": 0, "attempt": 1, "oomKilled": true, "runFor": 2}], "default": {"runFor": 3, "logs": ["step 1"]}}'
    with cluster() as emu:
        emu.create(
            trainjob(
                "own",
                trainer={"numNodes": 1, "env": [{"name": "EMULATOR_SCENARIO", "value": wanted}]},
            )
        )
        done = trainjob_condition(emu, "own", "Complete")
        assert done["reason"] == "AllJobsCompleted"
        (pod,) = pods(emu, "own")
        status = pod["status"]["containerStatuses"][0]
        assert status["restartCount"] == 1
        assert status["lastState"]["terminated"]["reason"] == "OOMKilled"
        assert status["lastState"]["terminated"]["exitCode"] == 137
        logs = emu.call(
            lambda: list(emu.cluster.logs.log("default", pod["metadata"]["name"], "node").lines)
        )
        assert any(text == "step 1" for _, text in logs)


def test_strict_runtime_pod_failure_policy_and_max_restarts() -> None:
    """restartPolicy Never + backoffLimit 0: one failed pod fails the Job (BackoffLimitExceeded);
    JobSet failurePolicy maxRestarts 1 restarts once (restart-attempt 1), then ReachedMaxRestarts;
    failed pods stay (Never)."""
    from dispatch.testing.k8s.runtimes import torch_strict

    scenario = Scenario(pods=(PodRule(PodBehaviour(run_for=2, exit_code=7), index=0),))
    with cluster(scenario, runtimes=(torch_strict(max_restarts=1),)) as emu:
        emu.create(trainjob("strict", "torch-strict", trainer={"numNodes": 2},
                            ))  # fmt: skip
        emu_tj = trainjob("strict2", "torch-strict", trainer={"numNodes": 1})
        emu_tj["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
        failed = trainjob_condition(emu, "strict", "Failed")
        assert failed["reason"] == "ReachedMaxRestarts"
        assert (
            failed["message"]
            == "jobset failed due to reaching max number of restarts (first failed job: strict-node-0)"
        )
        js = find(emu, JOBSET, "JobSet", "strict")
        assert js is not None and js["status"]["restarts"] == 1
        job = find(emu, "batch/v1", "Job", "strict-node-0")
        assert (
            job is not None
            and job["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"
        )
        failed_pods = [p for p in pods(emu, "strict") if p["status"]["phase"] == "Failed"]
        assert any(
            p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 7
            for p in failed_pods
        )


def test_deadline_deletes_the_jobset() -> None:
    with cluster(Scenario(default=PodBehaviour(run_for=None))) as emu:
        emu.create(trainjob("slow", trainer={"numNodes": 1}, activeDeadlineSeconds=30))
        wait_for(
            "pod running",
            lambda: [p for p in pods(emu, "slow") if p["status"].get("phase") == "Running"],
        )
        failed = trainjob_condition(emu, "slow", "Failed")
        assert (failed["reason"], failed["message"]) == (
            "DeadlineExceeded",
            "TrainJob exceeded its active deadline",
        )
        wait_for("JobSet deleted", lambda: find(emu, JOBSET, "JobSet", "slow") is None)
        wait_for("pods gone", lambda: not pods(emu, "slow"))
        tj = find(emu, TRAINER, "TrainJob", "slow")
        assert cond(tj, "Failed")["reason"] == "DeadlineExceeded"  # type: ignore[index]


def test_failed_trainjob_whose_jobset_disappears_is_rerun() -> None:
    """A.7 (kubeflow/trainer#3737): the Failed condition is dropped on reconcile and the JobSet
    is built again, so deleting a failed JobSet re-runs the TrainJob."""
    scenario = Scenario(
        pods=(PodRule(PodBehaviour(run_for=1, exit_code=1), attempt=1),),
        default=PodBehaviour(run_for=None),
    )
    from dispatch.testing.k8s.runtimes import torch_strict

    with cluster(scenario, runtimes=(torch_strict(),)) as emu:
        emu.create(trainjob("rerun", "torch-strict", trainer={"numNodes": 1}))
        trainjob_condition(emu, "rerun", "Failed")
        first_uid = find(emu, JOBSET, "JobSet", "rerun")["metadata"]["uid"]  # type: ignore[index]
        rtype = emu.cluster.rtype(JOBSET, "JobSet")
        emu.call(lambda: emu.cluster.store.delete(rtype, "default", "rerun"))
        again = wait_for(
            "a new JobSet",
            lambda: (
                (js := find(emu, JOBSET, "JobSet", "rerun"))
                and js["metadata"]["uid"] != first_uid
                and js
            ),
        )
        assert again["metadata"]["uid"] != first_uid
        wait_for(
            "Failed dropped",
            lambda: cond(find(emu, TRAINER, "TrainJob", "rerun"), "Failed") is None,
        )


def test_suspend_and_resume_propagate() -> None:
    with cluster(Scenario(default=PodBehaviour(run_for=None))) as emu:
        emu.create(trainjob("held", trainer={"numNodes": 2}, suspend=True))
        suspended = trainjob_condition(emu, "held", "Suspended")
        assert (suspended["reason"], suspended["message"]) == ("Suspended", "TrainJob is suspended")
        wait_for(
            "suspended Job", lambda: cond(find(emu, "batch/v1", "Job", "held-node-0"), "Suspended")
        )
        assert not pods(emu, "held")
        rtype = emu.cluster.rtype(TRAINER, "TrainJob")
        emu.call(
            lambda: emu.cluster.store.patch(
                rtype,
                "default",
                "held",
                "application/merge-patch+json",
                {"spec": {"suspend": False}},
            )
        )
        wait_for(
            "two running pods",
            lambda: (
                len([p for p in pods(emu, "held") if p["status"].get("phase") == "Running"]) == 2
            ),
        )
        tj = find(emu, TRAINER, "TrainJob", "held")
        resumed = next(c for c in tj["status"]["conditions"] if c["type"] == "Suspended")  # type: ignore[index]
        assert (resumed["status"], resumed["reason"]) == ("False", "Resumed")
        js = find(emu, JOBSET, "JobSet", "held")
        assert (
            next(c for c in js["status"]["conditions"] if c["type"] == "Suspended")["reason"]
            == "ResumeJobs"
        )  # type: ignore[index]


def test_rejected_jobset_is_an_event_not_a_status() -> None:
    """A.4: the JobSet webhook refuses pod names over 63 characters; Trainer only records a
    Warning event TrainJobResourcesCreationFailed and leaves the status without a condition."""
    name = "a" * 50
    with cluster() as emu:
        emu.create(trainjob(name, trainer={"numNodes": 1}))
        found = wait_for(
            "event",
            lambda: [
                e for e in events(emu, name) if e["reason"] == "TrainJobResourcesCreationFailed"
            ],
        )
        assert found[0]["type"] == "Warning"
        assert found[0]["message"].startswith("TrainJob resources reconciliation failed: ")
        assert "will exceed 63 characters" in found[0]["message"]
        tj = find(emu, TRAINER, "TrainJob", name)
        assert not (tj or {}).get("status", {}).get("conditions")
        assert find(emu, JOBSET, "JobSet", name) is None


def test_trainer_webhook_refuses_missing_runtime_and_bad_patches() -> None:
    from dispatch.testing.k8s import ApiError

    with cluster() as emu:
        with pytest.raises(ApiError) as missing:
            emu.create(trainjob("nort", "no-such-runtime"))
        assert missing.value.code == 422
        assert "must be created before the TrainJob is created" in missing.value.message
        patch = {"manager": "x.io/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": {
                "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}]}}}}}]}}}}  # fmt: skip
        with pytest.raises(ApiError) as env:
            emu.create(trainjob("envpatch", runtimePatches=[patch]))
        assert (
            "must not have envs for the dataset-initializer, model-initializer, node containers"
            in env.value.message
        )
        with pytest.raises(ApiError) as reserved:
            emu.create(trainjob("pet", trainer={"env": [{"name": "PET_NNODES", "value": "3"}]}))
        assert "must not have reserved envs" in reserved.value.message


def test_image_pull_error_and_unschedulable() -> None:
    scenario = Scenario(pods=(PodRule(PodBehaviour(image_pull_error=True), index=0),))
    with cluster(scenario) as emu:
        emu.create(trainjob("pull", trainer={"numNodes": 1}))
        waiting = wait_for(
            "ImagePullBackOff",
            lambda: [p for p in pods(emu, "pull")
                     if p["status"].get("containerStatuses", [{}])[0].get("state", {}).get("waiting", {}).get("reason") == "ImagePullBackOff"],
        )  # fmt: skip
        assert waiting[0]["status"]["phase"] == "Pending"
        emu.create(
            trainjob(
                "big", trainer={"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": "64"}}}
            )
        )
        (pod,) = wait_for(
            "unschedulable", lambda: [p for p in pods(emu, "big") if cond_false(p, "PodScheduled")]
        )
        scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        assert scheduled["reason"] == "Unschedulable"
        assert scheduled["message"] == "0/2 nodes are available: 2 Insufficient cpu."
        assert any(e["reason"] == "FailedScheduling" for e in events(emu, pod["metadata"]["name"]))


def cond_false(obj: dict[str, object], ctype: str) -> bool:
    conds = (obj.get("status") or {}).get("conditions") or []  # type: ignore[union-attr]
    return any(c["type"] == ctype and c["status"] == "False" for c in conds)  # type: ignore[index]


def test_node_not_ready_taint_eviction_and_pod_gc() -> None:
    from dispatch.testing.k8s.scenario import ClusterEvent

    scenario = Scenario(
        default=PodBehaviour(run_for=None),
        events=(ClusterEvent(at=20, action="nodeNotReady", node="node-1"),
                ClusterEvent(at=400, action="deleteNode", node="node-1")),
    )  # fmt: skip
    with cluster(scenario, nodes=("node-1",), time_scale=400) as emu:
        emu.create(trainjob("lost", trainer={"numNodes": 1}))
        (victim,) = wait_for(
            "taint eviction",
            lambda: [p for p in pods(emu, "lost") if cond(p, "DisruptionTarget")],
        )
        target = cond(victim, "DisruptionTarget")
        assert target is not None
        assert (target["reason"], target["message"]) == (
            "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")  # fmt: skip
        assert victim["metadata"].get("deletionTimestamp")  # stays Terminating: no kubelet
        assert any(
            e["reason"] == "TaintManagerEviction" for e in events(emu, victim["metadata"]["name"])
        )
        gone = victim["metadata"]["name"]
        wait_for(
            "pod GC",
            lambda: all(p["metadata"]["name"] != gone for p in pods(emu, "lost")),
            timeout=60,
        )


def test_scheduler_preemption_marks_disruption_target() -> None:
    with cluster(Scenario(default=PodBehaviour(run_for=None))) as emu:
        emu.create(trainjob("pre", trainer={"numNodes": 1}))
        (pod,) = wait_for(
            "running",
            lambda: [p for p in pods(emu, "pre") if p["status"].get("phase") == "Running"],
        )
        seen: list[dict[str, object]] = []

        def preempt() -> None:
            scheduler = next(
                c for c in emu.config.controllers if getattr(c, "name", "") == "scheduler"
            )
            scheduler.preempt("default", pod["metadata"]["name"])  # type: ignore[attr-defined]
            seen.append(
                emu.cluster.store.get(
                    emu.cluster.rtype("v1", "Pod"), "default", pod["metadata"]["name"]
                )
            )

        emu.call(preempt)
        target = cond(seen[0], "DisruptionTarget")  # type: ignore[arg-type]
        assert target is not None and target["reason"] == "PreemptionByScheduler"
        assert seen[0]["metadata"]["deletionTimestamp"]  # type: ignore[index]
        wait_for(
            "replacement pod",
            lambda: [
                p for p in pods(emu, "pre") if p["metadata"]["name"] != pod["metadata"]["name"]
            ],
        )

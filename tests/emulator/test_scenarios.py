"""Scenario tests: the platform behaviours of the reference, through the emulator's controllers."""

from __future__ import annotations

from dispatch.testing.k8s.scenario import PodBehaviour, PodRule, Scenario

from .scenario_helpers import (
    JOBSET,
    TRAINER,
    cluster,
    cond,
    events,
    find,
    objects,
    pods,
    trainjob,
    trainjob_condition,
    wait_for,
)


def test_two_nodes_complete() -> None:
    with cluster() as emu:
        emu.create(trainjob("ok", trainer={"numNodes": 2}))
        done = trainjob_condition(emu, "ok", "Complete")
        assert (done["reason"], done["message"]) == ("AllJobsCompleted", "jobset completed successfully")
        js = find(emu, JOBSET, "JobSet", "ok")
        assert js is not None and js["status"]["terminalState"] == "Completed"
        node_pods = pods(emu, "ok")
        assert sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in node_pods) == ["0", "1"]
        assert {p["status"]["phase"] for p in node_pods} == {"Succeeded"}
        tj = find(emu, TRAINER, "TrainJob", "ok")
        assert tj is not None
        assert tj["status"]["jobsStatus"] == [
            {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        ]
        snapshot = find(emu, "v1", "ConfigMap", "ok-runtime-snapshot")
        assert snapshot is not None and "torch-distributed" in snapshot["data"]["runtime"]

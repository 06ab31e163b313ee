"""Unplanned recovery, end to end: work that re-runs inside one attempt although the runtime
allows no restart. Trainer builds a TrainJob's JobSet again whenever it is missing and the
TrainJob is not finished, and it drops a ``Failed`` condition first (platform reference A.7,
kubeflow/trainer#3737), so deleting the JobSet (a user, a TTL) starts every rank again."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from dispatch.model import Cause, State
from dispatch.testing.k8s.watch import Change

from .harness import NAMESPACE, World

FAIL_ALWAYS = {"rules": [], "unmatched": "fail"}
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
MERGE = "application/merge-patch+json"


def _trainjob(world: World, job: str) -> str:
    [attempt] = world.records.attempts(job)
    assert attempt.handle is not None
    return attempt.handle.native


def _delete_jobset(world: World, name: str) -> None:
    cluster = world.emulator.cluster
    rtype = cluster.rtype(*JOBSET)
    world.emulator.call(lambda: cluster.store.delete(rtype, NAMESPACE, name))


def _jobset_uids(world: World, job: str) -> set[str]:
    """uids of the JobSets recorded for attempt 1."""
    return {
        e.data["metadata"]["uid"]
        for e in world.records.evidence(job, 1)
        if e.key.startswith("JobSet/") and "@" in e.key
    }


def test_jobset_built_again_mid_run_is_stopped(world: World) -> None:
    job = world.submit("rerun", {"default": {"runFor": 600}}, recovery=FAIL_ALWAYS)
    first: dict[str, Any] = {}

    def delete(pods: list[dict[str, Any]]) -> None:
        first["pods"] = pods
        _delete_jobset(world, pods[0]["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"])

    helper = world.when(lambda: world.running(job), delete)
    asyncio.run(world.supervise(timeout=120))
    helper.join()
    assert first, "the ranks never ran"
    [attempt] = world.records.attempts(job)
    assert attempt.outcome is not None
    assert attempt.outcome.cause is Cause.UNPLANNED_RECOVERY, attempt.outcome.summary
    assert attempt.outcome.state in (State.FAILED, State.CANCELLED)
    assert len(_jobset_uids(world, job)) == 2  # both JobSets were recorded
    assert any(k.startswith("JobSet/") for k in _proofs(world, job))
    # the supervisor stopped the second run: no pod of the job is left running
    assert _stopped(world, job)


def _follow(world: World, job: str) -> dict[str, list[str]]:
    """Collects, as they happen, the uids of ``job``'s JobSets and why its TrainJob was
    retired (annotation ``dispatch.dev/retired``)."""
    found: dict[str, list[str]] = {"jobsets": [], "retired": []}

    def hook(change: Change) -> None:
        m = change.obj["metadata"]
        if not m["name"].startswith(f"{job}-"):
            return
        if change.rtype.kind == "JobSet" and m["uid"] not in found["jobsets"]:
            found["jobsets"].append(m["uid"])
        why = (m.get("annotations") or {}).get("dispatch.dev/retired")
        if change.rtype.kind == "TrainJob" and why and why not in found["retired"]:
            found["retired"].append(why)

    world.emulator.call(lambda: world.emulator.cluster.store.on_change(hook))
    return found


def _stopped(world: World, job: str, seconds: float = 30.0) -> bool:
    """No pod of ``job`` runs, at once or within ``seconds``: deleting the TrainJob removes
    its pods through the emulator's garbage collector, a moment after the cancel returns."""
    deadline = time.monotonic() + seconds
    while world.running(job, 1):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _proofs(world: World, job: str) -> set[str]:
    return {e.key for e in world.records.evidence(job, 1) if "#" in e.key and "@" not in e.key}


def test_failed_trainjob_run_again_stays_failed_and_is_stopped(world: World) -> None:
    """A.7: attempt 1 fails (rank 1 exits 3); then its JobSet is deleted and Trainer runs
    the failed TrainJob again. The attempt stays ``failed``/``app_error``; the adapter that
    judged it retires the TrainJob, saying why. Another job keeps the supervisor running."""
    failing = world.submit(
        "fails",
        {"pods": [{"index": 1, "runFor": 3, "exitCode": 3}], "default": {"runFor": 600}},
        recovery=FAIL_ALWAYS,
    )
    other = world.submit("other", {"default": {"runFor": 600}}, recovery=FAIL_ALWAYS)
    changes = _follow(world, failing)
    seen: dict[str, Any] = {}
    helper_records = world.other_records()  # the helper thread's own connection

    def ended() -> bool:
        return helper_records.get_job(failing).state.is_terminal

    def trainjobs() -> set[str]:
        return {o["metadata"]["name"] for o in world.objects("TrainJob")}

    def rerun(_: Any) -> None:
        name = _trainjob(world, failing)
        if name in trainjobs():
            _delete_jobset(world, name)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and name in trainjobs():
                time.sleep(0.02)
            seen["gone"] = name not in trainjobs()
        else:
            # retired as the attempt ended, before Trainer marked it Failed: nothing can run
            # it again (which of the two comes first is a matter of timing)
            seen["retiredFirst"] = True
        helper_records.request_cancel(other, "test", "done")

    helper = world.when(ended, rerun)
    asyncio.run(world.supervise(timeout=120))
    helper.join()
    helper_records.close()
    record = world.records.get_job(failing)
    assert (record.state, record.cause) == (State.FAILED, Cause.APP_ERROR)
    [attempt] = world.records.attempts(failing)
    assert attempt.outcome is not None and attempt.outcome.first_failure is not None
    assert attempt.outcome.first_failure.rank == 1
    if seen.get("retiredFirst"):
        assert len(changes["jobsets"]) == 1, "a JobSet was built for a retired TrainJob"
        assert changes["retired"] == [
            "its attempt ended (app_error) but the TrainJob could still run"
        ]
        assert world.records.get_job(other).state is State.CANCELLED
        return
    assert len(changes["jobsets"]) == 2, "Trainer built the failed TrainJob's JobSet again"
    assert seen.get("gone"), "the TrainJob that ran again was retired"
    # why, as the adapter saw it first: the new JobSet (the re-run), or the Failed condition
    # Trainer dropped before building it (the TrainJob could run again)
    [why] = changes["retired"]
    assert (
        "ran again after its attempt ended" in why and "unplanned_recovery" in why
    ) or why == "its attempt ended (app_error) but the TrainJob could still run", why
    assert world.records.get_job(other).state is State.CANCELLED


def _rank_pod(pods: list[dict[str, Any]], rank: int) -> dict[str, Any]:
    index = "batch.kubernetes.io/job-completion-index"
    return next(p for p in pods if p["metadata"]["labels"].get(index) == str(rank))


def test_a_container_restarted_in_place_is_stopped(world: World) -> None:
    """The kubelet restarts rank 1's container (restartCount 1; a webhook or a runtime that
    dispatch did not see could set ``restartPolicy: OnFailure``): the rank ran twice inside one
    attempt, so the attempt ends ``unplanned_recovery``, naming rank 1, and nothing is left
    running."""
    job = world.submit("restarted", {"default": {"runFor": 600}}, recovery=FAIL_ALWAYS)

    def restart(pods: list[dict[str, Any]]) -> None:
        pod = _rank_pod(pods, 1)
        containers = [dict(c) for c in pod["status"]["containerStatuses"]]
        for container in containers:
            container["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error"}}
            container["restartCount"] = 1
        cluster = world.emulator.cluster
        rtype = cluster.rtype("v1", "Pod")
        name = pod["metadata"]["name"]
        body = {"status": {**pod["status"], "containerStatuses": containers}}
        world.emulator.call(
            lambda: cluster.store.patch(rtype, NAMESPACE, name, MERGE, body, subresource="status")
        )

    helper = world.when(lambda: world.running(job), restart)
    asyncio.run(world.supervise(timeout=120))
    helper.join()
    [attempt] = world.records.attempts(job)
    assert attempt.outcome is not None
    assert attempt.outcome.cause is Cause.UNPLANNED_RECOVERY, attempt.outcome.summary
    assert attempt.outcome.first_failure is not None and attempt.outcome.first_failure.rank == 1
    assert "restartCount" in "".join(_proofs(world, job))
    assert _stopped(world, job)

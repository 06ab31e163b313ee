"""Failures that are not disruptions, end to end (real supervisor and Kubeflow adapter against
the emulator): an application error on one rank with a peer crashing after it, evidence the
cluster deletes before the job ends, pods that cannot be scheduled past the cluster's
patience, and a runtime patch naming an init container the runtime lacks."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatch.model import Cause, State, Unsupported
from dispatch.testing.k8s.watch import Change

from .harness import NAMESPACE, QUEUE, RUNTIME, TRAINER, World, attempt_outcome, kueue, proof_keys

FAIL_ALWAYS = {"rules": [], "unmatched": "fail"}


def _recorded_pods(world: World, job: str) -> list[dict[str, Any]]:
    return [
        e.data for e in world.records.evidence(job, 1) if e.key.startswith("Pod/") and "@" in e.key
    ]


def _exit_codes(pods: list[dict[str, Any]]) -> dict[int, set[int]]:
    """Exit codes recorded per rank."""
    out: dict[int, set[int]] = {}
    for pod in pods:
        rank = int(pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
        for c in (pod.get("status") or {}).get("containerStatuses") or []:
            code = ((c.get("state") or {}).get("terminated") or {}).get("exitCode")
            if code is not None:
                out.setdefault(rank, set()).add(code)
    return out


@pytest.fixture
def slow_world(tmp_path: Path) -> Iterator[World]:
    """Emulated time 10x real (not 100x): the pods' half-second gap is 50 ms of real time, more
    than the start skew of two pods on a loaded machine (at 100x it was 5 ms, and rank 0,
    started a little earlier, sometimes really ended first)."""
    made = World(tmp_path, kueue_config=kueue(), time_scale=10.0)
    try:
        yield made
    finally:
        made.close()


def test_app_error_on_one_rank_then_its_peer_crashes(slow_world: World) -> None:
    """Rank 1 exits 3 first; rank 0 (listed first, lower rank) crashes with 1 half a second
    later, as a peer does when its collective breaks. The first failure in time wins."""
    world = slow_world
    job = world.submit(
        "peers",
        {"pods": [{"index": 1, "runFor": 3, "exitCode": 3},
                  {"index": 0, "runFor": 3.5, "exitCode": 1}]},
        resources={"cpu": "5"},
        recovery=FAIL_ALWAYS,
    )  # fmt: skip
    asyncio.run(world.supervise())
    assert attempt_outcome(world, job) == (State.FAILED, Cause.APP_ERROR, 1, 3)
    assert any("-1-" in k and "containerStatuses[node]" in k for k in proof_keys(world, job))
    assert 3 in _exit_codes(_recorded_pods(world, job)).get(1, set())


def test_evidence_deleted_before_the_job_ends(world: World) -> None:
    """Every pod of the job is force-deleted the moment any of them fails (as a clean-up
    would): the TrainJob ends afterwards and the cluster keeps no pod, yet the cause, rank and
    exit code are right, from what the watches recorded."""
    job = world.submit(
        "vanish",
        {"pods": [{"index": 1, "runFor": 3, "exitCode": 7}], "default": {"runFor": 600}},
        resources={"cpu": "5"},
        recovery=FAIL_ALWAYS,
    )
    cluster = world.emulator.cluster
    pod_type = cluster.rtype("v1", "Pod")
    deleted: list[str] = []

    def sweep() -> None:
        for pod in list(cluster.store.objects(pod_type)):
            m = pod["metadata"]
            if (m.get("labels") or {}).get("dispatch.dev/job") == job:
                cluster.store.delete(pod_type, m["namespace"], m["name"], grace_period_seconds=0)
                deleted.append(m["name"])

    def janitor(change: Change) -> None:
        labels = change.obj["metadata"].get("labels") or {}
        phase = (change.obj.get("status") or {}).get("phase")
        if (
            change.rtype.kind == "Pod"
            and labels.get("dispatch.dev/job") == job
            and phase == "Failed"
        ):
            asyncio.get_running_loop().call_soon(sweep)

    world.emulator.call(lambda: cluster.store.on_change(janitor))
    asyncio.run(world.supervise())
    assert deleted and world.pods(job) == []
    assert attempt_outcome(world, job) == (State.FAILED, Cause.APP_ERROR, 1, 7)
    assert 7 in _exit_codes(_recorded_pods(world, job)).get(1, set())


@pytest.fixture
def patient(tmp_path: Path) -> Iterator[World]:
    """A cluster whose patience is 30 emulated seconds."""
    made = World(tmp_path, kueue_config=kueue(), patience="30s")
    try:
        yield made
    finally:
        made.close()


def test_unschedulable_past_patience(patient: World) -> None:
    job = patient.submit("toobig", {}, resources={"cpu": "9"}, recovery=FAIL_ALWAYS)
    asyncio.run(patient.supervise())
    state, cause, rank, code = attempt_outcome(patient, job)
    assert (state, cause, code) == (State.FAILED, Cause.NO_CAPACITY, None)
    assert rank in (0, 1)
    assert "Insufficient cpu" in patient.records.get_job(job).summary
    assert any("#status.conditions[PodScheduled]" in k for k in proof_keys(patient, job))
    # the TrainJob dispatch gave up on was deleted, so it does not get placed later
    assert not [
        o
        for o in patient.objects("TrainJob")
        if o["metadata"]["labels"].get("dispatch.dev/job") == job
    ]


def _runtime_with(name: str, *, init: bool) -> dict[str, Any]:
    """The example runtime with a container ``register``: an init container, or (``init``
    False) a sidecar, so that only the name matches what the cluster publishes through."""
    runtime = yaml.safe_load(RUNTIME.read_text())
    runtime["metadata"]["name"] = name
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]
    register = {"name": "register", "image": "busybox:1.36", "command": ["true"]}
    pod["initContainers" if init else "containers"] = (
        [register] if init else [*pod["containers"], register]
    )
    return runtime


def test_runtime_patch_naming_a_missing_init_container(tmp_path: Path) -> None:
    """The cluster publishes the identity through init container ``register``; the runtime has
    a sidecar of that name but no such init container. dispatch refuses to submit it (rule
    ``publish-init-container``). Trainer v2.3 accepts the patch (its webhook checks the name
    against every container), so such a TrainJob, made before the runtime changed, is
    adopted by ``start``: Kueue admits it, the pod is invalid and never created, and after
    the patience the attempt is a ``start_failure``, its TrainJob deleted to free the quota."""
    world = World(
        tmp_path,
        kueue_config=kueue(),
        patience="30s",
        publish={"via": "initContainer", "initContainer": "register"},
    )
    try:
        world.emulator.create(_runtime_with("torch-init", init=True))
        world.emulator.create(_runtime_with("torch-sidecar", init=False))
        spec = {"runtime": {"kind": "ClusterTrainingRuntime", "name": "torch-sidecar"},
                "queue": QUEUE, "recovery": FAIL_ALWAYS}  # fmt: skip
        refused = world.records.get_job(world.submit("refused", {}, **spec)).job
        with pytest.raises(Unsupported) as refusal:
            asyncio.run(world.adapter().start(refused, 1))
        assert [r.rule for r in refusal.value.reasons] == ["publish-init-container"]

        # what an older runtime left: planned with the init container, run on the sidecar one
        job = world.records.get_job(world.submit("sidecar", {}, **spec)).job
        planning = world.records.get_job(
            world.submit(
                "planning",
                {},
                **{**spec, "runtime": {"kind": "ClusterTrainingRuntime", "name": "torch-init"}},
            )
        ).job
        plan = asyncio.run(world.adapter().plan(_same_id(planning, job), 1))
        assert plan.accepted, plan.capabilities.refusals
        by_kind = {a.kind: copy.deepcopy(a.content) for a in plan.artifacts}
        runtime_copy = by_kind["TrainingRuntime"]
        runtime_copy["spec"] = _runtime_with("x", init=False)["spec"]
        world.emulator.create(runtime_copy, NAMESPACE)
        world.emulator.create(by_kind["TrainJob"], NAMESPACE)
        world.records.request_cancel(planning.id, "test", "only used for planning")

        asyncio.run(world.supervise(timeout=120))
        state, cause, rank, _ = attempt_outcome(world, job.id)
        assert (state, cause, rank) == (State.FAILED, Cause.START_FAILURE, None)
        [attempt] = world.records.attempts(job.id)
        assert attempt.handle is not None and attempt.handle.data.get("adopted") is True
        assert "no pod was ever created" in world.records.get_job(job.id).summary
        assert any(k.startswith("Workload/") for k in proof_keys(world, job.id))
        assert not world.pods(job.id)
        live = {o["metadata"]["name"] for o in world.objects("TrainJob", TRAINER)}
        assert attempt.handle.native not in live
    finally:
        world.close()


def _same_id(planning: Any, job: Any) -> Any:
    """``planning`` (a job on the init-container runtime) under ``job``'s id, so the plan
    names and labels the objects as ``job``'s attempt 1."""
    return type(planning)(id=job.id, spec=planning.spec, created_at=job.created_at)

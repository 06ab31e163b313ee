"""``plan`` and ``start`` against the emulated API server over HTTP (spec section 2)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.adapters.kubeflow.adapter import RUNTIME_FRESH
from dispatch.adapters.kubeflow.planning.rules import BACKOFF_LIMIT, RESTART_POLICY
from dispatch.adapters.kubeflow.planning.stored import DEFAULT_MANAGER
from dispatch.clock import ManualClock
from dispatch.config import ClusterConfig as DispatchCluster
from dispatch.model import OutcomeUnknown, Unsupported
from dispatch.testing.k8s import Emulator, FaultRule

from .conftest import (
    NAMESPACE,
    TRAINER,
    AdapterFactory,
    example_spec,
    job_of,
    names,
    patch,
    run,
    start_drained,
    stored,
)


def test_a_bad_runtime_is_refused_before_any_object_exists(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter = make_adapter()
    spec = example_spec("refused")  # Trainer's built-in torch-distributed
    job = job_of(spec)
    report = run(adapter.capabilities(spec))
    assert not report.accepted
    assert {RESTART_POLICY, BACKOFF_LIMIT} <= {r.rule for r in report.refusals}
    plan = run(adapter.plan(job, 1))
    assert not plan.accepted
    assert plan.artifacts == ()
    with pytest.raises(Unsupported) as refused:
        run(adapter.start(job, 1))
    assert {RESTART_POLICY, BACKOFF_LIMIT} <= set(refused.value.rules)
    assert stored(emulator, "TrainJob") == []
    assert stored(emulator, "TrainingRuntime") == []
    counts = emulator.requests()
    assert counts.count("create", "trainjobs") == counts.count("create", "trainingruntimes") == 0


def test_start_creates_the_copy_and_the_trainjob_with_every_field(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter = make_adapter()
    spec = example_spec("torch", queue="team-a", timeLimit="90m", env={"EPOCHS": "3"})
    job = job_of(spec)
    plan = run(adapter.plan(job, 1))
    assert plan.accepted, plan.capabilities.refusals
    planned = {a.kind: a.content for a in plan.artifacts}
    handle = run(start_drained(adapter, job, 1))
    name = "torch-ddp-x7k2p-1"
    assert (handle.native, handle.data["namespace"]) == (name, NAMESPACE)

    [trainjob] = stored(emulator, "TrainJob")
    [copy] = stored(emulator, "TrainingRuntime")
    # exactly the objects the plan showed (the API server adds the CRD's suspend: false)
    # as planned, with the CRD's defaults (planning.stored)
    assert trainjob["spec"] == {
        **planned["TrainJob"]["spec"],
        "suspend": False,
        "managedBy": DEFAULT_MANAGER,
    }
    assert copy["spec"] == planned["TrainingRuntime"]["spec"]
    # created waiting for its owner; the patch that made it owned removed the label
    assert planned["TrainingRuntime"]["metadata"]["labels"]["dispatch.dev/owner-pending"] == "true"
    assert "dispatch.dev/owner-pending" not in copy["metadata"]["labels"]
    meta = trainjob["metadata"]
    assert (meta["name"], meta["namespace"]) == (name, NAMESPACE)
    assert meta["labels"] == {
        "dispatch.dev/job": job.id,
        "dispatch.dev/attempt": "1",
        "dispatch.dev/cluster": "kf",
        "app.kubernetes.io/managed-by": "dispatch",
        "kueue.x-k8s.io/queue-name": "team-a",
        "dispatch.dev/runtime": "torch-dispatch",  # the runtime chosen (runtimeRef: the copy)
    }
    assert meta["annotations"]["dispatch.dev/spec-hash"].startswith("sha256:")
    assert meta["annotations"]["dispatch.dev/runtime"] == "ClusterTrainingRuntime/torch-dispatch"
    body = trainjob["spec"]
    assert body["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": name,
    }
    trainer = body["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (4, 2)
    assert trainer["image"] == spec.image
    assert trainer["command"] == ["torchrun", "train.py"]
    assert trainer["args"] == ["--epochs", "3"]
    assert trainer["resourcesPerNode"]["limits"] == {
        "cpu": "8",
        "memory": "32Gi",
        "nvidia.com/gpu": "2",
    }
    env = {e["name"]: e.get("value") for e in trainer["env"]}
    assert env == {
        "EPOCHS": "3",
        "DISPATCH_JOB": job.id,
        "DISPATCH_ATTEMPT": "1",
        "DISPATCH_CLUSTER": "kf",
    }
    assert body["activeDeadlineSeconds"] == 5400
    assert body["suspend"] is False  # dispatch states none; the CRD default
    [patch_entry] = body["runtimePatches"]
    assert patch_entry["manager"] == "dispatch.dev/adapter"
    identity = {"dispatch.dev/job": job.id, "dispatch.dev/attempt": "1"}
    template = patch_entry["trainingRuntimeSpec"]["template"]
    assert template["metadata"]["labels"] == identity  # Trainer sets them on the JobSet
    [rjob] = template["spec"]["replicatedJobs"]
    assert rjob["template"]["spec"]["template"]["metadata"]["labels"] == identity
    # the copy: the original's spec, losslessly, with dispatch's labels, owned by the TrainJob
    [original] = [
        o
        for o in stored(emulator, "ClusterTrainingRuntime")
        if o["metadata"]["name"] == "torch-dispatch"
    ]
    assert copy["spec"] == original["spec"]
    assert copy["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch"
    assert copy["metadata"]["labels"]["dispatch.dev/job"] == job.id
    assert copy["metadata"]["labels"]["dispatch.dev/runtime-copy-of"] == "torch-dispatch"
    assert copy["metadata"]["ownerReferences"] == [
        {
            "apiVersion": TRAINER,
            "kind": "TrainJob",
            "name": name,
            "uid": meta["uid"],
        }
    ]
    assert handle.data["uid"] == meta["uid"]
    assert handle.data["runtimeCopyOwned"] is False  # not when start returned: just after


def test_a_held_job_is_created_suspended(emulator: Emulator, make_adapter: AdapterFactory) -> None:
    adapter = make_adapter()
    job = job_of(example_spec("deadline"))
    handle = run(adapter.start(job, 1, held=True))
    [trainjob] = stored(emulator, "TrainJob")
    assert trainjob["spec"]["suspend"] is True
    assert run(adapter.observe(handle)).state.value == "held"


def test_a_second_start_of_the_same_attempt_adopts(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    first = run(make_adapter().start(job, 1))
    # another process (a fresh adapter) starting the same attempt again
    second = run(make_adapter().start(job, 1))
    assert (second.native, second.data["uid"]) == (first.native, first.data["uid"])
    assert second.data["adopted"] is True
    assert names(emulator, "TrainJob") == [first.native]
    assert names(emulator, "TrainingRuntime") == [first.native]
    # the second start asked to create both, was told they exist (409), and read them: one
    # TrainJob and one copy, never a second of either
    assert emulator.requests().count("create", "trainjobs") == 2
    assert emulator.requests().count("get", "trainjobs") == 1
    # a different attempt is a different TrainJob on its own copy
    third = run(make_adapter().start(job, 2))
    assert sorted(names(emulator, "TrainJob")) == sorted([first.native, third.native])


def test_starts_at_the_same_moment_share_one_read_of_the_runtime(
    emulator: Emulator, tmp_path: Path
) -> None:
    clock = ManualClock(100.0)
    settings = {"kubeconfig": str(emulator.kubeconfig), "namespace": NAMESPACE}
    adapter = KubeflowAdapter(
        DispatchCluster(name="kf", adapter="kubeflow", settings=settings),
        AdapterContext(state_dir=tmp_path / "state", clock=clock),
    )
    jobs = [job_of(example_spec("torch", name=f"burst-{i}")) for i in range(4)]
    reads = emulator.requests().count("get", "clustertrainingruntimes")

    async def starts() -> None:
        await asyncio.gather(*(adapter.start(job, 1) for job in jobs[:3]))
        clock.advance(RUNTIME_FRESH + 1)  # a later start reads the runtime again
        await adapter.start(jobs[3], 1)
        await adapter.aclose()

    run(starts())
    assert emulator.requests().count("get", "clustertrainingruntimes") - reads == 2
    assert len(names(emulator, "TrainJob")) == 4
    assert emulator.requests().count("get", "trainjobs") == 0  # nothing was read to adopt


def _foreign(kind: str, name: str) -> dict[str, object]:
    spec: dict[str, object] = (
        {"runtimeRef": {"name": "torch-dispatch"}}
        if kind == "TrainJob"
        else {"template": {"spec": {"replicatedJobs": []}}}
    )
    return {
        "apiVersion": TRAINER,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"dispatch.dev/job": "someone-else", "dispatch.dev/attempt": "1"},
        },
        "spec": spec,
    }


@pytest.mark.parametrize("kind", ["TrainJob", "TrainingRuntime"])
def test_an_existing_object_of_another_job_is_an_error_naming_it(
    emulator: Emulator, make_adapter: AdapterFactory, kind: str
) -> None:
    job = job_of(example_spec("torch"))
    name = f"{job.id}-1"
    emulator.create(_foreign(kind, name))
    with pytest.raises(Unsupported) as refused:
        run(make_adapter().start(job, 1))
    [reason] = refused.value.reasons
    assert reason.rule == "name-taken"
    assert f"{kind} {NAMESPACE}/{name}" in reason.message
    assert "someone-else" in reason.message
    # only the foreign object is left: nothing of this attempt exists
    assert [o["metadata"]["labels"]["dispatch.dev/job"] for o in stored(emulator, kind)] == [
        "someone-else"
    ]
    other = "TrainingRuntime" if kind == "TrainJob" else "TrainJob"
    assert stored(emulator, other) == []


def test_editing_the_original_runtime_leaves_a_submitted_job_unchanged(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    run(make_adapter().start(job, 1))
    [before] = stored(emulator, "TrainingRuntime")
    edited = patch(
        emulator,
        "ClusterTrainingRuntime",
        "torch-dispatch",
        {"spec": {"mlPolicy": {"numNodes": 7}}},
        namespace=None,
    )
    assert edited["spec"]["mlPolicy"]["numNodes"] == 7
    [after] = stored(emulator, "TrainingRuntime")
    assert after["spec"] == before["spec"]
    assert after["spec"]["mlPolicy"]["numNodes"] == 1
    # and a repeated start adopts the copy as it is
    run(make_adapter().start(job, 1))
    [again] = stored(emulator, "TrainingRuntime")
    assert again["spec"] == before["spec"]


def test_deleting_the_trainjob_removes_the_copy(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    handle = run(make_adapter().start(job, 1))
    cluster = emulator.cluster
    rtype = cluster.rtype(TRAINER, "TrainJob")
    emulator.call(lambda: cluster.store.delete(rtype, NAMESPACE, handle.native))
    assert stored(emulator, "TrainJob") == []
    assert stored(emulator, "TrainingRuntime") == []


def _break_runtime(emu: Emulator) -> None:
    """Edit the original runtime so that the rules refuse it (no backoffLimit: 0)."""
    node = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "node", "image": "x"}],
                    }
                }
            },
        },
    }
    patch(
        emu,
        "ClusterTrainingRuntime",
        "torch-dispatch",
        {"spec": {"template": {"spec": {"replicatedJobs": [node]}}}},
        namespace=None,
    )


def test_a_started_attempt_is_adopted_even_if_its_runtime_is_now_refused(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    first = run(make_adapter().start(job, 1))
    _break_runtime(emulator)
    with pytest.raises(Unsupported):
        run(make_adapter().start(job, 2))  # a new attempt is planned again, and refused
    again = run(make_adapter().start(job, 1))
    assert again.data["uid"] == first.data["uid"]
    assert names(emulator, "TrainJob") == [first.native]
    assert names(emulator, "TrainingRuntime") == [first.native]


def test_a_refusal_after_the_copy_was_created_removes_it(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    emulator.faults.add(FaultRule(verb="create", resource="trainjobs", status=500, times=1))
    with pytest.raises(OutcomeUnknown):
        run(make_adapter().start(job, 1))
    assert names(emulator, "TrainingRuntime") == [f"{job.id}-1"]
    _break_runtime(emulator)
    with pytest.raises(Unsupported) as refused:
        run(make_adapter().start(job, 1))
    assert BACKOFF_LIMIT in refused.value.rules
    assert stored(emulator, "TrainingRuntime") == stored(emulator, "TrainJob") == []


def test_a_started_trainjob_is_timed_until_its_stream_delivers_it(
    make_adapter: AdapterFactory,
) -> None:
    """The start announces its TrainJob to the streams (``Streams.created``) under the key the
    TrainJob stream delivers it by, so the delivery ends the timing and measures the lag."""
    adapter = make_adapter()

    async def started_and_delivered() -> tuple[int, float]:
        await adapter.start(job_of(example_spec("torch")), 1)
        streams = adapter.capture().streams
        for _ in range(200):
            if not streams._created:
                break
            await asyncio.sleep(0.05)
        return len(streams._created), adapter.behind()

    waiting, lag = run(started_and_delivered())
    assert waiting == 0  # delivered, and matched to what the start announced
    assert lag >= 0.0

"""The runtime copy made owned by its TrainJob after ``start`` returned (``api/owners.py``):
in the background, retried, crash-safe through the ``dispatch.dev/owner-pending`` label."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.adapters.kubeflow.api import owners
from dispatch.adapters.kubeflow.planning.trainjob import LABEL_OWNER_PENDING
from dispatch.model import AttemptHandle, Job, OutcomeUnknown
from dispatch.testing.k8s import Emulator, FaultRule
from tests.emulator.emulator_process import KUBECTL, run_kubectl

from .conftest import (
    NAMESPACE,
    TRAINER,
    AdapterFactory,
    example_spec,
    job_of,
    run,
    start_drained,
    stored,
)


def _copy(emulator: Emulator) -> dict[str, Any]:
    [copy] = stored(emulator, "TrainingRuntime")
    return copy


def _owned_by_its_trainjob(emulator: Emulator) -> bool:
    [trainjob] = stored(emulator, "TrainJob")
    copy = _copy(emulator)
    refs = copy["metadata"].get("ownerReferences") or []
    pending = LABEL_OWNER_PENDING in copy["metadata"].get("labels", {})
    return [r["uid"] for r in refs] == [trainjob["metadata"]["uid"]] and not pending


def test_start_returns_after_two_requests_and_the_owner_patch_follows(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter, job = make_adapter(), job_of(example_spec("torch"))

    async def scenario() -> tuple[bool, int, int]:
        before = emulator.requests().count("patch", "trainingruntimes")
        await adapter.start(job, 1)
        at_return = emulator.requests().count("patch", "trainingruntimes") - before
        pending = LABEL_OWNER_PENDING in _copy(emulator)["metadata"]["labels"]
        await adapter.drain()
        return pending, at_return, emulator.requests().count("patch", "trainingruntimes")

    pending, at_return, after = run(scenario())
    assert pending and at_return == 0  # start waited for the copy and the TrainJob alone
    assert after == 1
    assert _owned_by_its_trainjob(emulator)


def test_a_transient_failure_of_the_patch_is_tried_again(
    emulator: Emulator, make_adapter: AdapterFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owners, "PAUSE", 0.01)
    emulator.faults.add(FaultRule(verb="patch", resource="trainingruntimes", status=503, times=2))
    run(start_drained(make_adapter(), job_of(example_spec("torch")), 1))
    assert emulator.requests().count("patch", "trainingruntimes") == 3
    assert _owned_by_its_trainjob(emulator)


def test_a_patch_left_after_its_tries_is_sent_by_the_next_sweep(
    emulator: Emulator, make_adapter: AdapterFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-running supervisor does not wait for a restart: the namespace where a patch was
    left is swept again at its next start there (here at once: ``RESWEEP_AFTER`` 0)."""
    monkeypatch.setattr(owners, "PAUSE", 0.01)
    monkeypatch.setattr(owners, "RESWEEP_AFTER", 0.0)
    rule = FaultRule(verb="patch", resource="trainingruntimes", status=503, times=owners.ATTEMPTS)
    emulator.faults.add(rule)
    adapter = make_adapter()
    first, second = job_of(example_spec("torch")), job_of(example_spec("torch", name="other"))

    async def scenario() -> tuple[int, set[str], int]:
        await start_drained(adapter, first, 1)
        left, unswept = adapter.copy_owners().left, set(adapter.copy_owners().unswept)
        await adapter.start(second, 1)  # sweeps the namespace again
        await adapter._sweeps[NAMESPACE][0]
        await adapter.drain()
        return left, unswept, adapter.copy_owners().owned

    left, unswept, owned = run(scenario())
    assert (left, unswept) == (1, {NAMESPACE})
    assert owned == 2  # the second start's copy, and the first one's, found by the sweep
    copies = stored(emulator, "TrainingRuntime")
    assert len(copies) == 2
    assert all(c["metadata"].get("ownerReferences") for c in copies)
    assert not any(LABEL_OWNER_PENDING in c["metadata"]["labels"] for c in copies)


def _crashed_after_start(adapter: KubeflowAdapter, job: Job) -> AttemptHandle:
    """``start`` on a loop that ends at once, as a process killed after it: the patch owed is
    never sent (the loop's end cancels it)."""

    async def start() -> AttemptHandle:
        handle = await adapter.start(job, 1)
        await adapter.copy_owners().close()
        return handle

    return run(start())


def test_a_copy_a_crash_left_unowned_is_owned_by_the_next_watch(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    handle = _crashed_after_start(make_adapter(), job)
    assert not _owned_by_its_trainjob(emulator)
    assert LABEL_OWNER_PENDING in _copy(emulator)["metadata"]["labels"]

    later = make_adapter()  # the next process: its first watch in the namespace sweeps

    async def watch_briefly() -> int:
        stream = later.watch([handle])
        await anext(stream)
        await later._sweeps[NAMESPACE][0]
        await later.drain()
        await stream.aclose()
        return later.copy_owners().owned

    assert run(watch_briefly()) == 1
    assert _owned_by_its_trainjob(emulator)


def test_the_sweep_leaves_a_copy_whose_trainjob_does_not_exist(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    """A copy without its TrainJob may be one a start is creating (or a retry will adopt):
    it is neither owned nor removed by a sweep."""
    job = job_of(example_spec("torch"))
    emulator.faults.add(FaultRule(verb="create", resource="trainjobs", status=500, times=1))
    with pytest.raises(OutcomeUnknown):
        run(make_adapter().start(job, 1))
    adapter = make_adapter()

    async def sweep() -> int:
        return await adapter.copy_owners().sweep(NAMESPACE)

    assert run(sweep()) == 0
    copy = _copy(emulator)
    assert "ownerReferences" not in copy["metadata"]
    assert LABEL_OWNER_PENDING in copy["metadata"]["labels"]


def test_a_trainjob_deleted_before_the_patch_takes_its_copy_along(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    """The patch then names an owner that is gone: the garbage collector removes the copy."""
    job = job_of(example_spec("torch"))
    adapter = make_adapter()

    async def scenario() -> None:
        await adapter.start(job, 1)
        [trainjob] = stored(emulator, "TrainJob")
        cluster, name = emulator.cluster, trainjob["metadata"]["name"]
        rtype = cluster.rtype(TRAINER, "TrainJob")
        emulator.call(
            lambda: cluster.store.delete(rtype, NAMESPACE, name, propagation="Background")
        )
        await adapter.drain()

    run(scenario())
    assert stored(emulator, "TrainJob") == []
    assert stored(emulator, "TrainingRuntime") == []


def test_a_patch_refused_for_good_leaves_the_trainjob_running(
    emulator: Emulator, make_adapter: AdapterFactory, caplog: pytest.LogCaptureFixture
) -> None:
    emulator.faults.add(
        FaultRule(verb="patch", resource="trainingruntimes", status=403, message="no patch")
    )
    adapter = make_adapter()
    handle = run(start_drained(adapter, job_of(example_spec("torch")), 1))
    assert len(stored(emulator, "TrainJob")) == 1
    assert not _owned_by_its_trainjob(emulator)
    assert "not made owned by its TrainJob" in caplog.text
    assert handle.data["uid"] == stored(emulator, "TrainJob")[0]["metadata"]["uid"]


def test_many_starts_owe_their_patches_to_a_few_workers(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter = make_adapter()
    jobs = [job_of(example_spec("torch", name=f"torch-{i}")) for i in range(12)]

    async def scenario() -> tuple[int, int]:
        await asyncio.gather(*(adapter.start(job, 1) for job in jobs))
        busy = len(adapter.copy_owners()._workers)
        await adapter.drain()
        return busy, adapter.copy_owners().owned

    busy, owned = run(scenario())
    assert busy <= owners.WORKERS
    assert owned == 12
    copies = stored(emulator, "TrainingRuntime")
    assert len(copies) == 12
    assert all(c["metadata"].get("ownerReferences") for c in copies)


def test_a_denied_sweep_is_not_made_again_at_every_start(
    emulator: Emulator,
    make_adapter: AdapterFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without list on trainingruntimes the sweep cannot run: it is said once, and starts do
    not pay a refused list each."""
    monkeypatch.setattr(owners, "RESWEEP_AFTER", 0.0)
    emulator.faults.add(FaultRule(verb="list", resource="trainingruntimes", status=403))
    adapter = make_adapter()
    jobs = [job_of(example_spec("torch", name=f"torch-{i}")) for i in range(3)]

    async def scenario() -> None:
        for job in jobs:
            await start_drained(adapter, job, 1)
            await asyncio.wait([adapter._sweeps[NAMESPACE][0]])

    run(scenario())
    assert emulator.requests().count("list", "trainingruntimes") == 1
    assert "grant list on trainingruntimes" in caplog.text
    assert all(c["metadata"].get("ownerReferences") for c in stored(emulator, "TrainingRuntime"))


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_finds_what_a_crash_left_and_deletes_the_copy_with_its_trainjob(
    emulator: Emulator, make_adapter: AdapterFactory, tmp_path: Path
) -> None:
    """What an operator would type (docs): the label selector finds the copies waiting for
    their owner; once owned, deleting the TrainJob with kubectl takes the copy along."""

    def kubectl(*args: str) -> str:
        done = run_kubectl(emulator.kubeconfig, tmp_path, "-n", NAMESPACE, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    job = job_of(example_spec("torch"))
    handle = _crashed_after_start(make_adapter(), job)
    pending = kubectl("get", "trainingruntimes", "-l", LABEL_OWNER_PENDING, "-o", "name")
    assert pending == f"trainingruntime.trainer.kubeflow.org/{handle.native}"

    adapter = make_adapter()

    async def sweep() -> None:
        await adapter.copy_owners().sweep(NAMESPACE)
        await adapter.drain()

    run(sweep())
    assert kubectl("get", "trainingruntimes", "-l", LABEL_OWNER_PENDING, "-o", "name") == ""
    owner = kubectl(
        "get",
        "trainingruntime",
        handle.native,
        "-o",
        "jsonpath={.metadata.ownerReferences[0].kind}",
    )
    assert owner == "TrainJob"
    kubectl("delete", "trainjob", handle.native, "--wait=true")
    assert (
        kubectl("get", "trainingruntimes", "-l", f"dispatch.dev/job={job.id}", "-o", "name") == ""
    )


def test_a_patch_owed_the_moment_the_last_worker_ends_gets_a_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker that has just ended stays in the set until its done-callback runs: a patch
    owed in between must not wait for a worker that will never come."""
    sent: list[str] = []

    async def send(self: owners.CopyOwners, owed: owners.Owed) -> None:
        sent.append(owed[1])

    monkeypatch.setattr(owners.CopyOwners, "_send", send)

    async def scenario() -> None:
        copies = owners.CopyOwners(connection=None)  # type: ignore[arg-type]  # never used
        copies.owe(NAMESPACE, "a", "uid-a")
        await copies.drain()  # resumes before the ended worker's callback has run
        copies.owe(NAMESPACE, "b", "uid-b")
        await asyncio.wait_for(copies.drain(), 5)

    run(scenario())
    assert sent == ["a", "b"]

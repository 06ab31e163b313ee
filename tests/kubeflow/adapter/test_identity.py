"""The uid fence (``live/identity.py``): dispatch acts on, and judges, only the objects it
created, even when another owner's object takes their name, also between a read and a write."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.adapters.kubeflow.api import submit
from dispatch.adapters.kubeflow.api.client import Connection, Resource, Session
from dispatch.model import AttemptHandle, Cause, State
from dispatch.testing.k8s import Emulator

from .conftest import NAMESPACE, TRAINER, AdapterFactory, example_spec, job_of, run, stored


def _replace(emulator: Emulator, kind: str, name: str) -> str:
    """Delete ``kind`` ``name`` and create another owner's object under the name; its uid."""
    cluster = emulator.cluster
    rtype = cluster.rtype(TRAINER, kind)
    emulator.call(lambda: cluster.store.delete(rtype, NAMESPACE, name, propagation="Background"))
    spec: dict[str, Any] = (
        {"runtimeRef": {"name": "torch-dispatch"}}
        if kind == "TrainJob"
        else {"template": {"spec": {"replicatedJobs": []}}}
    )
    made = emulator.create(
        {
            "apiVersion": TRAINER,
            "kind": kind,
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"team": "other"}},
            "spec": spec,
        }
    )
    return str(made["metadata"]["uid"])


class _RacingSession(Session):
    """Another owner replaces the object right after dispatch first reads one of ``kind``."""

    def __init__(self, inner: Session, kind: str, then: Callable[[str], None]) -> None:
        super().__init__(inner.api, inner.timeout)
        self.kind, self.then = kind, then

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> Any:
        found = await super().get(res, name, namespace)
        if res.kind == self.kind and found is not None:
            self.then(name)
        return found


class _RacingConnection(Connection):
    def __init__(self, inner: Connection, kind: str, then: Callable[[str], None]) -> None:
        super().__init__(inner.kubeconfig, inner.context)
        self.kind, self.then = kind, then

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        async with super().session() as inner:
            yield _RacingSession(inner, self.kind, self.then)


def _once(fn: Callable[[str], None]) -> Callable[[str], None]:
    done: list[str] = []

    def call(name: str) -> None:
        if not done:
            done.append(name)
            fn(name)

    return call


def _start(make_adapter: AdapterFactory) -> tuple[KubeflowAdapter, AttemptHandle]:
    adapter = make_adapter()
    handle = run(adapter.start(job_of(example_spec("torch")), 1))
    return adapter, handle


def test_observe_ends_a_replaced_attempt_unknown_naming_both_uids(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter, handle = _start(make_adapter)
    theirs = _replace(emulator, "TrainJob", handle.native)
    seen = run(adapter.observe(handle))
    assert (seen.outcome.state, seen.outcome.cause, seen.gone) == (
        State.FAILED,
        Cause.UNKNOWN,
        True,
    )
    [proof] = seen.outcome.evidence
    assert (proof.data["uid"], proof.data["found"]) == (handle.data["uid"], theirs)
    assert handle.data["uid"] in seen.outcome.summary and theirs in seen.outcome.summary
    # a fresh adapter (another supervisor) says the same; a handle of before uids were
    # recorded keeps reading by name
    assert run(make_adapter().observe(handle)).outcome.cause is Cause.UNKNOWN
    legacy = AttemptHandle(handle.job_id, 1, handle.cluster, handle.native, {})
    assert theirs not in run(make_adapter().observe(legacy)).outcome.summary


def test_cancel_leaves_a_replaced_trainjob_alone(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter, handle = _start(make_adapter)
    theirs = _replace(emulator, "TrainJob", handle.native)
    run(adapter.cancel(handle, "alice", "stop"))
    [kept] = stored(emulator, "TrainJob")
    assert kept["metadata"]["uid"] == theirs
    assert not kept["metadata"].get("annotations") and not kept["metadata"].get("deletionTimestamp")


def test_the_api_server_refuses_cancelling_a_trainjob_replaced_after_the_read(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    adapter, handle = _start(make_adapter)
    replaced: list[str] = []
    adapter.connection = _RacingConnection(
        adapter.connection,
        "TrainJob",
        _once(lambda name: replaced.append(_replace(emulator, "TrainJob", name))),
    )
    run(adapter.cancel(handle, "alice", "stop"))
    [kept] = stored(emulator, "TrainJob")
    assert replaced == [kept["metadata"]["uid"]]  # the patch (422) and delete (409) refused
    assert not kept["metadata"].get("annotations") and not kept["metadata"].get("deletionTimestamp")


def test_a_runtime_copy_replaced_after_the_read_is_not_deleted(
    emulator: Emulator, make_adapter: AdapterFactory
) -> None:
    job = job_of(example_spec("torch"))
    adapter = make_adapter()
    plan = run(adapter.plan(job, 1))
    name = f"{job.id}-1"
    copy = next(a.content for a in plan.artifacts if a.kind == "TrainingRuntime")
    emulator.create(copy, NAMESPACE)  # this attempt's copy, owned by no TrainJob yet
    replaced: list[str] = []
    racing = _RacingConnection(
        adapter.connection,
        "TrainingRuntime",
        _once(lambda n: replaced.append(_replace(emulator, "TrainingRuntime", n))),
    )

    async def discard() -> None:
        async with racing.session() as session:
            await submit.discard_copy(session, name, job, 1, NAMESPACE)

    run(discard())
    [kept] = stored(emulator, "TrainingRuntime")
    assert replaced == [kept["metadata"]["uid"]] and not kept["metadata"].get("deletionTimestamp")

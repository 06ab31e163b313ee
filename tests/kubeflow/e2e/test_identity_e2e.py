"""A TrainJob replaced under dispatch's name while no supervisor ran (issue 26, Identity).

A supervisor stops; someone deletes the attempt's TrainJob and creates their own TrainJob
under the same name (no dispatch labels, a new uid). dispatch acts only on the object whose
uid it recorded: the other owner's TrainJob and JobSet are left untouched (no annotation, no
deletion), and the attempt ends ``unknown`` with evidence naming both uids, whatever the
other TrainJob does (even when it completes).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("kubernetes")

from kubernetes import client, config

from dispatch.adapters.kubeflow.planning.names import trainjob_name
from dispatch.model import Cause, State

from .harness import NAMESPACE, TRAINER, World

GROUP, VERSION = TRAINER.split("/")
JOBSET = "jobset.x-k8s.io/v1alpha2"


@pytest.fixture
def custom(world: World) -> Iterator[client.CustomObjectsApi]:
    api = config.new_client_from_config(config_file=str(world.emulator.kubeconfig))
    try:
        yield client.CustomObjectsApi(api)
    finally:
        api.close()


def _foreign(name: str, run_for: float) -> dict[str, Any]:
    """Somebody else's TrainJob: same name, no dispatch labels."""
    scenario = json.dumps({"default": {"runFor": run_for}})
    return {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": {"team": "someone-else"}},
        "spec": {
            "runtimeRef": {"name": "torch-dispatch", "kind": "ClusterTrainingRuntime"},
            "trainer": {
                "numNodes": 1,
                "image": "busybox",
                "env": [{"name": "EMULATOR_SCENARIO", "value": scenario}],
            },
        },
    }


def _wait(check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


async def _start_then_stop(world: World, job: str) -> None:
    """Supervise until the job's ranks run, then stop the supervisor."""
    supervisor = world.supervisor("s1")
    task = asyncio.ensure_future(supervisor.run(asyncio.Event(), until_idle=True))
    deadline = time.monotonic() + 60.0
    while not world.running(job):
        assert time.monotonic() < deadline and not task.done(), "the job did not start"
        await asyncio.sleep(0.05)
    while world.records.get_job(job).state is not State.RUNNING:
        assert time.monotonic() < deadline, "the job was not recorded running"
        await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    for adapter in world.adapters_made:
        await adapter.aclose()  # type: ignore[attr-defined]
    world.adapters_made.clear()


def _replace(world: World, custom: client.CustomObjectsApi, name: str, run_for: float) -> str:
    """Delete dispatch's TrainJob, create a foreign one under its name; the foreign uid."""
    custom.delete_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "trainjobs", name, propagation_policy="Foreground"
    )
    _wait(lambda: name not in {o["metadata"]["name"] for o in world.objects("TrainJob")})
    _wait(lambda: name not in {o["metadata"]["name"] for o in world.objects("JobSet", JOBSET)})
    made = custom.create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "trainjobs", _foreign(name, run_for)
    )
    return str(made["metadata"]["uid"])


def _one(world: World, kind: str, name: str, api_version: str = TRAINER) -> dict[str, Any]:
    [found] = [o for o in world.objects(kind, api_version) if o["metadata"]["name"] == name]
    return found


def _started_then_replaced(
    world: World, custom: client.CustomObjectsApi, run_for: float
) -> tuple[str, str, str, str]:
    """A job started, its supervisor stopped, and its TrainJob replaced by a foreign one
    that runs ``run_for`` s: (job, TrainJob name, dispatch's uid, the foreign uid)."""
    job = world.submit("own", {"default": {"runFor": 3600}})
    asyncio.run(_start_then_stop(world, job))
    name = trainjob_name(job, 1)
    [attempt] = world.records.attempts(job)
    assert attempt.handle is not None
    ours = str(attempt.handle.data["uid"])
    return job, name, ours, _replace(world, custom, name, run_for=run_for)


def _check_unknown(world: World, job: str, ours: str, theirs: str, end: State) -> None:
    record = world.records.get_job(job)
    assert record.state is end, record  # not running for good
    [attempt] = world.records.attempts(job)
    assert attempt.outcome is not None
    assert (attempt.outcome.state, attempt.outcome.cause) == (State.FAILED, Cause.UNKNOWN)
    assert ours in attempt.outcome.summary and theirs in attempt.outcome.summary
    said = [e for e in world.records.evidence(job, 1) if e.kind == "guard"]
    assert any(e.data.get("uid") == ours and e.data.get("found") == theirs for e in said), said
    # nothing of the other owner's TrainJob is recorded as the attempt's evidence
    recorded = [e for e in world.records.evidence(job, 1) if e.kind != "guard"]
    assert not [e.key for e in recorded if theirs in json.dumps(e.data)]


@pytest.mark.timeout(180)
def test_cancel_leaves_a_foreign_trainjob_with_dispatchs_name_alone(
    world: World, custom: client.CustomObjectsApi
) -> None:
    job, name, ours, theirs = _started_then_replaced(world, custom, run_for=3600)
    jobset = _wait(
        lambda: [o for o in world.objects("JobSet", JOBSET) if o["metadata"]["name"] == name]
    )
    jobset_uid = jobset[0]["metadata"]["uid"]

    world.records.request_cancel(job, "alice", "no longer needed")
    asyncio.run(world.supervise("s2", timeout=90.0))

    _check_unknown(world, job, ours, theirs, State.CANCELLED)
    foreign = _one(world, "TrainJob", name)
    assert foreign["metadata"]["uid"] == theirs
    assert not foreign["metadata"].get("deletionTimestamp")
    assert not any(
        k.startswith("dispatch.dev/") for k in foreign["metadata"].get("annotations") or {}
    )
    still = _one(world, "JobSet", name, JOBSET)
    assert still["metadata"]["uid"] == jobset_uid and not still["metadata"].get("deletionTimestamp")


@pytest.mark.timeout(180)
def test_a_foreign_trainjob_that_completes_is_not_the_attempts_success(
    world: World, custom: client.CustomObjectsApi
) -> None:
    job, name, ours, theirs = _started_then_replaced(world, custom, run_for=2)
    _wait(
        lambda: any(
            c.get("type") == "Complete" and c.get("status") == "True"
            for c in (_one(world, "TrainJob", name).get("status") or {}).get("conditions") or []
        )
    )

    asyncio.run(world.supervise("s2", timeout=90.0))

    _check_unknown(world, job, ours, theirs, State.FAILED)
    foreign = _one(world, "TrainJob", name)
    assert foreign["metadata"]["uid"] == theirs and not foreign["metadata"].get("deletionTimestamp")

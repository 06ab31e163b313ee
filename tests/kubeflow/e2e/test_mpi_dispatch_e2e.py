"""A dispatch job on the example OpenMPI runtime (examples/kubeflow/runtimes/mpi.yaml),
submitted and supervised by dispatch on the emulator: the runtime rules accept it, the objects
``dispatch plan --show-jobset`` shows are the ones Trainer creates (the SSH key aside: it is
made at creation), the gang forms, and the launcher's exit decides the attempt."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatch.adapters.kubeflow.planning.plan import with_jobset
from dispatch.model import Cause, State
from tests.conftest import EXAMPLES
from tests.kubeflow.e2e.harness import World, attempt_outcome

MPI_RUNTIME = EXAMPLES / "kubeflow" / "runtimes" / "mpi.yaml"
SPEC = yaml.safe_load((EXAMPLES / "kubeflow" / "jobs" / "mpi.yaml").read_text())
SSHD = {"replicatedJob": "node", "runFor": None}  # sshd runs until the JobSet ends


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path)
    made.emulator.create(yaml.safe_load(MPI_RUNTIME.read_text()))
    try:
        yield made
    finally:
        made.close()


def submit(world: World, name: str, launcher: dict[str, Any]) -> str:
    scenario = {"pods": [SSHD, {"replicatedJob": "launcher", **launcher}]}
    fields = {k: v for k, v in SPEC.items() if k not in ("name", "cluster")}
    fields["recovery"] = {"unmatched": "fail"}
    fields["env"] = {"EMULATOR_SCENARIO": json.dumps(scenario)}
    return world.submit(name, **fields)


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """What the API server adds (uid, versions, timestamps, status) left out."""
    meta = {
        k: v
        for k, v in obj["metadata"].items()
        if k in ("name", "namespace", "labels", "annotations", "ownerReferences")
    }
    meta["ownerReferences"] = [{**o, "uid": "-"} for o in meta.get("ownerReferences") or []]
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def test_the_objects_shown_are_the_ones_trainer_creates_and_the_job_succeeds(
    world: World,
) -> None:
    job_id = submit(world, "mpi-ok", {"runFor": 3})
    job = world.records.get_job(job_id).job
    plan = with_jobset(asyncio.run(world.adapter().plan(job, 1)))
    assert plan.accepted, plan.capabilities.refusals
    shown = {a.kind: a.content for a in plan.artifacts}
    asyncio.run(world.supervise())
    assert attempt_outcome(world, job_id)[:2] == (State.SUCCEEDED, None)
    for kind, api in (
        ("JobSet", "jobset.x-k8s.io/v1alpha2"),
        ("PodGroup", "scheduling.x-k8s.io/v1alpha1"),
        ("ConfigMap", "v1"),
    ):
        created = [
            o for o in world.objects(kind, api) if o["metadata"]["name"].startswith("mpi-ok")
        ]
        if kind == "ConfigMap":
            created = [o for o in created if o["metadata"]["name"].endswith("-mpi-hostfile")]
        [made] = created
        expected = strip(shown[kind])
        if kind == "JobSet":  # JobSet's status fields aside, the spec is Trainer's
            assert strip(made)["spec"] == expected["spec"]
        else:
            assert strip(made) == expected
    [secret] = [
        o for o in world.objects("Secret", "v1") if o["metadata"]["name"].startswith("mpi-ok")
    ]
    assert set(secret["data"]) == set(shown["Secret"]["data"])


def test_the_launchers_exit_code_fails_the_attempt(world: World) -> None:
    job_id = submit(world, "mpi-fail", {"runFor": 2, "exitCode": 3})
    asyncio.run(world.supervise())
    state, cause, _, exit_code = attempt_outcome(world, job_id)
    assert (state, cause, exit_code) == (State.FAILED, Cause.APP_ERROR, 3)

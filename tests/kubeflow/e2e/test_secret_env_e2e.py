"""``secretEnv`` on the emulator: the values become a Secret dispatch creates before the
TrainJob and makes owned by it; the TrainJob, its JobSet and its pods refer to it by
``secretKeyRef``; the values are in no record, plan or log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes")

from dispatch.adapters.kubeflow.planning.names import trainjob_name
from dispatch.adapters.secrets import SecretStore
from dispatch.model import State

from .harness import World

KEPT, FILED = "kept-value-5150", "file-value-6160"


def containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod_spec.get("containers") or [])


def test_secret_env_becomes_an_owned_secret_and_secret_key_refs(
    world: World, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text(FILED + "\n")
    secrets = {"KEPT": {"fromEnv": "MY_KEPT"}, "FILED": {"fromFile": str(token)}}
    job = world.submit("secrets", {}, secretEnv=secrets)
    SecretStore(world.tmp / "state" / "secrets").keep(job, {"KEPT": KEPT})
    seen: list[list[dict[str, Any]]] = []
    world.when(lambda: world.running(job), seen.append)
    asyncio.run(world.supervise())

    status = world.records.get_job(job)
    assert status.state is State.SUCCEEDED, status.summary
    name = trainjob_name(job, 1)
    trainjob = next(t for t in world.objects("TrainJob") if t["metadata"]["name"] == name)
    secret = next(
        s for s in world.objects("Secret", "v1") if s["metadata"]["name"] == f"{name}-env"
    )
    stored = secret.get("stringData") or secret.get("data")
    assert stored == {"KEPT": KEPT, "FILED": FILED}
    owners = secret["metadata"]["ownerReferences"]
    assert [(o["kind"], o["uid"]) for o in owners] == [("TrainJob", trainjob["metadata"]["uid"])]

    ref = {"KEPT": {"secretKeyRef": {"name": f"{name}-env", "key": "KEPT"}}}
    env = {e["name"]: e for e in trainjob["spec"]["trainer"]["env"]}
    assert env["KEPT"]["valueFrom"] == ref["KEPT"] and "value" not in env["KEPT"]
    assert seen, "the pods were never seen running"
    for pod in seen[0]:
        node = next(c for c in containers(pod["spec"]) if c["name"] == "node")
        pod_env = {e["name"]: e for e in node.get("env") or []}
        assert pod_env["KEPT"]["valueFrom"] == ref["KEPT"]
        assert pod_env["FILED"]["valueFrom"]["secretKeyRef"]["key"] == "FILED"

    # no value in the records (database and its journal) nor in any plan
    for path in (world.tmp / "state").rglob("*"):
        if path.is_file() and path.parent.name != "secrets":
            data = path.read_bytes()
            assert KEPT.encode() not in data and FILED.encode() not in data, path
    shown = asyncio.run(world.adapter().plan(world.records.get_job(job).job, 2))
    assert KEPT not in str(shown.to_json()) and FILED not in str(shown.to_json())

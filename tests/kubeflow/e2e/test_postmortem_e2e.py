"""Failed TrainJobs stay for post-mortems: 50 jobs whose rank 1 exits 3 on a runtime that can
never run them again (FailJobSet, maxRestarts 0, backoffLimit 0). dispatch ends each attempt
as soon as the exit is seen, often before Trainer writes Failed; none of the TrainJobs may be
deleted, and the Kubeflow SDK reads every one as Failed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.model import Cause, State
from tests.emulator.sdk_venv import ensure_sdk_venv

from .harness import NAMESPACE, World, kueue

JOBS = 50
CRASH = {"pods": [{"index": 1, "runFor": 3, "exitCode": 3}], "default": {"runFor": 30}}
SDK_SCRIPT = """
import json, sys
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient
client = TrainerClient(KubernetesBackendConfig(config_file=sys.argv[1], namespace=sys.argv[2]))
print(json.dumps({name: client.get_job(name).status for name in sys.argv[3:]}))
"""


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """Room for all 50 at once (2 CPU each, 8 per node): the supervisor starts them in one
    burst, and the point here is what is kept after they fail, not waiting for capacity."""
    made = World(tmp_path, kueue_config=kueue(), nodes=tuple(f"node-{i}" for i in range(13)))
    try:
        yield made
    finally:
        made.close()


@pytest.mark.timeout(900)
def test_fifty_failed_trainjobs_are_all_kept_and_failed(world: World, tmp_path: Path) -> None:
    jobs = [world.submit(f"crash{i}", CRASH) for i in range(JOBS)]
    asyncio.run(world.supervise(timeout=600))
    names = []
    for job in jobs:
        record = world.records.get_job(job)
        assert (record.state, record.cause) == (State.FAILED, Cause.APP_ERROR), job
        [attempt] = world.records.attempts(job)
        assert attempt.handle is not None
        names.append(attempt.handle.native)

    def trainjobs() -> dict[str, dict]:
        return {o["metadata"]["name"]: o for o in world.objects("TrainJob")}

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kept = trainjobs()
        failed = [
            n
            for n in names
            if any(
                c["type"] == "Failed" and c["status"] == "True"
                for c in (kept.get(n, {}).get("status") or {}).get("conditions") or []
            )
        ]
        if len(failed) == len(names) or set(names) - set(kept):
            break
        time.sleep(0.2)
    kept = trainjobs()
    assert sorted(set(names) - set(kept)) == [], "dispatch deleted failed TrainJobs"
    for name in names:
        metadata = kept[name]["metadata"]
        assert not metadata.get("deletionTimestamp"), name
        assert "dispatch.dev/retired" not in (metadata.get("annotations") or {}), name
    python, why = ensure_sdk_venv()
    if python is None:
        pytest.skip(why)
    script = tmp_path / "get_jobs.py"
    script.write_text(SDK_SCRIPT)
    done = subprocess.run(
        [str(python), str(script), str(world.emulator.kubeconfig), NAMESPACE, *names],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    statuses = json.loads(done.stdout.strip().splitlines()[-1])
    assert statuses == dict.fromkeys(names, "Failed")

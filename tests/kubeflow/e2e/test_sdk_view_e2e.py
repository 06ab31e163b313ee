"""What a Kubeflow SDK user sees of dispatch's jobs: the SDK's TrainerClient, unmodified (its
own venv), against the emulator, on a job that succeeded, one that failed and one cancelled.

A dispatch TrainJob names its runtime copy in ``runtimeRef``, so ``list_jobs(runtime=...)``
for the runtime the user chose finds none; the chosen runtime is the TrainJob's
``dispatch.dev/runtime`` label, and copies carry ``dispatch.dev/runtime-copy-of``. A cancelled
job's TrainJob is deleted (foreground): the SDK no longer finds it."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dispatch.model import Cause, State
from tests.emulator.sdk_venv import ensure_sdk_venv

from .harness import NAMESPACE, World

SDK_SCRIPT = """
import json, sys
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import TrainerClient
client = TrainerClient(KubernetesBackendConfig(config_file=sys.argv[1], namespace=sys.argv[2]))
ok, bad, cancelled, chosen = sys.argv[3:7]
seen = {"jobs": sorted(j.name for j in client.list_jobs())}
seen["runtimes"] = sorted(r.name for r in client.list_runtimes())
seen["byRuntime"] = [j.name for j in client.list_jobs(runtime=client.get_runtime(chosen))]
for name in (ok, bad):
    job = client.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=60,
                                     polling_interval=1)
    seen[name] = {
        "status": job.status,
        "steps": sorted(s.name for s in client.get_job(name).steps),
        "logs": list(client.get_job_logs(name, step="node-1")),
        "events": sorted({e.reason for e in client.get_job_events(name)}),
    }
try:
    client.get_job(cancelled)
    seen[cancelled] = "found"
except Exception as exc:
    seen[cancelled] = type(exc).__name__
print(json.dumps(seen))
"""


@pytest.mark.timeout(900)
def test_the_sdk_reads_dispatch_jobs(world: World, tmp_path: Path) -> None:
    python, why = ensure_sdk_venv()
    if python is None:
        pytest.skip(why)
    ok = world.submit("fine", {"default": {"runFor": 3, "logs": ["all good"]}})
    bad = world.submit(
        "broken",
        {"pods": [{"index": 1, "runFor": 3, "exitCode": 3, "logs": ["boom"]}],
         "default": {"runFor": 30}},
    )  # fmt: skip
    stop = world.submit("stopped", {"default": {"runFor": 600}})

    async def scenario() -> None:
        task = asyncio.ensure_future(world.supervise(timeout=120))
        while not world.running(stop):
            await asyncio.sleep(0.02)
        world.records.request_cancel(stop, "alice", "wrong data")
        await task

    asyncio.run(scenario())
    states = {j: world.records.get_job(j).state for j in (ok, bad, stop)}
    assert states == {ok: State.SUCCEEDED, bad: State.FAILED, stop: State.CANCELLED}
    assert world.records.get_job(bad).cause is Cause.APP_ERROR
    names = {j: _native(world, j) for j in (ok, bad, stop)}
    script = tmp_path / "sdk_view.py"
    script.write_text(SDK_SCRIPT)
    done = subprocess.run(
        [str(python), str(script), str(world.emulator.kubeconfig), NAMESPACE,
         names[ok], names[bad], names[stop], "torch-dispatch"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["jobs"] == sorted([names[ok], names[bad]])
    assert seen["byRuntime"] == []  # runtimeRef names the copy (documented)
    assert names[ok] in seen["runtimes"]  # the live copy is a runtime to the SDK (documented)
    assert seen[names[ok]]["status"] == "Complete"
    assert seen[names[bad]]["status"] == "Failed"
    assert seen[names[ok]]["steps"] == ["node-0", "node-1"]
    assert "all good" in seen[names[ok]]["logs"]
    assert "boom" in seen[names[bad]]["logs"]
    assert seen[names[bad]]["events"], "the SDK reads the failed job's events"
    assert seen[names[stop]] != "found"
    for job in (ok, bad):
        trainjob = next(o for o in world.objects("TrainJob") if o["metadata"]["name"] == names[job])
        assert trainjob["metadata"]["labels"]["dispatch.dev/runtime"] == "torch-dispatch"


def _native(world: World, job: str) -> str:
    [attempt] = world.records.attempts(job)
    assert attempt.handle is not None
    return attempt.handle.native

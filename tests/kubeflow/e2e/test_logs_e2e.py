"""Per-rank output on Kubeflow (the adapter's ``read_output``, behind ``dispatch logs`` and
``dispatch run``): the trainer containers' logs as the emulator's kubelet writes them, once,
followed while the attempt runs, and what is said when a rank's pod is gone."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from dispatch.adapters.base import OutputReader
from dispatch.cli.main import cli
from dispatch.model import NotFound
from tests.emulator.scenario_helpers import delete_now

from .harness import NAMESPACE, World

SCENARIO = {
    "pods": [{"index": 1, "runFor": 4, "logs": ["epoch 1 loss 0.52", "epoch 2 loss 0.31"]}],
    "default": {"runFor": 4, "logs": ["rank zero here"]},
}


def _handle(world: World, job: str) -> Any:
    [attempt] = world.records.attempts(job)
    assert attempt.handle is not None
    return attempt.handle


async def _lines(adapter: Any, handle: Any, **kw: Any) -> list[str]:
    return [line async for line in adapter.read_output(handle, **kw)]


def test_each_rank_s_lines_after_the_attempt(world: World) -> None:
    job = world.submit("talk", SCENARIO)
    asyncio.run(world.supervise())
    adapter = world.adapter()
    assert isinstance(adapter, OutputReader)
    handle = _handle(world, job)
    every = asyncio.run(_lines(adapter, handle))
    assert "[rank 1] epoch 1 loss 0.52" in every
    assert "[rank 0] rank zero here" in every
    assert every.index("[rank 0] rank zero here") < every.index("[rank 1] epoch 1 loss 0.52")
    one = asyncio.run(_lines(adapter, handle, rank=1))
    assert one[1:3] == ["epoch 1 loss 0.52", "epoch 2 loss 0.31"], one
    with pytest.raises(NotFound, match="no rank 2"):
        asyncio.run(_lines(adapter, handle, rank=2))


def test_follow_streams_the_ranks_while_the_attempt_runs(world: World) -> None:
    job = world.submit("stream", SCENARIO)
    adapter = world.adapter()

    async def run() -> list[str]:
        supervising = asyncio.create_task(world.supervise())
        while not world.records.attempts(job) or world.records.attempts(job)[0].handle is None:
            await asyncio.sleep(0.05)
        handle = _handle(world, job)
        lines = [line async for line in adapter.read_output(handle, follow=True)]
        await supervising
        return lines

    lines = asyncio.run(run())
    assert "[rank 1] epoch 2 loss 0.31" in lines
    assert "[rank 0] rank zero here" in lines
    assert any(line.endswith("exited with code 0") for line in lines)


def _delete_pods(world: World, job: str) -> None:
    """Delete the job's pods at once, as their Job (or a person) would after the end."""
    pod_type = world.emulator.cluster.rtype("v1", "Pod")
    for pod in world.pods(job):
        delete_now(world.emulator, pod_type, NAMESPACE, pod["metadata"]["name"])


def test_a_rank_whose_pod_is_gone_says_so(world: World) -> None:
    job = world.submit("gone", SCENARIO)
    asyncio.run(world.supervise())
    _delete_pods(world, job)
    adapter = world.adapter()
    handle = _handle(world, job)
    with pytest.raises(NotFound, match="rank 1's pod is gone"):
        asyncio.run(_lines(adapter, handle, rank=1))
    every = asyncio.run(_lines(adapter, handle))
    assert "[rank 1] (rank 1's pod is gone: its output was deleted with it)" in every


def test_dispatch_logs_prints_a_rank_and_all_ranks(world: World, tmp_path: Path) -> None:
    """``dispatch logs JOB --rank 1`` and ``dispatch logs JOB`` over the same records."""
    job = world.submit("cli", SCENARIO)
    asyncio.run(world.supervise())
    config = tmp_path / "dispatch.yaml"
    entry = {"name": "kf", "adapter": "kubeflow", **world.settings}
    config.write_text(yaml.safe_dump({"clusters": [entry]}))
    env = {"DISPATCH_STATE_DIR": str(world.records_dir)}
    runner = CliRunner()
    one = runner.invoke(cli, ["--config", str(config), "logs", job, "--rank", "1"], env=env)
    assert one.exit_code == 0, one.output
    assert "epoch 2 loss 0.31" in one.output.splitlines()
    every = runner.invoke(cli, ["--config", str(config), "logs", job], env=env)
    assert every.exit_code == 0, every.output
    assert "[rank 0] rank zero here" in every.output.splitlines()


CRASH = {
    "pods": [
        {
            "index": 1,
            "runFor": 3,
            "exitCode": 3,
            "logs": ["Traceback (most recent call last):", "RuntimeError: NCCL error: unhandled"],
        }
    ],
    "default": {"runFor": 30},
}


def test_a_failed_rank_s_last_output_is_kept_after_its_pod_is_gone(
    world: World, tmp_path: Path
) -> None:
    """The tail of rank 1's log is read into the records when the attempt ends; after the pods
    are deleted `dispatch logs JOB --rank 1` prints it, marked as kept."""
    job = world.submit("lastwords", CRASH)
    asyncio.run(world.supervise())
    kept = [e for e in world.records.evidence(job, 1) if e.kind == "log"]
    assert [e.data["rank"] for e in kept] == [1], [e.summary for e in kept]
    assert "RuntimeError: NCCL error: unhandled" in kept[0].data["lines"]
    _delete_pods(world, job)
    config = tmp_path / "dispatch.yaml"
    config.write_text(
        yaml.safe_dump({"clusters": [{"name": "kf", "adapter": "kubeflow", **world.settings}]})
    )
    env = {"DISPATCH_STATE_DIR": str(world.records_dir)}
    runner = CliRunner()
    one = runner.invoke(cli, ["--config", str(config), "logs", job, "--rank", "1"], env=env)
    assert one.exit_code == 0, one.output
    lines = one.output.splitlines()
    assert lines[0].startswith("(kept by dispatch: the last ") and "rank 1" in lines[0]
    assert "RuntimeError: NCCL error: unhandled" in lines
    every = runner.invoke(cli, ["--config", str(config), "logs", job], env=env)
    assert every.exit_code == 0, every.output
    assert "[rank 1] RuntimeError: NCCL error: unhandled" in every.output.splitlines()
    assert any("rank 0's pod is gone" in line for line in every.output.splitlines())


RUN_SPEC = """
name: talkative
cluster: kf
runtime: {kind: ClusterTrainingRuntime, name: torch-dispatch}
nodes: 2
image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
command: [torchrun, train.py]
resources: {cpu: "1"}
env:
  EMULATOR_SCENARIO: '%s'
"""


@pytest.mark.timeout(300)
def test_dispatch_run_and_logs_follow_print_the_ranks_lines(world: World, tmp_path: Path) -> None:
    """``dispatch run`` (a new process, with its background supervisor) on the emulator prints
    each rank's lines as they come; ``dispatch logs JOB --rank 1 -f`` afterwards prints rank 1's."""
    config = tmp_path / "dispatch.yaml"
    config.write_text(
        yaml.safe_dump({"clusters": [{"name": "kf", "adapter": "kubeflow", **world.settings}]})
    )
    spec = tmp_path / "job.yaml"
    spec.write_text(RUN_SPEC % json.dumps(SCENARIO))
    env = {**os.environ, "DISPATCH_STATE_DIR": str(tmp_path / "cli-state")}
    base = [sys.executable, "-m", "dispatch", "--config", str(config)]
    done = subprocess.run(
        [*base, "run", str(spec)], capture_output=True, text=True, timeout=240, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "[rank 1] epoch 1 loss 0.52" in lines, done.stdout
    assert "[rank 0] rank zero here" in lines
    assert "state     succeeded" in done.stdout
    listed = subprocess.run(
        [*base, "list", "-o", "json"], capture_output=True, text=True, timeout=60, env=env
    )
    job = json.loads(listed.stdout)[0]["job"]
    follow = subprocess.run(
        [*base, "logs", job, "--rank", "1", "-f"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert follow.returncode == 0, follow.stderr
    assert "epoch 2 loss 0.31" in follow.stdout.splitlines()


def test_a_container_restarted_in_place_has_its_earlier_run_served_as_previous() -> None:
    """As a kubelet keeps a log per container instance: the current run by default, the one
    before the last restart with ``previous``; the reader shows both, marked."""
    from dispatch.adapters.kubeflow.api.client import Connection
    from dispatch.adapters.kubeflow.api.logs import read_log
    from dispatch.testing.k8s.scenario import PodBehaviour, PodRule, Scenario
    from tests.emulator.scenario_helpers import cluster, wait_for
    from tests.kubeflow.e2e.harness import indexed_job

    first = PodBehaviour(run_for=2, exit_code=1, logs=("first run",))
    scenario = Scenario(
        pods=(PodRule(first, index=0, attempt=1),),
        default=PodBehaviour(run_for=None, logs=("second run",)),
    )
    with cluster(scenario) as emu:
        emu.create(indexed_job("again", restart="OnFailure", backoff=6))
        rtype = emu.cluster.rtype("v1", "Pod")

        def restarted() -> str | None:
            for pod in emu.call(lambda: emu.cluster.store.list(rtype, "default").items):
                statuses = pod["status"].get("containerStatuses") or []
                running = statuses and "running" in statuses[0].get("state", {})
                if (
                    pod["metadata"]["name"].startswith("again-0-")
                    and running
                    and (statuses[0].get("restartCount", 0) > 0)
                ):
                    return str(pod["metadata"]["name"])
            return None

        pod = wait_for("rank 0 restarted and running", restarted)

        async def read() -> tuple[str | None, str | None, str | None]:
            connection = Connection(emu.kubeconfig, None)
            try:
                async with connection.session() as session:
                    now = await read_log(session, "default", pod, "train")
                    before = await read_log(session, "default", pod, "train", previous=True)
                    other = await read_log(
                        session, "default", pod.replace("again-0", "nope"), "train"
                    )
                    return now, before, other
            finally:
                await connection.aclose()

        now, before, other = asyncio.run(read())
    assert now is not None and "second run" in now and "first run" not in now
    assert before is not None and "first run" in before and "second run" not in before
    assert other is None  # no such pod: None, not an error

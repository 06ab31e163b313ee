"""The Slurm adapter against a real two-node Slurm (started by the ``real_slurm`` fixture).

Each test asserts dispatch's state and cause for one way a job ends.
"""

from __future__ import annotations

import asyncio
import socket
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from dispatch.adapters.base import AdapterContext, Holder, OutputReader
from dispatch.adapters.slurm import SlurmAdapter
from dispatch.adapters.slurm import commands as cmd
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.adapters.slurm.transport import CommandResult, ProcessRunner, Transport
from dispatch.clock import SystemClock
from dispatch.config import ClusterConfig
from dispatch.model import (
    AttemptHandle,
    Cause,
    Job,
    Observation,
    State,
    Unsupported,
    parse_spec,
)
from tests.slurm.conftest import run
from tests.slurm.realslurm import RealSlurm

ENV_DUMP = "env | grep -E '^(PET_|DISPATCH_|RANK=|LOCAL_RANK=|WORLD_SIZE=|LOCAL_WORLD_SIZE=|MASTER_|SLURMD_NODENAME=|EPOCHS=|OMP_NUM_THREADS=)' | sort"


class RecordingRunner:
    """The real runner, recording every argv it runs (our own seam, not a mock)."""

    def __init__(self, inner: ProcessRunner) -> None:
        self.inner = inner
        self.transport: Transport = inner.transport
        self.argvs: list[list[str]] = []

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        self.argvs.append(list(argv))
        return await self.inner.run(argv, stdin=stdin, env=env)


class CountingClock(SystemClock):
    def __init__(self) -> None:
        self.sleeps = 0

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        await super().sleep(seconds)


def recording_adapter(
    cluster: ClusterConfig, tmp_path: Path, clock: SystemClock | None = None
) -> tuple[SlurmAdapter, RecordingRunner]:
    settings = SlurmSettings.from_cluster(cluster, tmp_path)
    runner = RecordingRunner(ProcessRunner(settings.make_transport(), env=settings.command_env))
    context = AdapterContext(state_dir=tmp_path / "state", clock=clock or SystemClock())
    return SlurmAdapter(cluster, context, runner=runner), runner


def make_job(name: str, **fields: object) -> Job:
    spec = parse_spec({"name": name, "cluster": "testslurm", **fields})
    return Job(id=f"{name}-x1", spec=spec, created_at=1_800_000_000.0)


async def watch_to_end(adapter: SlurmAdapter, handle: AttemptHandle) -> list[Observation]:
    return [seen async for seen in adapter.watch([handle])]


async def output_of(adapter: SlurmAdapter, handle: AttemptHandle, rank: int) -> dict[str, str]:
    lines = [line async for line in adapter.read_output(handle, rank=rank)]
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_success_on_two_nodes_with_rank_env_on_each(
    slurm: SlurmAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    job = make_job(
        "ok", nodes=2, procsPerNode=2, command=["sh", "-c", ENV_DUMP], env={"EPOCHS": "3"}
    )

    async def scenario() -> tuple[
        AttemptHandle, AttemptHandle, list[Observation], list[dict[str, str]]
    ]:
        first = await slurm.start(job, 1)
        again = await slurm.start(job, 1)  # adopts, does not submit twice
        seen = await watch_to_end(slurm, first)
        outputs = [await output_of(slurm, first, rank) for rank in range(4)]
        return first, again, seen, outputs

    handle, again, seen, outputs = run(scenario())
    assert again == handle
    assert (seen[-1].state, seen[-1].outcome.cause) == (State.SUCCEEDED, None)
    assert seen[-1].evidence[0].data["source"] == "squeue"
    assert {o["SLURMD_NODENAME"] for o in outputs[:2]} != {
        o["SLURMD_NODENAME"] for o in outputs[2:]
    }
    for rank, env in enumerate(outputs):
        assert env["DISPATCH_JOB"] == job.id
        assert env["DISPATCH_ATTEMPT"] == "1"
        assert env["DISPATCH_CLUSTER"] == "testslurm"
        assert env["EPOCHS"] == "3"
        assert env["PET_NNODES"] == "2"
        assert env["PET_NPROC_PER_NODE"] == "2"
        assert env["PET_NODE_RANK"] == str(rank // 2)
        assert env["PET_MASTER_ADDR"] == socket.gethostname()
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"]
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"]
        assert (env["RANK"], env["LOCAL_RANK"]) == (str(rank), str(rank % 2))
        assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == ("4", "2")
        assert env["OMP_NUM_THREADS"] == "1"  # as torchrun sets it, two ranks per node
    assert len({env["PET_MASTER_PORT"] for env in outputs}) == 1


def test_torchrun_command_gets_one_task_per_node(slurm: SlurmAdapter, tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "torchrun"  # stands in for torchrun: prints what it was given
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\n{ENV_DUMP}\necho ARGS="$*"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    job = make_job("trun", nodes=2, procsPerNode=2, command=[str(fake), "train.py"])

    async def scenario() -> tuple[list[Observation], list[dict[str, str]]]:
        handle = await slurm.start(job, 1)
        seen = await watch_to_end(slurm, handle)
        assert handle.data["tasks"] == 2
        return seen, [await output_of(slurm, handle, rank) for rank in range(2)]

    seen, outputs = run(scenario())
    assert seen[-1].state is State.SUCCEEDED
    assert [env["PET_NODE_RANK"] for env in outputs] == ["0", "1"]
    for env in outputs:
        assert env["PET_NPROC_PER_NODE"] == "2"
        assert env["ARGS"] == "train.py"
        assert "RANK" not in env  # torchrun sets the ranks itself


def test_app_error_names_exit_code_and_failing_node(slurm: SlurmAdapter) -> None:
    job = make_job(
        "fail",
        nodes=2,
        command=[
            "sh",
            "-c",
            'if [ "$PET_NODE_RANK" = 1 ]; then echo "RuntimeError: boom"; exit 3; fi; sleep 30',
        ],
    )

    async def scenario() -> list[Observation]:
        return await watch_to_end(slurm, await slurm.start(job, 1))

    last = run(scenario())[-1]
    assert (last.state, last.outcome.cause) == (State.FAILED, Cause.APP_ERROR)
    failure = last.outcome.first_failure
    assert failure is not None
    assert (failure.exit_code, failure.rank, failure.node) == (3, 1, 1)
    assert {e.kind for e in last.evidence} == {"squeue", "batch-output", "log"}
    # the failed task's last output is kept in the evidence (its folder may be cleaned up)
    [kept] = [e for e in last.evidence if e.kind == "log"]
    assert (kept.data["rank"], kept.data["lines"]) == (1, ["RuntimeError: boom"])


def test_cancel_names_who_asked_and_hold_of_running_job_is_refused(slurm: SlurmAdapter) -> None:
    job = make_job("cancel", nodes=2, command=["sleep", "300"])

    async def scenario() -> tuple[list[Observation], Unsupported]:
        handle = await slurm.start(job, 1)
        async for seen in slurm.watch([handle]):
            if seen.state is State.RUNNING:
                break
        with pytest.raises(Unsupported) as refused:
            await slurm.hold(handle)
        await slurm.cancel(handle, actor="alice", reason="test")
        await slurm.cancel(handle, actor="alice", reason="again")  # idempotent
        return await watch_to_end(slurm, handle), refused.value

    seen, refused = run(scenario())
    assert refused.rules == ("hold-running",)
    last = seen[-1]
    assert (last.state, last.outcome.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert "by alice" in last.outcome.summary


def test_out_of_memory_in_an_srun_step(slurm: SlurmAdapter) -> None:
    grow = "import time\nx = []\nwhile True:\n    x.append(bytearray(50 * 2**20))\n    time.sleep(0.1)\n"
    job = make_job("oom", nodes=1, resources={"memory": "200Mi"}, command=["python3", "-c", grow])

    async def scenario() -> list[Observation]:
        return await watch_to_end(slurm, await slurm.start(job, 1))

    last = run(scenario())[-1]
    assert (last.state, last.outcome.cause) == (State.FAILED, Cause.OUT_OF_MEMORY)
    assert last.evidence[0].data["derivedExitCode"] == "0:125"


def test_hold_and_release(slurm: SlurmAdapter) -> None:
    job = make_job("held", nodes=2, command=["true"])
    assert isinstance(slurm, Holder)
    assert isinstance(slurm, OutputReader)

    async def scenario() -> tuple[State, State, list[Observation]]:
        handle = await slurm.start(job, 1, held=True)
        held = (await slurm.observe(handle)).state
        await slurm.hold(handle)  # idempotent
        still = (await slurm.observe(handle)).state
        await slurm.release(handle)
        return held, still, await watch_to_end(slurm, handle)

    held, still, seen = run(scenario())
    assert (held, still) == (State.HELD, State.HELD)
    assert seen[-1].state is State.SUCCEEDED


def test_refused_before_anything_is_created(slurm: SlurmAdapter, real_slurm: RealSlurm) -> None:
    job = make_job("toobig", nodes=3, resources={"gpu": 1}, command=["true"])

    async def scenario() -> tuple[Unsupported, tuple[str, ...]]:
        report = await slurm.capabilities(job.spec)
        with pytest.raises(Unsupported) as refused:
            await slurm.start(job, 1)
        return refused.value, tuple(r.rule for r in report.refusals)

    refused, rules = run(scenario())
    assert set(refused.rules) == {"slurm-too-many-nodes", "slurm-no-gpus"} == set(rules)
    listed = real_slurm.run("squeue", "-h", "-t", "all", "--name=dispatch-toobig-x1-a1")
    assert listed.stdout.strip() == ""


def test_watch_asks_once_per_cycle_for_all_jobs(
    slurm_cluster: ClusterConfig, tmp_path: Path
) -> None:
    clock = CountingClock()
    adapter, runner = recording_adapter(slurm_cluster, tmp_path, clock)
    jobs = [make_job(f"many{i}", nodes=1, command=["sleep", "1"]) for i in range(3)]

    async def scenario() -> tuple[list[Observation], list[str]]:
        handles = [await adapter.start(job, 1) for job in jobs]
        facts = await adapter.facts()
        runner.argvs.clear()
        seen = [seen async for seen in adapter.watch(handles)]
        return seen, cmd.build_squeue_json_command(facts.json_argument)

    seen, states = run(scenario())
    assert {s.handle.job_id for s in seen if s.state is State.SUCCEEDED} == {j.id for j in jobs}
    cycles = clock.sleeps + 1
    assert cycles >= 2
    assert runner.argvs == [states] * cycles


def test_two_supervisors_starting_one_attempt_converge_on_one_job(
    slurm_cluster: ClusterConfig, tmp_path: Path, real_slurm: RealSlurm
) -> None:
    first, _ = recording_adapter(slurm_cluster, tmp_path / "a")
    second, _ = recording_adapter(slurm_cluster, tmp_path / "b")
    job = make_job("race", nodes=1, command=["sleep", "2"])

    async def scenario() -> tuple[AttemptHandle, AttemptHandle, list[Observation]]:
        one, two = await asyncio.gather(first.start(job, 1), second.start(job, 1))
        return one, two, await watch_to_end(first, one)

    one, two, seen = run(scenario())
    assert one.native == two.native
    assert seen[-1].state is State.SUCCEEDED
    listed = real_slurm.run(
        "squeue", "-h", "-t", "all", "--name=dispatch-race-x1-a1", "-o", "%i %T"
    ).stdout.split("\n")
    ran = [line for line in listed if line.strip() and "CANCELLED" not in line]
    assert ran == [f"{one.native} COMPLETED"]


# Timeout: tests/slurm/test_supervised.py (attempt 1 times out, the policy retries it).

"""A Slurm job id is dispatch's only while Slurm reports the name dispatch gave the job (ids
are reused once Slurm wraps around or its state is reset): another job under the id ends the
attempt ``unknown`` naming both, and is never cancelled. Recorded outputs through a fake
runner at the adapter's seam (``transport.Runner``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.slurm import commands as cmd
from dispatch.adapters.slurm.adapter import SlurmAdapter
from dispatch.adapters.slurm.transport import CommandResult, LocalTransport, Transport
from dispatch.config import ClusterConfig
from dispatch.model import AttemptHandle, Cause, State

RECORDED = Path(__file__).parent / "recorded"
ANSWERS = {
    tuple(cmd.build_version_command()): "sinfo-version-22.05.txt",
    tuple(cmd.build_config_command()): "scontrol-show-config-22.05.txt",
    tuple(cmd.build_partitions_command()): "scontrol-show-partition-22.05.txt",
    tuple(cmd.build_nodes_command()): "scontrol-show-node-22.05.txt",
    tuple(cmd.build_squeue_json_command()): "squeue-22.05.json",
}


class RecordedSlurm:
    """Answers the probe and ``squeue --json`` with recorded outputs, anything else with
    success; remembers every command."""

    def __init__(self) -> None:
        self.transport: Transport = LocalTransport()
        self.asked: list[list[str]] = []

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        self.asked.append(list(argv))
        name = ANSWERS.get(tuple(argv))
        text = (RECORDED / name).read_text() if name else ""
        return CommandResult(tuple(argv), 0, text, "")


def _adapter(tmp_path: Path) -> tuple[SlurmAdapter, RecordedSlurm]:
    runner = RecordedSlurm()
    cluster = ClusterConfig(name="hpc", adapter="slurm", settings={"accounting": "none"})
    return SlurmAdapter(cluster, AdapterContext(state_dir=tmp_path), runner=runner), runner


def _handle(name: str | None) -> AttemptHandle:
    # job 32008 is RUNNING in the recorded squeue output, named dispatch-running-a1
    data = {"name": name, "outputDir": "/scratch/out", "tasks": 1} if name else {"tasks": 1}
    return AttemptHandle("running", 1, "hpc", "32008", data)


def test_a_job_id_that_names_another_job_ends_the_attempt_unknown(tmp_path: Path) -> None:
    adapter, _ = _adapter(tmp_path)
    seen = asyncio.run(adapter.observe(_handle("dispatch-mine-a1")))
    assert (seen.outcome.state, seen.outcome.cause, seen.gone) == (
        State.FAILED,
        Cause.UNKNOWN,
        True,
    )
    assert "dispatch-mine-a1" in seen.outcome.summary
    assert "dispatch-running-a1" in seen.outcome.summary
    [proof] = seen.outcome.evidence
    assert (proof.data["name"], proof.data["found"]) == ("dispatch-mine-a1", "dispatch-running-a1")


def test_cancel_leaves_a_job_id_that_names_another_job_alone(tmp_path: Path) -> None:
    adapter, runner = _adapter(tmp_path)
    asyncio.run(adapter.cancel(_handle("dispatch-mine-a1"), "alice", "stop"))
    assert not [a for a in runner.asked if a[0] == "scancel" or a[1:2] == ["update"]]


def test_cancel_names_the_job_so_slurm_refuses_another_under_the_id(tmp_path: Path) -> None:
    adapter, runner = _adapter(tmp_path)
    asyncio.run(adapter.cancel(_handle("dispatch-running-a1"), "alice", "stop"))
    assert ["scancel", "--name=dispatch-running-a1", "32008"] in runner.asked
    seen = asyncio.run(adapter.observe(_handle("dispatch-running-a1")))
    assert seen.outcome.state is State.RUNNING


def test_a_handle_recorded_without_a_name_keeps_acting_by_id(tmp_path: Path) -> None:
    adapter, runner = _adapter(tmp_path)
    assert asyncio.run(adapter.observe(_handle(None))).outcome.state is State.RUNNING
    asyncio.run(adapter.cancel(_handle(None), "alice", "stop"))
    assert ["scancel", "32008"] in runner.asked

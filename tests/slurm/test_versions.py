"""Two Slurm versions, two JSON formats: the adapter's probe chooses the format it reads.

On recorded outputs through a fake runner at the adapter's seam (``transport.Runner``):
Slurm 22.05 (``squeue --json``, v0.0.38) and 24.11 (``squeue --json=list`` then
``--json=v0.0.42``), and a build offering only formats dispatch has not read, which is refused
before anything is submitted. With ``DISPATCH_SLURM_PREFIX`` (a Slurm built from source,
``scripts/build-slurm-from-source.sh``) the live cluster is checked too; without it those
tests are skipped.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.slurm import SlurmAdapter
from dispatch.adapters.slurm import commands as cmd
from dispatch.adapters.slurm.formats import JSON_FORMATS, format_key
from dispatch.adapters.slurm.parsers import parse_squeue_json_output
from dispatch.adapters.slurm.transport import CommandResult, LocalTransport, Transport
from dispatch.config import ClusterConfig
from dispatch.model import AttemptHandle, Job, State, Unsupported, parse_spec
from tests.slurm.conftest import run
from tests.slurm.realslurm import RealSlurm

RECORDED = Path(__file__).parent / "recorded"


class RecordedInstallation:
    """Answers the probe and the status read with one release's recordings; ``sbatch`` and
    anything else not recorded fail loudly. Remembers every command."""

    def __init__(self, release: str, listed: str | None = None) -> None:
        self.transport: Transport = LocalTransport()
        self.asked: list[list[str]] = []
        self.answers = {
            tuple(cmd.build_version_command()): f"sinfo-version-{release}.txt",
            tuple(cmd.build_config_command()): f"scontrol-show-config-{release}.txt",
            tuple(cmd.build_partitions_command()): f"scontrol-show-partition-{release}.txt",
            tuple(cmd.build_nodes_command()): f"scontrol-show-node-{release}.txt",
            tuple(cmd.build_json_formats_command()): f"squeue-json-list-{release}.txt",
            tuple(cmd.build_squeue_json_command()): "squeue-22.05.json",
            tuple(cmd.build_squeue_json_command("v0.0.42")): "squeue-24.11.json",
        }
        self.listed = listed

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        self.asked.append(list(argv))
        if self.listed is not None and list(argv) == cmd.build_json_formats_command():
            return CommandResult(tuple(argv), 0, self.listed, "Possible data_parser plugins:\n")
        name = self.answers.get(tuple(argv))
        if name is None:
            return CommandResult(tuple(argv), 1, "", f"not recorded: {argv}")
        return CommandResult(tuple(argv), 0, (RECORDED / name).read_text(), "")


def adapter(runner: RecordedInstallation, tmp_path: Path) -> SlurmAdapter:
    cluster = ClusterConfig(name="hpc", adapter="slurm", settings={"outputDir": "/scratch/out"})
    return SlurmAdapter(cluster, AdapterContext(state_dir=tmp_path), runner=runner)


def handle(native: str, name: str) -> AttemptHandle:
    data = {"name": name, "outputDir": "/scratch/out", "tasks": 1}
    return AttemptHandle(name, 1, "hpc", native, data)


@pytest.mark.parametrize(
    ("release", "listing", "states"),
    [
        # 22.05: no listing (its --json takes no argument)
        ("22.05", [], ["squeue", "--states=all", "--json"]),
        ("24.11", [["squeue", "--json=list"]], ["squeue", "--states=all", "--json=v0.0.42"]),
    ],
)
def test_each_release_is_read_in_its_own_format(
    release: str, listing: list[list[str]], states: list[str], tmp_path: Path
) -> None:
    runner = RecordedInstallation(release)
    slurm = adapter(runner, tmp_path)
    recorded = parse_squeue_json_output((RECORDED / f"squeue-{release}.json").read_text())
    native = next(job.job_id for job in recorded if job.name == "dispatch-ok-a1")
    seen = asyncio.run(slurm.observe(handle(native, "dispatch-ok-a1")))
    assert (seen.state, seen.evidence[0].data["source"]) == (State.SUCCEEDED, "squeue")
    probe = [cmd.build_version_command(), cmd.build_config_command()]
    probe += [cmd.build_partitions_command(), cmd.build_nodes_command()]
    assert runner.asked == [*probe, *listing, states]


def test_a_build_offering_only_unknown_formats_is_refused_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    # 24.11's outputs, as if it listed only formats newer than dispatch has read
    runner = RecordedInstallation("24.11", listed="data_parser/v0.0.44\ndata_parser/v0.0.43\n")
    slurm = adapter(runner, tmp_path)
    spec = parse_spec({"name": "x", "cluster": "hpc", "command": ["true"]})
    job = Job(id="x", spec=spec, created_at=1_800_000_000.0)
    with pytest.raises(Unsupported) as refused:
        asyncio.run(slurm.start(job, 1))
    assert refused.value.rules == ("slurm-json-format",)
    [reason] = refused.value.reasons
    assert reason.message.startswith(
        "Slurm 24.11.7 offers the squeue --json formats (data_parser) v0.0.43, v0.0.44; "
        "dispatch reads only v0.0.38 (Slurm 22.05), v0.0.40"
    )
    # the probe only (four commands and the listing): no mkdir, no sbatch
    assert [argv[0] for argv in runner.asked] == [
        "sinfo",
        "scontrol",
        "scontrol",
        "scontrol",
        "squeue",
    ]
    report = asyncio.run(slurm.capabilities())
    assert {a.name: a.supported for a in report.answers}["slurm"] is False


# --- the live cluster, when it runs a Slurm built from source --------------------------------


def test_the_cluster_runs_the_build_dispatch_slurm_prefix_names(
    built_slurm: Path, real_slurm: RealSlurm, slurm: SlurmAdapter
) -> None:
    built = subprocess.run(
        [str(built_slurm / "sbin" / "slurmd"), "-V"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert real_slurm.run("sinfo", "--version").stdout.strip() == built
    config = real_slurm.run("scontrol", "show", "config").stdout
    assert f"SLURM_VERSION           = {built.split()[-1]}" in config  # the controller too
    facts = run(slurm.facts())
    assert facts.json_argument in JSON_FORMATS  # chosen from squeue --json=list
    assert facts.json_argument == max(
        (f for f in facts.json_formats if f in JSON_FORMATS),
        key=format_key,
    )


def test_every_offered_format_that_dispatch_reads_gives_the_same_jobs(
    built_slurm: Path, real_slurm: RealSlurm, slurm: SlurmAdapter
) -> None:
    facts = run(slurm.facts())
    readable = [f for f in facts.json_formats if f in JSON_FORMATS]
    assert len(readable) >= 2, facts.json_formats
    read = {}
    for found in readable:
        text = real_slurm.run(*cmd.build_squeue_json_command(found)).stdout
        assert json.loads(text)["meta"]["plugin"]["data_parser"] == f"data_parser/{found}"
        read[found] = sorted(
            (j.job_id, j.name, j.states, j.exit) for j in parse_squeue_json_output(text)
        )
    assert read[readable[0]], "the session's earlier tests left no jobs to compare"
    assert all(jobs == read[readable[0]] for jobs in read.values())

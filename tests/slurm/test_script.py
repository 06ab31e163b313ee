"""The batch script and the command lines, as values (golden files), and the transports."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from dispatch.adapters.slurm import commands as cmd
from dispatch.adapters.slurm.script import build_sbatch_script, job_name, layout
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.adapters.slurm.transport import LocalTransport, SshTransport
from dispatch.config import ClusterConfig
from dispatch.model import ConfigError, ExecutionIdentity, JobSpec, parse_spec

GOLDEN = Path(__file__).parent / "golden"
IDENTITY = ExecutionIdentity(job_id="mnist-ddp-00001", attempt=2, cluster="hpc")

DDP = parse_spec(
    {
        "name": "mnist-ddp",
        "cluster": "hpc",
        "nodes": 2,
        "procsPerNode": 4,
        "command": ["torchrun", "train.py"],
        "args": ["--epochs", "3"],
        "env": {"MESSAGE": "it's a test", "EPOCHS": "3"},
        "resources": {"cpu": "8", "memory": "16Gi", "gpu": 4},
        "timeLimit": "90m",
        "workingDir": "/shared/my project",
        "queue": "gpu",
    }
)
PROCS = parse_spec(
    {
        "name": "plain",
        "nodes": 2,
        "procsPerNode": 2,
        "command": ["python", "-u", "train.py"],
        "resources": {"cpu": "3", "memory": "1000Mi"},
        "timeLimit": "30s",
    }
)


@pytest.mark.parametrize(
    ("spec", "golden", "port"),
    [(DDP, "torchrun.sbatch", 29500), (PROCS, "procs-per-node.sbatch", None)],
)
def test_batch_script_matches_golden_file(spec: JobSpec, golden: str, port: int | None) -> None:
    script = build_sbatch_script(
        spec,
        IDENTITY,
        output_dir="/shared/dispatch/dispatch-mnist-ddp-00001-a2",
        partition=spec.queue,
        master_port=port,
    )
    assert script == (GOLDEN / golden).read_text()


def test_layout_rounds_up_to_slurm_units() -> None:
    shape = layout(PROCS)
    assert (shape.tasks_per_node, shape.tasks) == (2, 4)
    assert shape.cpus_per_task == 2  # 3 CPUs per node over 2 tasks, rounded up
    assert shape.memory_mib == 1000
    assert shape.minutes == 1  # 30 s -> 1 minute, Slurm's unit
    torch = layout(DDP)
    assert (torch.tasks_per_node, torch.procs_per_node, torch.cpus_per_task) == (1, 4, 8)
    assert (torch.memory_mib, torch.gpus_per_node, torch.minutes) == (16384, 4, 90)


def test_job_name_is_deterministic_per_attempt() -> None:
    assert job_name("mnist-ddp-00001", 2) == "dispatch-mnist-ddp-00001-a2"
    assert job_name("mnist-ddp-00001", 2) != job_name("mnist-ddp-00001", 3)


def test_a_value_a_batch_script_cannot_carry_is_refused() -> None:
    spec = PROCS.model_copy(update={"working_dir": '/tmp/a"b'})
    with pytest.raises(ValueError, match="chdir"):
        build_sbatch_script(spec, IDENTITY, output_dir="/out")


def test_command_builders() -> None:
    assert cmd.build_sbatch_command(hold=True, export=["PATH", "HOME"]) == [
        "sbatch",
        "--parsable",
        "--hold",
        "--export=HOME,PATH",
    ]
    assert cmd.build_sbatch_command()[-1] == "--export=NONE"
    assert cmd.build_sacct_command(["7", "9"])[-1] == "--jobs=7,9"
    assert cmd.build_squeue_name_command("dispatch-x-a1") == [
        "squeue",
        "--noheader",
        "--states=all",
        "--name=dispatch-x-a1",
        "--format=%i|%j|%T|%r",
    ]
    assert cmd.build_jobcomp_command("/var/log/slurm/jobcomp", ["7", "9"]) == [
        "grep",
        "-E",
        "^JobId=(7|9) ",
        "/var/log/slurm/jobcomp",
    ]
    assert cmd.cancel_comment("alice smith;rm") == "dispatch-cancel:alice_smith_rm"
    assert cmd.build_comment_command("7", "dispatch-cancel:a") == [
        "scontrol",
        "update",
        "JobId=7",
        "Comment=dispatch-cancel:a",
    ]


def test_local_transport_runs_the_argv_as_is() -> None:
    call = LocalTransport().invocation(["squeue", "--json"], {"SLURM_CONF": "/etc/slurm.conf"})
    assert call.argv == ("squeue", "--json")
    assert call.env == {"SLURM_CONF": "/etc/slurm.conf"}


def test_ssh_transport_quotes_the_remote_command() -> None:
    transport = SshTransport(host="login1", user="alice", port=2222, options=("-i", "key"))
    call = transport.invocation(
        ["scontrol", "update", "JobId=7", "Comment=x y"], {"SLURM_CONF": "/etc/s.conf"}
    )
    assert call.argv == (
        "ssh",
        "-o",
        "BatchMode=yes",
        "-p",
        "2222",
        "-i",
        "key",
        "alice@login1",
        "--",
        "env SLURM_CONF=/etc/s.conf scontrol update JobId=7 'Comment=x y'",
    )
    assert shlex.split(call.argv[-1])[-1] == "Comment=x y"
    assert call.env == {}


def test_settings_from_cluster_config(tmp_path: Path) -> None:
    local = SlurmSettings.from_cluster(ClusterConfig("hpc", "slurm", {}), tmp_path)
    assert local.output_dir == str(tmp_path / "slurm" / "hpc")
    assert isinstance(local.make_transport(), LocalTransport)
    ssh = SlurmSettings.from_cluster(
        ClusterConfig(
            "hpc", "slurm", {"transport": "ssh", "host": "login1", "outputDir": "/shared/d"}
        ),
        tmp_path,
    )
    assert isinstance(ssh.make_transport(), SshTransport)


def test_settings_name_every_problem(tmp_path: Path) -> None:
    cluster = ClusterConfig(
        "hpc", "slurm", {"transport": "ssh", "pollInterval": 0, "accounting": "maybe", "colour": 1}
    )
    with pytest.raises(ConfigError) as error:
        SlurmSettings.from_cluster(cluster, tmp_path)
    message = str(error.value)
    for part in ("colour", "host", "outputDir", "accounting", "pollInterval"):
        assert part in message


def test_omp_threads_default_only_for_several_ranks_per_node_and_yields_to_the_spec() -> None:
    line = 'export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"'
    assert line in build_sbatch_script(PROCS, IDENTITY, output_dir="/out").splitlines()
    one = PROCS.model_copy(update={"procs_per_node": 1})
    assert "OMP_NUM_THREADS" not in build_sbatch_script(one, IDENTITY, output_dir="/out")
    mine = PROCS.model_copy(update={"env": {"OMP_NUM_THREADS": "4"}})
    script = build_sbatch_script(mine, IDENTITY, output_dir="/out").splitlines()
    assert line not in script and "export OMP_NUM_THREADS=4" in script

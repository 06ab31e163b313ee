"""The batch script of one attempt, built as text from the spec: the dry run is this value.

One ``sbatch`` allocation of ``nodes`` nodes; its script starts the ranks with one ``srun``:
one task per node for a torchrun command (torchrun starts the ranks), else ``procsPerNode``
tasks per node, each with the torchrun-style variables derived from Slurm's own
(``SLURM_PROCID`` …). Every task sees ``PET_*``, the identity variables and the spec's env,
and ``OMP_NUM_THREADS=1`` when several ranks share a node and nobody set it (as torchrun).
Pure; no I/O.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from dispatch.model import ExecutionIdentity, JobSpec

#: The batch script's own output (srun's failure lines land here) and each task's output.
BATCH_OUTPUT = "batch.out"
TASK_OUTPUT = "task-{task}.out"

#: Without a configured master port, each job takes one derived from its Slurm job id, so
#: that jobs sharing a node do not collide.
DERIVED_PORT = "$(( 20000 + SLURM_JOB_ID % 10000 ))"


def job_name(job_id: str, attempt: int) -> str:
    """The Slurm job name of an attempt: deterministic, so ``start`` can find it again."""
    return f"dispatch-{job_id}-a{attempt}"


@dataclass(frozen=True, slots=True)
class Layout:
    """How the ranks of a spec are laid out on Slurm tasks."""

    nodes: int
    tasks_per_node: int  # srun tasks per node: 1 for torchrun, else procsPerNode
    procs_per_node: int  # PET_NPROC_PER_NODE
    cpus_per_task: int | None
    memory_mib: int | None  # per node
    gpus_per_node: int
    minutes: int | None

    @property
    def tasks(self) -> int:
        return self.nodes * self.tasks_per_node


def layout(spec: JobSpec) -> Layout:
    """Tasks, CPUs, memory, GPUs and time of a spec, in Slurm's units (rounded up)."""
    per_node = 1 if spec.launches_torchrun else spec.ranks_per_node
    cpus = spec.resources.cpu_count
    memory = spec.resources.memory_bytes
    return Layout(
        nodes=spec.nodes,
        tasks_per_node=per_node,
        procs_per_node=spec.ranks_per_node,
        cpus_per_task=max(1, math.ceil(cpus / per_node)) if cpus else None,
        memory_mib=math.ceil(memory / 2**20) if memory else None,
        gpus_per_node=spec.resources.gpu,
        minutes=math.ceil(spec.time_limit / 60) if spec.time_limit else None,
    )


def _directive(option: str, value: str | int) -> str:
    text = str(value)
    if any(c in text for c in "\n\"'"):
        raise ValueError(f"{option} value {text!r} cannot be written in a batch script")
    return (
        f'#SBATCH --{option}="{text}"'
        if any(c.isspace() for c in text)
        else (f"#SBATCH --{option}={text}")
    )


def build_sbatch_script(
    spec: JobSpec,
    identity: ExecutionIdentity,
    *,
    output_dir: str,
    partition: str | None = None,
    master_port: int | None = None,
) -> str:
    """The complete batch script for ``identity``'s attempt of ``spec``.

    ``output_dir`` is the attempt's folder on the cluster (it must exist before the job starts;
    the adapter creates it). Raises ``ValueError`` for a value a batch script cannot carry.
    """
    shape = layout(spec)
    lines = [
        "#!/bin/bash",
        f"# dispatch: job {identity.job_id}, attempt {identity.attempt}, "
        f"cluster {identity.cluster}. Generated; do not edit.",
        _directive("job-name", job_name(identity.job_id, identity.attempt)),
        _directive("nodes", shape.nodes),
        _directive("ntasks-per-node", shape.tasks_per_node),
        "#SBATCH --no-requeue",
        _directive("output", f"{output_dir}/{BATCH_OUTPUT}"),
    ]
    if partition:
        lines.append(_directive("partition", partition))
    if shape.minutes:
        lines.append(_directive("time", shape.minutes))
    if shape.memory_mib:
        lines.append(_directive("mem", f"{shape.memory_mib}M"))
    if shape.cpus_per_task:
        lines.append(_directive("cpus-per-task", shape.cpus_per_task))
    if shape.gpus_per_node:
        lines.append(_directive("gpus-per-node", shape.gpus_per_node))
    if spec.working_dir:
        lines.append(_directive("chdir", spec.working_dir))
    lines += ["", "set -u"]
    if shape.procs_per_node > 1 and "OMP_NUM_THREADS" not in spec.env:
        # torchrun's default for several processes per node, without its banner; a value
        # the job's environment already has (one it inherits) is kept
        lines.append('export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"')
    exported = {**identity.env(), **spec.env}
    lines += [f"export {key}={shlex.quote(value)}" for key, value in exported.items()]
    port = str(master_port) if master_port else DERIVED_PORT
    lines += [
        "# the tasks get this script's whole environment (sbatch --export chose the base)",
        "export SLURM_EXPORT_ENV=ALL",
        f"export PET_NNODES={shape.nodes}",
        f"export PET_NPROC_PER_NODE={shape.procs_per_node}",
        "# the batch script runs on the first node of the allocation",
        'export PET_MASTER_ADDR="$(hostname)"',
        f"export PET_MASTER_PORT={port}",
        "",
        "exec " + shlex.join(build_srun_command(spec, shape, output_dir=output_dir)),
        "",
    ]
    return "\n".join(lines)


def task_prelude(spec: JobSpec, shape: Layout) -> str:
    """Shell run by every task before the command: its node rank, and for a non-torchrun
    command its rank variables, all from Slurm's per-task variables."""
    assignments = ['PET_NODE_RANK="$SLURM_NODEID"']
    if not spec.launches_torchrun:
        assignments += [
            'RANK="$SLURM_PROCID"',
            'LOCAL_RANK="$SLURM_LOCALID"',
            'WORLD_SIZE="$SLURM_NTASKS"',
            f"LOCAL_WORLD_SIZE={shape.tasks_per_node}",
            'MASTER_ADDR="$PET_MASTER_ADDR"',
            'MASTER_PORT="$PET_MASTER_PORT"',
        ]
    return "export " + " ".join(assignments) + '; exec "$@"'


def build_srun_command(spec: JobSpec, shape: Layout, *, output_dir: str) -> list[str]:
    """The srun line that starts every task of the attempt (one step, killed as a whole when
    one task fails)."""
    argv = [
        "srun",
        f"--nodes={shape.nodes}",
        f"--ntasks={shape.tasks}",
        f"--ntasks-per-node={shape.tasks_per_node}",
        "--kill-on-bad-exit=1",
        f"--output={output_dir}/{TASK_OUTPUT.format(task='%t')}",
    ]
    if shape.cpus_per_task:
        argv.append(f"--cpus-per-task={shape.cpus_per_task}")
    return [
        *argv,
        "/bin/sh",
        "-c",
        task_prelude(spec, shape),
        "dispatch-task",
        *spec.command,
        *spec.args,
    ]

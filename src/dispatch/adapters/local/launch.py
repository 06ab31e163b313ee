"""Build an attempt's launch (argv, env, cwd and log of every process) from a job: pure.

Launch modes (DESIGN.md): a command starting with torchrun runs once per node and torchrun
starts the node's ranks; any other command runs ``procsPerNode`` times per node, each process
with the variables ``torch.distributed`` reads (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so ``init_process_group("gloo")``
works without torchrun. Every process also gets the torchrun-compatible ``PET_*`` variables
and the identity variables.

Precedence, lowest first: defaults dispatch chooses for convenience (``PATH`` with the
interpreter's folder first, ``PYTHONUNBUFFERED=1`` so logs can be followed,
``OMP_NUM_THREADS=1`` when several ranks share a node and neither the caller nor the spec
set it: what torchrun would set, without the banner torchrun prints when it does), then the
spec's ``env``, then the launcher and identity variables, which a spec cannot override.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from dispatch.adapters.local.launchfile import (
    MODE_PER_RANK,
    MODE_TORCHRUN,
    TAG_ENV,
    AttemptLaunch,
    ProcessLaunch,
)
from dispatch.model import Job

MASTER_ADDR = "127.0.0.1"
PORT_PLACEHOLDER = "<free port chosen at start>"


def build_launch(
    job: Job,
    attempt: int,
    *,
    working_dir: str,
    master_port: int | None,
    inherited: Mapping[str, str],
    python_dir: str,
    kill_grace: float = 5.0,
    memory_mode: str = "auto",
    weakened: str | None = None,
) -> AttemptLaunch:
    """The launch of ``attempt`` of ``job``. ``master_port`` None renders a placeholder (plans).

    ``inherited`` is the environment the processes start from: the job's captured base and
    ``inheritEnv`` (``model.environ``), nothing else of the caller's; ``python_dir`` is put
    first on its ``PATH``, so that ``python`` and ``torchrun`` name the interpreter dispatch
    runs under. The values of ``secretEnv`` are not in the launch, only their names: the
    runner gets them in its own environment.
    """
    spec = job.spec
    ppn = spec.ranks_per_node
    torchrun = spec.launches_torchrun
    port = PORT_PLACEHOLDER if master_port is None else str(master_port)
    tag = f"{job.id}/{attempt}"
    identity = job.identity(attempt, weakened).env()
    argv = (*spec.command, *spec.args)

    defaults: dict[str, str] = {"PYTHONUNBUFFERED": "1"}
    path = inherited.get("PATH", "")
    if python_dir and python_dir not in path.split(os.pathsep):
        defaults["PATH"] = os.pathsep.join(p for p in (python_dir, path) if p)
    if ppn > 1 and "OMP_NUM_THREADS" not in inherited:
        defaults["OMP_NUM_THREADS"] = "1"

    processes: list[ProcessLaunch] = []
    for node in range(spec.nodes):
        node_env = {
            "PET_NNODES": str(spec.nodes),
            "PET_NODE_RANK": str(node),
            "PET_NPROC_PER_NODE": str(ppn),
            "PET_MASTER_ADDR": MASTER_ADDR,
            "PET_MASTER_PORT": port,
            TAG_ENV: tag,
        }
        if torchrun:
            env = {**defaults, **spec.env, **node_env, **identity}
            processes.append(
                ProcessLaunch(
                    index=len(processes),
                    node=node,
                    rank=None,
                    local_rank=None,
                    argv=argv,
                    env=env,
                    cwd=working_dir,
                    log=f"logs/node-{node}.log",
                )
            )
            continue
        for local in range(ppn):
            rank = node * ppn + local
            rank_env = {
                "RANK": str(rank),
                "LOCAL_RANK": str(local),
                "GROUP_RANK": str(node),
                "WORLD_SIZE": str(spec.world_size),
                "LOCAL_WORLD_SIZE": str(ppn),
                "MASTER_ADDR": MASTER_ADDR,
                "MASTER_PORT": port,
            }
            env = {**defaults, **spec.env, **node_env, **rank_env, **identity}
            processes.append(
                ProcessLaunch(
                    index=len(processes),
                    node=node,
                    rank=rank,
                    local_rank=local,
                    argv=argv,
                    env=env,
                    cwd=working_dir,
                    log=f"logs/rank-{rank}.log",
                )
            )
    return AttemptLaunch(
        job_id=job.id,
        attempt=attempt,
        cluster=spec.cluster,
        mode=MODE_TORCHRUN if torchrun else MODE_PER_RANK,
        nodes=spec.nodes,
        procs_per_node=ppn,
        tag=tag,
        processes=tuple(processes),
        time_limit=spec.time_limit,
        memory_bytes=spec.resources.memory_bytes,
        kill_grace=kill_grace,
        memory_mode=memory_mode,
        environment=dict(inherited),
        secret_names=tuple(spec.secret_env),
    )

"""``identity()``: who this process is, read from the environment dispatch gives every rank.

dispatch publishes ``DISPATCH_JOB``, ``DISPATCH_ATTEMPT`` and ``DISPATCH_CLUSTER`` to every
rank, plus ``DISPATCH_IDENTITY_WEAKENED`` (the reason) when the cluster lets a rank run more
than once per attempt, and on such Kubeflow clusters ``DISPATCH_RANK_FAILURES`` (how often this
rank already failed in this attempt). Rank information comes from the torchrun-compatible
variables every scheduler sets: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``
(set per process by dispatch or by torchrun), else the per-node ``PET_*`` variables.

Reading never raises: a variable that is missing or not a valid number reads as None.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from dispatch.model import ExecutionIdentity

ENV_RANK_FAILURES = "DISPATCH_RANK_FAILURES"


def _int(environ: Mapping[str, str], *names: str) -> int | None:
    """The first of ``names`` set to a non-negative whole number, else None."""
    for name in names:
        text = environ.get(name, "").strip()
        if text.isdigit():
            return int(text)
    return None


@dataclass(frozen=True, slots=True)
class Identity:
    """What a process of a job knows about itself. Outside a dispatch job ``execution`` is None
    (and ``in_job`` False); rank fields are still filled when torchrun or another launcher set
    them.

    ``rank`` is the global rank, ``local_rank`` the rank on this node, ``node_rank`` the node's
    index; ``world_size`` counts every rank, ``local_world_size`` the ranks of this node,
    ``nodes`` the nodes. ``weakened`` is the reason a rank may run more than once within this
    attempt on this cluster (None: it runs at most once). ``rank_failures`` is how many times
    this rank already failed within this attempt, where the cluster reports it.
    """

    execution: ExecutionIdentity | None = None
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    local_world_size: int | None = None
    node_rank: int | None = None
    nodes: int | None = None
    rank_failures: int | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Identity:
        return cls(
            execution=ExecutionIdentity.from_env(environ),
            rank=_int(environ, "RANK"),
            local_rank=_int(environ, "LOCAL_RANK"),
            world_size=_int(environ, "WORLD_SIZE"),
            local_world_size=_int(environ, "LOCAL_WORLD_SIZE", "PET_NPROC_PER_NODE"),
            node_rank=_int(environ, "GROUP_RANK", "PET_NODE_RANK", "NODE_RANK"),
            nodes=_int(environ, "PET_NNODES"),
            rank_failures=_int(environ, ENV_RANK_FAILURES),
        )

    @property
    def in_job(self) -> bool:
        """True when this process runs as part of a dispatch job."""
        return self.execution is not None

    @property
    def job_id(self) -> str | None:
        return self.execution.job_id if self.execution else None

    @property
    def attempt(self) -> int | None:
        """This attempt's number (from 1), or None outside a dispatch job."""
        return self.execution.attempt if self.execution else None

    @property
    def cluster(self) -> str | None:
        return self.execution.cluster if self.execution else None

    @property
    def weakened(self) -> str | None:
        """Why a rank may run more than once within this attempt here, or None."""
        return self.execution.weakened if self.execution else None

    @property
    def restarted(self) -> bool:
        """True when the cluster reports that this rank already failed within this attempt."""
        return bool(self.rank_failures)

    @property
    def is_primary(self) -> bool:
        """True for global rank 0, or when no rank is known (a single process)."""
        return self.rank in (None, 0)

    def __str__(self) -> str:
        where = (
            f"job {self.job_id} attempt {self.attempt} on {self.cluster or '?'}"
            if self.execution
            else "not in a dispatch job"
        )
        rank = f", rank {self.rank} of {self.world_size}" if self.rank is not None else ""
        weakened = f" (weakened identity: {self.weakened})" if self.weakened else ""
        return f"{where}{rank}{weakened}"


def identity(environ: Mapping[str, str] | None = None) -> Identity:
    """This process's identity, read from ``environ`` (default: ``os.environ``).

    >>> me = identity({"DISPATCH_JOB": "hello-x7k2p", "DISPATCH_ATTEMPT": "2",
    ...                "DISPATCH_CLUSTER": "local", "RANK": "3", "WORLD_SIZE": "4"})
    >>> me.job_id, me.attempt, me.rank, me.weakened
    ('hello-x7k2p', 2, 3, None)
    >>> print(me)
    job hello-x7k2p attempt 2 on local, rank 3 of 4
    >>> identity({}).in_job
    False
    """
    return Identity.from_env(os.environ if environ is None else environ)

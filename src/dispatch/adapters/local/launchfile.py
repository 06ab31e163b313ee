"""What an attempt runner executes, as plain data (``launch.json``). Standard library only.

``start`` writes it once, before the runner exists; the runner only reads it. A process's
environment is exactly ``environment`` (captured from the submitter), the secrets named by
``secretEnv`` (their values reach the runner in its own environment, never this file), then
the process's ``env``; nothing else of the runner's environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the runner starts faster
if TYPE_CHECKING:
    from typing import Any

#: every process of an attempt (and everything it starts) carries this variable, so that
#: leftovers can be found after the runner itself was killed
TAG_ENV = "DISPATCH_LOCAL_TAG"

MODE_TORCHRUN = "torchrun"  # one torchrun per node; torchrun starts the ranks
MODE_PER_RANK = "per-rank"  # dispatch starts every rank itself


@dataclass(frozen=True, slots=True)
class ProcessLaunch:
    """One process the runner starts: one rank, or one torchrun for a node."""

    index: int
    node: int
    rank: int | None  # None when torchrun starts the node's ranks
    local_rank: int | None
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    log: str  # relative to the attempt directory

    @property
    def name(self) -> str:
        return (
            f"node-{self.node}/rank-{self.rank}" if self.rank is not None else f"node-{self.node}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "node": self.node,
            "rank": self.rank,
            "localRank": self.local_rank,
            "argv": list(self.argv),
            "env": dict(self.env),
            "cwd": self.cwd,
            "log": self.log,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ProcessLaunch:
        return cls(
            index=int(raw["index"]),
            node=int(raw["node"]),
            rank=raw.get("rank"),
            local_rank=raw.get("localRank"),
            argv=tuple(raw["argv"]),
            env=dict(raw["env"]),
            cwd=str(raw["cwd"]),
            log=str(raw["log"]),
        )


@dataclass(frozen=True, slots=True)
class AttemptLaunch:
    """An attempt as the runner sees it: its processes and the limits it enforces."""

    job_id: str
    attempt: int
    cluster: str
    mode: str
    nodes: int
    procs_per_node: int
    tag: str
    processes: tuple[ProcessLaunch, ...]
    time_limit: float | None = None  # seconds from the first process start
    memory_bytes: int | None = None  # per node
    kill_grace: float = 5.0  # seconds between SIGTERM and SIGKILL
    memory_mode: str = "auto"  # "auto" (cgroup, else watchdog), "cgroup", "watchdog"
    #: the processes' base; None in a launch written before dispatch captured it, whose
    #: processes start from the runner's environment
    environment: Mapping[str, str] | None = None
    secret_names: tuple[str, ...] = ()  # their values are in the runner's environment
    extra: Mapping[str, Any] = field(default_factory=dict)

    def process_env(self, process: ProcessLaunch, runner_env: Mapping[str, str]) -> dict[str, str]:
        """The whole environment of ``process``, given the runner's own environment."""
        base = runner_env if self.environment is None else self.environment
        hidden = {name: runner_env[name] for name in self.secret_names if name in runner_env}
        return {**base, **hidden, **process.env}

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job_id,
            "attempt": self.attempt,
            "cluster": self.cluster,
            "mode": self.mode,
            "nodes": self.nodes,
            "procsPerNode": self.procs_per_node,
            "tag": self.tag,
            "timeLimit": self.time_limit,
            "memoryBytes": self.memory_bytes,
            "killGrace": self.kill_grace,
            "memoryMode": self.memory_mode,
            "environment": None if self.environment is None else dict(self.environment),
            "secretEnv": list(self.secret_names),
            "processes": [p.to_json() for p in self.processes],
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> AttemptLaunch:
        return cls(
            job_id=str(raw["job"]),
            attempt=int(raw["attempt"]),
            cluster=str(raw["cluster"]),
            mode=str(raw["mode"]),
            nodes=int(raw["nodes"]),
            procs_per_node=int(raw["procsPerNode"]),
            tag=str(raw["tag"]),
            processes=tuple(ProcessLaunch.from_json(p) for p in raw["processes"]),
            time_limit=raw.get("timeLimit"),
            memory_bytes=raw.get("memoryBytes"),
            kill_grace=float(raw.get("killGrace", 5.0)),
            memory_mode=str(raw.get("memoryMode", "auto")),
            environment=raw.get("environment"),
            secret_names=tuple(raw.get("secretEnv") or ()),
            extra=dict(raw.get("extra") or {}),
        )

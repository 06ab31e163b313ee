"""A submitted job and a started attempt, as dispatch and the adapters refer to them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.model.identity import ExecutionIdentity
from dispatch.model.outcome import Evidence, Outcome, State
from dispatch.model.spec import JobSpec


@dataclass(frozen=True, slots=True)
class Job:
    """A job dispatch accepted: its id (unique, stable), its spec, and when it was submitted.

    ``environment`` holds the variables captured from the submitting process at submit (the
    base and ``inheritEnv``, ``model.environ``); None for a job recorded before dispatch
    captured them, whose ranks get the base of the process that starts the attempt.
    """

    id: str
    spec: JobSpec
    created_at: float
    environment: Mapping[str, str] | None = None

    @property
    def cluster(self) -> str:
        return self.spec.cluster

    def identity(self, attempt: int, weakened: str | None = None) -> ExecutionIdentity:
        return ExecutionIdentity(
            job_id=self.id, attempt=attempt, cluster=self.spec.cluster, weakened=weakened
        )


@dataclass(frozen=True, slots=True)
class AttemptHandle:
    """How an adapter finds an attempt it started again: deterministic from (job, attempt).

    ``native`` is the scheduler's own name or id (a TrainJob name, a Slurm job id, a process
    group id); ``data`` holds whatever else the adapter needs, JSON-compatible.
    """

    job_id: str
    attempt: int
    cluster: str
    native: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "jobId": self.job_id,
            "attempt": self.attempt,
            "cluster": self.cluster,
            "native": self.native,
            "data": dict(self.data),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> AttemptHandle:
        return cls(
            job_id=str(raw["jobId"]),
            attempt=int(raw["attempt"]),
            cluster=str(raw["cluster"]),
            native=str(raw["native"]),
            data=dict(raw.get("data") or {}),
        )


@dataclass(frozen=True, slots=True)
class Observation:
    """What an adapter saw of one attempt: its current outcome and the new evidence behind it.

    ``outcome.state`` is the attempt's state now. ``evidence`` may repeat facts seen before;
    the records store de-duplicates them by key. ``gone`` is True when the scheduler has no
    trace of the attempt any more (deleted, purged, or never created).
    """

    handle: AttemptHandle
    outcome: Outcome
    evidence: tuple[Evidence, ...] = ()
    observed_at: float = 0.0
    gone: bool = False

    @property
    def state(self) -> State:
        return self.outcome.state

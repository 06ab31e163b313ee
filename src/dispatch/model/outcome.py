"""Coarse states, typed causes, evidence and outcomes: the vocabulary of the public contract."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class State(StrEnum):
    """Coarse state of a job or of one attempt."""

    PENDING = "pending"  # accepted by dispatch, not yet handed to the scheduler
    HELD = "held"  # handed over or accepted, but held until released
    QUEUED = "queued"  # handed over, waiting for quota or placement
    RUNNING = "running"  # at least one rank started
    SUCCEEDED = "succeeded"  # every rank exited 0
    FAILED = "failed"  # ended for a cause other than success or cancellation
    CANCELLED = "cancelled"  # ended because somebody asked

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED})


class Cause(StrEnum):
    """Why an attempt ended (or why it cannot proceed). Never set on success."""

    PREEMPTED = "preempted"  # the scheduler took the resources back (quota, priority, spot)
    NODE_LOST = "node_lost"  # a node disappeared or became unusable under a running rank
    OUT_OF_MEMORY = "out_of_memory"  # a rank was killed for exceeding its memory limit
    TIMEOUT = "timeout"  # the job's timeLimit passed
    NO_CAPACITY = "no_capacity"  # it cannot be placed: quota exceeded or waited past patience
    START_FAILURE = "start_failure"  # a rank could not start (image, command, working dir)
    APP_ERROR = "app_error"  # user code exited non-zero on its own
    CANCELLED = "cancelled"  # somebody asked dispatch to stop it
    UNPLANNED_RECOVERY = "unplanned_recovery"  # work re-ran inside an attempt behind our back
    UNKNOWN = "unknown"  # the evidence fits no other cause; the raw evidence is attached


@dataclass(frozen=True, slots=True)
class Evidence:
    """One observed fact, kept because schedulers delete what proves a cause.

    ``key`` identifies the fact for de-duplication within an attempt (the same fact seen twice
    is stored once). ``kind`` names what was observed (``process``, ``pod``, ``event``,
    ``node``, ``workload``, ``sacct`` …). ``data`` is the raw payload, JSON-compatible.
    """

    kind: str
    key: str
    observed_at: float
    summary: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": self.key,
            "observedAt": self.observed_at,
            "summary": self.summary,
            "data": dict(self.data),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Evidence:
        return cls(
            kind=str(raw["kind"]),
            key=str(raw["key"]),
            observed_at=float(raw["observedAt"]),
            summary=str(raw.get("summary", "")),
            data=dict(raw.get("data") or {}),
        )


@dataclass(frozen=True, slots=True)
class Failure:
    """The first failure of an attempt: which rank, where, how, and when."""

    rank: int | None = None
    node: int | None = None
    exit_code: int | None = None
    signal: int | None = None
    at: float | None = None
    where: str | None = None  # e.g. a pod name, a Slurm node, a process id
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "node": self.node,
            "exitCode": self.exit_code,
            "signal": self.signal,
            "at": self.at,
            "where": self.where,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Failure:
        return cls(
            rank=raw.get("rank"),
            node=raw.get("node"),
            exit_code=raw.get("exitCode"),
            signal=raw.get("signal"),
            at=raw.get("at"),
            where=raw.get("where"),
            message=str(raw.get("message", "")),
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """A state plus, when the attempt did not succeed, the typed cause and what proves it."""

    state: State
    cause: Cause | None = None
    summary: str = ""
    first_failure: Failure | None = None
    evidence: tuple[Evidence, ...] = ()

    def __post_init__(self) -> None:
        if self.state is State.SUCCEEDED and self.cause is not None:
            raise ValueError("a succeeded outcome has no cause")
        if self.state in (State.FAILED, State.CANCELLED) and self.cause is None:
            raise ValueError(f"a {self.state} outcome needs a cause")

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "cause": self.cause.value if self.cause else None,
            "summary": self.summary,
            "firstFailure": self.first_failure.to_json() if self.first_failure else None,
            "evidence": [e.to_json() for e in self.evidence],
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Outcome:
        first = raw.get("firstFailure")
        return cls(
            state=State(raw["state"]),
            cause=Cause(raw["cause"]) if raw.get("cause") else None,
            summary=str(raw.get("summary", "")),
            first_failure=Failure.from_json(first) if first else None,
            evidence=tuple(Evidence.from_json(e) for e in raw.get("evidence") or ()),
        )

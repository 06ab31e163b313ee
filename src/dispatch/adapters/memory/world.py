"""The memory scheduler's ground truth: executions whose state is computed from the clock.

No background task moves anything: every state is a function of the execution's facts
(created, held, cancelled) and the time asked about. Tests and the simulator read the ground
truth here (``executions``, ``live``, ``creations``) to check what really ran.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from dispatch.adapters.memory.scenario import SCENARIO_ENV, Result, Scenario, Script, parse_scenario
from dispatch.clock import Clock
from dispatch.model import Cause, Evidence, Failure, Outcome, State

#: per-node resource the memory cluster has unless configured otherwise
INF = math.inf


class Shape(StrEnum):
    SLURM = "slurm"  # a queue; hold and release; accounting kept forever; numeric job ids
    KUBERNETES = "kubernetes"  # named objects that vanish after a while; suspension


class Fault(StrEnum):
    """A fault injected into the next call of one operation."""

    UNAVAILABLE = "unavailable"  # SchedulerUnavailable, nothing happened
    UNKNOWN_BEFORE = "unknown-before"  # OutcomeUnknown, nothing happened
    UNKNOWN_AFTER = "unknown-after"  # OutcomeUnknown, but the operation took effect
    CRASH = "crash"  # SimulatedCrash (the caller's process dies) before the operation
    CRASH_AFTER = "crash-after"  # SimulatedCrash after the operation took effect


class SimulatedCrash(BaseException):
    """The calling process 'dies' here. A BaseException so that no error handler catches it."""


@dataclass(frozen=True, slots=True)
class Status:
    """An execution's state at one moment, and the evidence visible then."""

    state: State
    cause: Cause | None
    summary: str
    failure: Failure | None
    ended_at: float | None
    runs: int  # how many times the ranks were started (2 after a rerun)
    evidence: tuple[Evidence, ...]

    @property
    def live(self) -> bool:
        return self.runs > 0 and self.ended_at is None

    def outcome(self) -> Outcome:
        return Outcome(
            state=self.state,
            cause=self.cause,
            summary=self.summary,
            first_failure=self.failure,
            evidence=self.evidence,
        )


_ENDINGS: dict[Result, tuple[State, Cause | None, str]] = {
    Result.SUCCEEDED: (State.SUCCEEDED, None, "every rank exited 0"),
    Result.APP_ERROR: (State.FAILED, Cause.APP_ERROR, "rank {rank} exited {exit}"),
    Result.OUT_OF_MEMORY: (State.FAILED, Cause.OUT_OF_MEMORY, "rank {rank} was OOM-killed"),
    Result.NODE_LOST: (State.FAILED, Cause.NODE_LOST, "node {node} was lost"),
    Result.PREEMPTED: (State.FAILED, Cause.PREEMPTED, "the scheduler preempted the job"),
    Result.TIMEOUT: (State.FAILED, Cause.TIMEOUT, "killed at its time limit"),
}


@dataclass
class Execution:
    """One attempt as the scheduler holds it. Mutable facts; state derived by ``status``."""

    name: str
    native: str
    job_id: str
    attempt: int
    shape: Shape
    script: Script
    created_at: float
    world_size: int
    time_limit: float | None = None
    held_since: float | None = None
    held_total: float = 0.0
    cancelled_at: float | None = None
    cancelled_by: str = ""

    @property
    def start_at(self) -> float:
        if self.held_since is not None:
            return INF
        return self.created_at + self.script.queue + self.held_total

    def _ending(self) -> tuple[float, State, Cause | None, str, Failure | None]:
        """When and how it ends if nobody cancels it (INF: it does not end by itself)."""
        s, start = self.script, self.start_at
        if s.result is Result.NO_CAPACITY:
            at = self.created_at + s.after + self.held_total
            if self.held_since is not None:
                at = INF
            return at, State.FAILED, Cause.NO_CAPACITY, "no placement within its patience", None
        if s.result is Result.START_FAILURE:
            refused = Failure(rank=0, exit_code=127, at=start, message="cannot start the command")
            return start, State.FAILED, Cause.START_FAILURE, "rank 0 could not start", refused
        end = start + s.after
        if s.result in (Result.HANG,) or (s.result is Result.PREEMPTED and s.rerun is not None):
            end = INF
        if s.result is Result.TIMEOUT:
            end = start + (self.time_limit if self.time_limit is not None else s.after)
        limit = start + self.time_limit if self.time_limit is not None else INF
        if limit < end or s.result is Result.TIMEOUT:
            state, cause, text = _ENDINGS[Result.TIMEOUT]
            return min(limit, end), state, cause, text, Failure(at=min(limit, end), message=text)
        state, cause, text = _ENDINGS.get(s.result, _ENDINGS[Result.SUCCEEDED])
        text = text.format(rank=s.rank, exit=s.exit_code, node=s.node)
        failure: Failure | None = None
        if cause is not None:
            failure = Failure(
                rank=s.rank if cause in (Cause.APP_ERROR, Cause.OUT_OF_MEMORY) else None,
                node=s.node,
                exit_code=s.exit_code
                if cause is Cause.APP_ERROR
                else (137 if cause is Cause.OUT_OF_MEMORY else None),
                signal=9 if cause is Cause.OUT_OF_MEMORY else None,
                at=end,
                message=text,
            )
        return end, state, cause, text, failure

    def status(self, now: float, *, evidence_ttl: float = INF) -> Status:
        end, state, cause, summary, failure = self._ending()
        if self.cancelled_at is not None and self.cancelled_at < end:
            end, state, cause, failure = self.cancelled_at, State.CANCELLED, Cause.CANCELLED, None
            summary = f"cancelled by {self.cancelled_by}"
        start, s = self.start_at, self.script
        started = start <= now and start <= end and s.result is not Result.NO_CAPACITY
        suspend = start + s.after if s.rerun is not None else INF
        rerun_at = suspend + (s.rerun or 0.0)
        runs = (1 if started and s.result is not Result.START_FAILURE else 0) + (
            1 if rerun_at <= now and rerun_at < end else 0
        )
        pod = "pod" if self.shape is Shape.KUBERNETES else "step"
        facts = [self._fact("submitted", "job", self.created_at, f"{self.name} submitted")]
        if started:
            facts.append(self._fact("started", pod, start, f"{self.world_size} ranks started"))
        if suspend <= now and suspend < end:
            facts.append(self._fact("suspended", "event", suspend, "evicted: preempted"))
        if runs > 1:
            facts.append(self._fact("rerun", pod, rerun_at, "ranks started again, same attempt"))
        if end <= now:
            data = failure.to_json() if failure else {}
            facts.append(self._fact("ended", pod, end, summary, data))
            if end + evidence_ttl <= now:  # the scheduler removed the pods and their events
                facts = [f for f in facts if f.kind not in ("pod", "event")]
            return Status(state, cause, summary, failure, end, runs, tuple(facts))
        if self.held_since is not None:
            return Status(State.HELD, None, "held", None, None, 0, tuple(facts))
        if runs > 1:
            text = "ranks re-ran inside the same attempt after a requeue/readmission"
            return Status(
                State.RUNNING, Cause.UNPLANNED_RECOVERY, text, None, None, 2, tuple(facts)
            )
        if not started or suspend <= now:
            text = "suspended after preemption" if suspend <= now else "waiting for placement"
            return Status(State.QUEUED, None, text, None, None, runs, tuple(facts))
        return Status(State.RUNNING, None, "ranks running", None, None, runs, tuple(facts))

    def _fact(
        self, key: str, kind: str, at: float, summary: str, data: Mapping[str, object] | None = None
    ) -> Evidence:
        return Evidence(
            kind=kind,
            key=f"{self.name}/{key}",
            observed_at=at,
            summary=summary,
            data=dict(data or {}),
        )


@dataclass
class MemoryScheduler:
    """The world several memory adapters can share: one scheduler, its executions, its faults.

    ``scenarios`` maps a job name to its scenario (used when the spec's env has none).
    Names are never reused: a name once submitted is adopted forever, even after its object
    vanished (``start`` is idempotent across the whole history).
    """

    clock: Clock
    scenarios: Mapping[str, str] = field(default_factory=dict)
    executions: dict[str, Execution] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    creations: Counter[tuple[str, int]] = field(default_factory=Counter)
    _faults: dict[str, deque[Fault]] = field(default_factory=dict)
    _next_id: int = 1000

    def scenario_for(self, job_name: str, env: Mapping[str, str], default: str) -> Scenario:
        return parse_scenario(env.get(SCENARIO_ENV) or self.scenarios.get(job_name) or default)

    def inject(self, operation: str, *faults: Fault) -> None:
        """Make the next calls of ``operation`` (start, observe, cancel, ...) fail like this."""
        self._faults.setdefault(operation, deque()).extend(faults)

    def take_fault(self, operation: str) -> Fault | None:
        queue = self._faults.get(operation)
        return queue.popleft() if queue else None

    def submit(self, execution: Execution) -> Execution:
        """Create ``execution`` unless one with its name exists; return the one that stands."""
        existing = self.executions.get(execution.name)
        if existing is not None:
            return existing
        if execution.shape is Shape.SLURM:
            self._next_id += 1
            execution.native = str(self._next_id)
        self.executions[execution.name] = execution
        self.creations[(execution.job_id, execution.attempt)] += 1
        return execution

    def by_native(self, native: str) -> Execution | None:
        return next((e for e in self.executions.values() if e.native == native), None)

    def live(self, job_id: str, attempt: int | None = None) -> list[Execution]:
        """Ground truth: executions of this job (and attempt) whose ranks are running now."""
        now = self.clock.now()
        return [
            e
            for e in self.executions.values()
            if e.job_id == job_id
            and (attempt is None or e.attempt == attempt)
            and e.status(now).live
        ]

"""The invariants the simulator checks after every step, against the store and the ground truth.

Ground truth is the ``MemoryScheduler`` (what really exists and runs); the store is what the
supervisors recorded. ``Checker.after_step`` is incremental (it looks again only at what can
have changed), so checking every step stays cheap. ``budget_problems`` is pure.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from dispatch.adapters.memory import Execution, MemoryScheduler
from dispatch.clock import Clock
from dispatch.model import Action, Cause, State
from dispatch.records import LogKind
from dispatch.sim.driver import Call
from dispatch.sim.store import SimStore
from dispatch.supervise import History, fold, load_history

INF = math.inf

#: every invariant the simulator checks, by the name a violation carries
INVARIANTS = {
    "exclusive": "never two live executions of one (job, attempt), nor two attempts of one "
    "job at once; no (job, attempt) is ever created twice",
    "planned": "every execution is an attempt claimed in the store before it ran, and every "
    "attempt after the first is one the recovery policy allows",
    "intent": "start and cancel are called only while an open intent for them is in the store",
    "caused": "a failed or cancelled job has a cause, a succeeded one has none; cancelled "
    "means someone asked; succeeded means an execution really succeeded",
    "final": "a terminal job status never changes",
    "lost": "every submitted job stays in the store; a terminal job leaves nothing running",
    "settled": "once faults stop, every job is terminal or held (waiting for a release) and "
    "no intent is open within the quiet steps allowed",
    "error": "a supervisor raised an error it should have handled",
}


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: which, what exactly, and at which step."""

    invariant: str
    message: str
    step: int = 0

    def to_json(self) -> dict[str, object]:
        return {"invariant": self.invariant, "message": self.message, "step": self.step}


def budget_problems(history: History) -> list[str]:
    """Why the attempts recorded for a job are not all ones its policy chose (pure).

    Each attempt that has a successor must have ended (terminal, with a cause that is not
    ``cancelled``); per retry rule, the successors stay within its limit; causes under
    ``fail`` are never followed; ``hold`` is followed at most once per release, and a hold
    at submission counts as one: attempt 1 of a job submitted held needs a release.
    """
    policy = history.job.job.spec.recovery
    attempts = sorted(history.attempts, key=lambda a: a.attempt)
    problems: list[str] = []
    used: Counter[int] = Counter()
    held_at_submission = any(
        e.kind == LogKind.HOLD_REQUESTED and e.data.get("attempt") == 0 for e in history.log
    )
    holds = 1 if attempts and held_at_submission else 0
    for record in attempts[:-1]:
        where = f"attempt {record.attempt + 1} followed attempt {record.attempt}"
        outcome = record.outcome
        if outcome is None or not outcome.is_terminal:
            problems.append(f"{where}, which was not known to have ended")
            continue
        if outcome.state is State.SUCCEEDED or outcome.cause is Cause.CANCELLED:
            problems.append(f"{where}, which ended {outcome.state.value}")
            continue
        cause = outcome.cause or Cause.UNKNOWN
        rule = policy.rule_for(cause)
        action = rule.action if rule is not None else policy.unmatched
        if action is Action.FAIL:
            problems.append(f"{where}, which ended {cause.value}: the policy says fail")
        elif action is Action.HOLD:
            holds += 1
        elif rule is not None:
            used[policy.rules.index(rule)] += 1
    for index, count in used.items():
        limit = policy.rules[index].limit or 0
        if count > limit:
            problems.append(f"rule {index + 1} allows {limit} retries; {count} were started")
    if holds > history.job.release_count:
        problems.append(
            f"{holds} attempts followed a hold (at submission or by the policy); "
            f"{history.job.release_count} releases"
        )
    return problems


class Checker:
    """Checks the invariants after each step; remembers what it needs between steps."""

    def __init__(self, store: SimStore, scheduler: MemoryScheduler, clock: Clock) -> None:
        self.store = store
        self.scheduler = scheduler
        self.clock = clock
        self.submitted: list[str] = []
        self.truth_changed = True  # set when a start or cancel took effect, or time moved
        self._known_executions = 0
        self._active: dict[str, Execution] = {}
        self._ends: dict[str, float] = {}
        self._terminal: dict[str, tuple[State, Cause | None]] = {}
        self._now = clock.now()

    # --- at a call ------------------------------------------------------------------------

    def on_call(self, call: Call) -> Violation | None:
        """``start`` and ``cancel`` need an open intent for them when they are called."""
        if call.op not in ("start", "cancel"):
            return None
        for intent in self.store.open_intents(call.job_id):
            if intent.operation == call.op and intent.attempt == call.attempt:
                return None
        return Violation(
            "intent",
            f"{call.owner} called {call.op} for {call.job_id} attempt {call.attempt} "
            "with no open intent for it in the store",
        )

    # --- after a step ---------------------------------------------------------------------

    def after_step(self) -> Violation | None:
        return self._new_executions() or self._running() or self._jobs()

    def _new_executions(self) -> Violation | None:
        executions = self.scheduler.executions
        if len(executions) == self._known_executions:
            return None
        fresh = list(executions.values())[self._known_executions :]
        self._known_executions = len(executions)
        self.truth_changed = True
        for execution in fresh:
            job_id, attempt = execution.job_id, execution.attempt
            self._active[execution.name] = execution
            if self.scheduler.creations[(job_id, attempt)] > 1:
                return Violation("exclusive", f"{job_id} attempt {attempt} was created twice")
            history = load_history(self.store, job_id)
            if attempt not in {a.attempt for a in history.attempts}:
                return Violation(
                    "planned",
                    f"{execution.name} ({job_id} attempt {attempt}) exists on the scheduler "
                    "but the attempt was never claimed in the store",
                )
            problems = budget_problems(history)
            if problems:
                return Violation("planned", f"{job_id}: " + "; ".join(problems))
        return None

    def _running(self) -> Violation | None:
        """Attempts that have not ended, per job. When an execution ends depends only on its
        facts (created, held, cancelled): it is recomputed after a start or a cancel, and
        otherwise compared with the clock."""
        now = self.clock.now()
        if now == self._now and not self.truth_changed:
            return None
        if self.truth_changed:
            for name, execution in self._active.items():
                self._ends[name] = execution.status(INF).ended_at or INF
        self._now, self.truth_changed = now, False
        per_job: Counter[str] = Counter()
        for name, execution in list(self._active.items()):
            if self._ends[name] <= now:
                del self._active[name]
            else:
                per_job[execution.job_id] += 1
        for job_id, count in per_job.items():
            if count > 1:
                names = sorted(e.name for e in self._active.values() if e.job_id == job_id)
                return Violation("exclusive", f"{job_id} has {count} attempts at once: {names}")
        return None

    def _jobs(self) -> Violation | None:
        for job_id in sorted(self.store.take_touched()):
            record = self.store.get_job(job_id)
            state, cause = record.state, record.cause
            seen = self._terminal.get(job_id)
            if seen is not None:
                if seen != (state, cause):
                    return Violation(
                        "final",
                        f"{job_id} was {seen[0].value}/{seen[1]} and is now {state.value}/{cause}",
                    )
                continue
            if not state.is_terminal:
                continue
            self._terminal[job_id] = (state, cause)
            problem = self._terminal_problem(job_id, state, cause, record.cancel is not None)
            if problem is not None:
                return problem
        return None

    def _terminal_problem(
        self, job_id: str, state: State, cause: Cause | None, asked: bool
    ) -> Violation | None:
        if state is State.SUCCEEDED and cause is not None:
            return Violation("caused", f"{job_id} succeeded with a cause ({cause.value})")
        if state is not State.SUCCEEDED and cause is None:
            return Violation("caused", f"{job_id} ended {state.value} without a cause")
        if state is State.CANCELLED and not asked:
            return Violation("caused", f"{job_id} ended cancelled but nobody asked to cancel it")
        now = self.clock.now()
        mine = [e for e in self.scheduler.executions.values() if e.job_id == job_id]
        running = [e.name for e in mine if e.status(now).ended_at is None]
        if running:
            return Violation("lost", f"{job_id} is {state.value} but {running} did not end")
        if state is State.SUCCEEDED and not any(
            e.status(now).state is State.SUCCEEDED for e in mine
        ):
            return Violation("caused", f"{job_id} succeeded but no execution of it did")
        return None

    # --- once faults stopped ----------------------------------------------------------------

    def missing(self) -> list[str]:
        """Submitted jobs the store does not have (it never deletes one: always empty)."""
        stored = {r.id for r in self.store.list_jobs()}
        return [job_id for job_id in self.submitted if job_id not in stored]

    def unsettled(self) -> list[str]:
        """Jobs (and open intents) that keep the world from being at rest; empty when settled."""
        left = [f"intent #{i.id} {i.operation} {i.job_id}" for i in self.store.open_intents()]
        for record in self.store.list_jobs(open_only=True):
            if record.state is State.HELD and fold(load_history(self.store, record.id)).held:
                continue
            left.append(f"{record.id} {record.state.value}")
        return left

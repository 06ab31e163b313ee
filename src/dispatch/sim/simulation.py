"""One seeded simulation: the real supervisors, store and memory scheduler, a virtual clock,
and a seed that chooses every interleaving and every fault.

A run has two phases. During the first ``steps`` steps (faults on), each step is one event
drawn from the seed: a parked supervisor proceeds with its call (which may fail as the seed
says), virtual time passes, a supervisor crashes or a crashed one restarts (same owner or a
new one; the store and the scheduler persist), or a user submits a job (now and then held:
``submit --hold``), cancels one or releases a held one.
Then faults stop: no crash, no fault, no user; supervisors and time proceed until every job
settles, which must happen within ``quiet_steps`` steps. The invariants (``invariants.py``)
are checked after every step; the run stops at the first violation.

The same seed and config always replay the same run, step for step.
"""

from __future__ import annotations

import random
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.memory import Fault, MemoryAdapter, MemoryScheduler, SimulatedCrash
from dispatch.clock import ManualClock
from dispatch.config import ClusterConfig
from dispatch.sim.broken import records_class
from dispatch.sim.driver import PAUSE, Actor, Call, park
from dispatch.sim.gate import DUPLICATE, STALE, GatedAdapter
from dispatch.sim.invariants import Checker, Violation
from dispatch.sim.jobs import CLUSTER, job_spec
from dispatch.sim.store import SimStore, postgres_store
from dispatch.supervise import Supervisor

SHAPES = ("slurm", "kubernetes")
START_TIME = 1_000_000.0
LEASE_TTL = 30.0
#: chance that a resumed adapter call fails (then which way, uniformly)
FAULT_RATE = 0.08
#: chance that an observation is delivered stale or duplicated
DISTORT_RATE = 0.08
_FAULTS = tuple(Fault)
#: steps allowed, once faults stop, for every job to settle
QUIET_STEPS = 1000
#: virtual seconds a supervisor pauses between two passes (drawn per supervisor process)
POLL_INTERVALS = (0.5, 1.0, 2.0, 5.0)
#: chance that a user submits a job held (``dispatch submit --hold``)
HELD_SUBMIT_RATE = 0.2
#: who the simulated user is in holds and cancels
SIM_USER = "sim-user"


@dataclass(frozen=True, slots=True)
class SimConfig:
    """What a batch of runs varies over; each seed picks its shape and supervisor count."""

    steps: int = 300
    shapes: tuple[str, ...] = SHAPES
    supervisors: tuple[int, int] = (1, 3)
    quiet_steps: int = QUIET_STEPS
    faults: bool = True
    broken: str | None = None
    #: a PostgreSQL server (the URL of any database there): each seed's records are a new
    #: database on it instead of SQLite in memory
    records: str | None = None
    initial_jobs: tuple[int, int] = (2, 5)
    max_jobs: int = 12

    def describe(self) -> dict[str, Any]:
        lo, hi = self.supervisors
        return {
            "steps": self.steps,
            "shape": "both" if len(self.shapes) > 1 else self.shapes[0],
            "supervisors": f"{lo}-{hi}" if lo != hi else str(lo),
            "quietSteps": self.quiet_steps,
            "faults": self.faults,
            "broken": self.broken,
            "records": "postgresql" if self.records else "sqlite",
        }


@dataclass
class SimResult:
    """What one run did, and the violation that stopped it, if any."""

    seed: int
    shape: str
    supervisors: int
    steps: int = 0
    quiet_steps: int = 0
    virtual_seconds: float = 0.0
    violation: Violation | None = None
    jobs: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return self.violation is None

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "shape": self.shape,
            "supervisors": self.supervisors,
            "steps": self.steps,
            "quietSteps": self.quiet_steps,
            "virtualSeconds": round(self.virtual_seconds, 1),
            "violation": self.violation.to_json() if self.violation else None,
            "jobs": dict(self.jobs),
            "events": dict(self.events),
        }


class Simulation:
    """One run: ``Simulation(seed, config).run()``; ``trace`` lists every step taken."""

    def __init__(self, seed: int, config: SimConfig | None = None) -> None:
        self.seed = seed
        self.config = config = config or SimConfig()
        self.rng = rng = random.Random(seed)
        shape = rng.choice(config.shapes)
        count = rng.randint(*config.supervisors)
        self.result = SimResult(seed, shape, count)
        self.clock = ManualClock(start=START_TIME)
        self.store: SimStore
        if config.records is not None:
            if config.broken is not None:
                raise ValueError("the broken modes run on the in-memory SQLite store only")
            self.store = postgres_store(config.records, self.clock)
        else:
            self.store = records_class(config.broken)(self.clock)
        self.scheduler = MemoryScheduler(clock=self.clock)
        settings: dict[str, Any] = {"shape": shape}
        if shape == "kubernetes":  # evidence and objects vanish, sometimes soon
            settings["evidenceTTL"] = rng.choice((5, 30, 120))
            settings["vanishAfter"] = rng.choice((15, 60, 600))
        self.cluster = ClusterConfig(CLUSTER, "memory", settings)
        self.checker = Checker(self.store, self.scheduler, self.clock)
        self._steps: list[tuple[float, str]] = []  # (virtual time, what happened) per step
        self.step = 0
        self.faulty = config.faults
        self._generation = [0] * count
        self.actors: list[Actor] = [self._boot(i, f"s{i + 1}") for i in range(count)]
        for _ in range(rng.randint(*config.initial_jobs)):
            self._submit()

    @property
    def trace(self) -> list[str]:
        """One line per step so far: its number, the virtual time, and what happened."""
        return [
            f"{n:5d} t={at - START_TIME:8.1f} {text}" for n, (at, text) in enumerate(self._steps, 1)
        ]

    # --- the world ------------------------------------------------------------------------

    def _boot(self, slot: int, owner: str) -> Actor:
        inner = MemoryAdapter(
            self.cluster, AdapterContext(Path("."), self.clock), scheduler=self.scheduler
        )
        gate = GatedAdapter(inner, owner, self.rng, self._on_call)
        supervisor = Supervisor(  # one tick at a time: the driver interleaves the processes
            self.store,
            lambda _cluster: gate,
            self.clock,
            owner,
            lease_ttl=LEASE_TTL,
            ticks_at_once=1,
        )
        poll = self.rng.choice(POLL_INTERVALS)
        return Actor(owner, lambda: self._process(supervisor, poll))

    @staticmethod
    async def _process(supervisor: Supervisor, poll: float) -> None:
        """A supervisor process: a pass, then a pause of ``poll`` virtual seconds, forever."""
        while True:
            await supervisor.step()
            until = supervisor.clock.now() + poll
            await park(Call(PAUSE, supervisor.owner, until=until))

    def _on_call(self, call: Call) -> None:
        violation = self.checker.on_call(call)
        if violation is not None and self.result.violation is None:
            self.result.violation = Violation(violation.invariant, violation.message, self.step + 1)

    def _submit(self) -> str:
        index = len(self.checker.submitted) + 1
        spec = job_spec(self.rng, index)
        held = self.rng.random() < HELD_SUBMIT_RATE
        job = self.store.create_job(spec, held_by=SIM_USER if held else None)
        self.checker.submitted.append(job.id)
        how = " held" if held else ""
        return f"user submits {job.id}{how} ({job.spec.env['MEMORY_SCENARIO']})"

    # --- events ---------------------------------------------------------------------------

    def _resume(self, actor: Actor) -> str:
        call, rng = actor.parked, self.rng
        if call is not None and call.op != PAUSE and self.faulty:
            if rng.random() < FAULT_RATE:
                call.fault = rng.choice(_FAULTS).value
                self.result.events["fault"] += 1
            elif call.op == "observe" and rng.random() < DISTORT_RATE:
                call.distort = rng.choice((STALE, DUPLICATE))
                self.result.events[call.distort] += 1
        if call is not None and call.op in ("start", "cancel"):
            self.checker.truth_changed = True
        text = f"{actor.name} proceeds: {call.describe() if call else 'boots'}"
        try:
            actor.resume()
        except SimulatedCrash as crash:
            self.result.events["crash"] += 1
            return f"{text} -> dies ({crash})"
        except Exception as exc:  # a bug in the supervisor: report it, do not hide it
            where = "".join(traceback.format_exception(exc, limit=-3)).strip()
            self.result.violation = Violation("error", f"{actor.name}: {where}", self.step)
            return f"{text} -> raised {type(exc).__name__}"
        return text

    def _advance(self, seconds: float) -> str:
        self.clock.advance(seconds)
        return f"time +{seconds:.1f}s"

    def _crash(self, slot: int) -> str:
        actor = self.actors[slot]
        at = actor.parked.describe() if actor.parked else "boot"
        actor.kill()
        self.result.events["kill"] += 1
        return f"{actor.name} crashes (parked at {at})"

    def _restart(self, slot: int) -> str:
        old = self.actors[slot].name
        if self.rng.random() < 0.5:
            owner = old
        else:
            self._generation[slot] += 1
            owner = f"s{slot + 1}.{self._generation[slot]}"
        self.actors[slot] = self._boot(slot, owner)
        return f"{owner} starts (after {old})"

    def _user(self) -> str:
        roll = self.rng.random()
        open_jobs = sorted(self.store.list_jobs(open_only=True), key=lambda r: r.id)
        if (roll < 0.5 or not open_jobs) and len(self.checker.submitted) < self.config.max_jobs:
            return self._submit()
        held = [r for r in open_jobs if r.state.value == "held"]
        if roll < 0.75 and held:
            record = self.rng.choice(held)
            return f"user releases {record.id} (release {self.store.request_release(record.id)})"
        if 0.75 <= roll < 0.9 and open_jobs:
            record = self.rng.choice(open_jobs)
            self.store.request_cancel(record.id, SIM_USER, "changed my mind")
            return f"user cancels {record.id}"
        return "user looks and does nothing"

    def _ready(self) -> list[Actor]:
        now = self.clock.now()
        return [a for a in self.actors if a.alive and (a.parked is None or a.parked.ready(now))]

    def _fault_phase_event(self) -> str:
        rng, alive, ready = self.rng, [a for a in self.actors if a.alive], self._ready()
        dead = [i for i, a in enumerate(self.actors) if not a.alive]
        roll = rng.random()
        if roll < 0.60 and ready:
            return self._resume(rng.choice(ready))
        if roll < 0.80:
            return self._advance(self._duration())
        if roll < 0.86 and dead:
            return self._restart(rng.choice(dead))
        if roll < 0.875 and alive and self.faulty:
            return self._crash(self.actors.index(rng.choice(alive)))
        if roll < 0.94:
            return self._user()
        if dead:
            return self._restart(rng.choice(dead))
        return self._advance(self._duration())

    def _duration(self) -> float:
        roll = self.rng.random()
        if roll < 0.7:
            return self.rng.uniform(0.1, 3.0)
        if roll < 0.95:
            return self.rng.uniform(3.0, 20.0)
        return self.rng.uniform(20.0, 120.0)  # leases expire, backoffs pass, objects vanish

    def _quiet_event(self) -> str:
        ready = self._ready()
        if ready and self.rng.random() < 0.8:
            return self._resume(self.rng.choice(ready))
        return self._advance(self.rng.uniform(1.0, 20.0))

    # --- running --------------------------------------------------------------------------

    def _record(self, text: str) -> None:
        self.step += 1
        self._steps.append((self.clock.now(), text))
        if self.result.violation is None:
            violation = self.checker.after_step()
            if violation is not None:
                self.result.violation = Violation(violation.invariant, violation.message, self.step)

    def run(self, stop_at: int | None = None) -> SimResult:
        """Run (or continue) to the end, to the first violation, or to step ``stop_at``."""
        result, config = self.result, self.config
        while self.step < config.steps and result.violation is None:
            if stop_at is not None and self.step >= stop_at:
                return self._finish()
            self._record(self._fault_phase_event())
        if self.faulty and result.violation is None:
            self.faulty = False
            for slot, actor in enumerate(self.actors):
                if not actor.alive:
                    self._record(self._restart(slot) + " (faults stop)")
        quiet = 0
        while result.violation is None:
            if stop_at is not None and self.step >= stop_at:
                return self._finish()
            if quiet % 8 == 0 and not self.checker.unsettled():
                break
            if quiet >= config.quiet_steps:
                left = ", ".join(self.checker.unsettled())
                result.violation = Violation(
                    "settled", f"not settled {quiet} steps after faults stopped: {left}", self.step
                )
                break
            self._record(self._quiet_event())
            quiet += 1
        result.quiet_steps = quiet
        missing = self.checker.missing()
        if missing and result.violation is None:
            result.violation = Violation("lost", f"not in the store: {missing}", self.step)
        return self._finish()

    def _finish(self) -> SimResult:
        result = self.result
        result.steps = self.step
        result.virtual_seconds = self.clock.now() - START_TIME
        result.jobs = Counter(r.state.value for r in self.store.list_jobs())
        return result

    def close(self) -> None:
        for actor in self.actors:
            actor.kill()
        self.store.close()


def simulate(seed: int, config: SimConfig | None = None) -> SimResult:
    """Run one seed to its end and release its resources."""
    simulation = Simulation(seed, config)
    try:
        return simulation.run()
    finally:
        simulation.close()

"""The deterministic simulator that tests the supervisor against the memory scheduler.

It runs the real ``fold``, ``next``, records store and ``Supervisor`` (several of them,
sharing one store and one ``MemoryScheduler``) with a virtual clock; a seed chooses every
interleaving, crash, fault, distorted observation and user action; the invariants
(``INVARIANTS``) are checked after every step. ``simulate(seed)`` runs one seed,
``run_batch`` many; ``Simulation`` can stop at a step and ``dump`` what it holds.
"""

from dispatch.sim.batch import BatchReport, run_batch
from dispatch.sim.broken import BROKEN_MODES
from dispatch.sim.dump import dump, replay_command
from dispatch.sim.invariants import INVARIANTS, Violation, budget_problems
from dispatch.sim.simulation import QUIET_STEPS, SHAPES, SimConfig, SimResult, Simulation, simulate

__all__ = [
    "BROKEN_MODES",
    "INVARIANTS",
    "QUIET_STEPS",
    "SHAPES",
    "BatchReport",
    "SimConfig",
    "SimResult",
    "Simulation",
    "Violation",
    "budget_problems",
    "dump",
    "replay_command",
    "run_batch",
    "simulate",
]

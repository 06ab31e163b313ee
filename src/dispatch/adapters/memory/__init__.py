"""An in-memory scheduler implementing the whole SPI, for tests and the simulator.

Two shapes (Slurm-like and Kubernetes-like); timed behaviour computed from the injected clock
inside calls; per-job scripted scenarios (``scenario.py``). Imports no other adapter.
"""

from dispatch.adapters.memory.adapter import MemoryAdapter
from dispatch.adapters.memory.scenario import (
    DEFAULT_SCENARIO,
    SCENARIO_ENV,
    Result,
    Scenario,
    Script,
    parse_scenario,
)
from dispatch.adapters.memory.world import (
    Execution,
    Fault,
    MemoryScheduler,
    Shape,
    SimulatedCrash,
    Status,
)

__all__ = [
    "DEFAULT_SCENARIO",
    "SCENARIO_ENV",
    "Execution",
    "Fault",
    "MemoryAdapter",
    "MemoryScheduler",
    "Result",
    "Scenario",
    "Script",
    "Shape",
    "SimulatedCrash",
    "Status",
    "parse_scenario",
]

"""Many seeds: run them (in this process or in worker processes), count, report failures.

Results do not depend on the number of workers: each seed is its own deterministic run, and
results are reported in seed order.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from dispatch.sim.simulation import SimConfig, SimResult, simulate

#: seeds per task handed to a worker process
CHUNK = 25


@dataclass
class BatchReport:
    """What a batch of seeds did: totals, throughput, and every failing run."""

    config: SimConfig
    seeds: int = 0
    steps: int = 0
    quiet_steps: int = 0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    workers: int = 1
    failures: list[SimResult] = field(default_factory=list)
    jobs: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    shapes: Counter[str] = field(default_factory=Counter)
    supervisors: Counter[int] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def steps_per_cpu_second(self) -> float:
        return self.steps / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    def add(self, results: Sequence[SimResult], cpu_seconds: float) -> None:
        self.cpu_seconds += cpu_seconds
        for result in results:
            self.seeds += 1
            self.steps += result.steps
            self.quiet_steps += result.quiet_steps
            self.jobs.update(result.jobs)
            self.events.update(result.events)
            self.shapes[result.shape] += 1
            self.supervisors[result.supervisors] += 1
            if not result.ok:
                self.failures.append(result)
        self.failures.sort(key=lambda r: r.seed)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "config": self.config.describe(),
            "seeds": self.seeds,
            "steps": self.steps,
            "quietSteps": self.quiet_steps,
            "wallSeconds": round(self.wall_seconds, 2),
            "cpuSeconds": round(self.cpu_seconds, 2),
            "workers": self.workers,
            "stepsPerSecond": round(self.steps_per_second),
            "stepsPerCpuSecond": round(self.steps_per_cpu_second),
            "violations": len(self.failures),
            "failures": [r.to_json() for r in self.failures],
            "jobs": dict(self.jobs),
            "events": dict(self.events),
            "shapes": dict(self.shapes),
            "supervisors": {str(k): v for k, v in sorted(self.supervisors.items())},
        }


def run_chunk(seeds: Sequence[int], config: SimConfig) -> tuple[list[SimResult], float]:
    """Run these seeds here; returns their results and the CPU seconds spent."""
    started = time.process_time()
    results = [simulate(seed, config) for seed in seeds]
    return results, time.process_time() - started


def run_batch(
    seeds: Sequence[int],
    config: SimConfig,
    *,
    workers: int = 1,
    progress: Callable[[BatchReport], None] | None = None,
) -> BatchReport:
    """Run every seed; ``progress`` is called after each chunk with the report so far."""
    report = BatchReport(config=config, workers=max(1, workers))
    started = time.perf_counter()
    chunks = [seeds[i : i + CHUNK] for i in range(0, len(seeds), CHUNK)]
    if workers <= 1:
        for chunk in chunks:
            report.add(*run_chunk(chunk, config))
            report.wall_seconds = time.perf_counter() - started
            if progress is not None:
                progress(report)
        return report
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_chunk, chunk, config) for chunk in chunks]
        for future in as_completed(futures):
            report.add(*future.result())
            report.wall_seconds = time.perf_counter() - started
            if progress is not None:
                progress(report)
    return report

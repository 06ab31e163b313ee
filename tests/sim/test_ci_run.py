"""The simulator's CI run: 2,000 seeds x 300 steps, both shapes, 1-3 supervisors, all faults
on, zero invariant violations.

It runs in two worker processes (the results do not depend on the number of workers).
``DISPATCH_SIM_SEEDS`` / ``DISPATCH_SIM_WORKERS`` change the size for a local run; CI keeps
the defaults. See bench/README.md for the throughput on the development machine.
"""

from __future__ import annotations

import os

import pytest

from dispatch.sim import SimConfig, run_batch

SEEDS = int(os.environ.get("DISPATCH_SIM_SEEDS", "2000"))
WORKERS = int(os.environ.get("DISPATCH_SIM_WORKERS", "2"))


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_two_thousand_seeds_keep_every_invariant() -> None:
    report = run_batch(range(SEEDS), SimConfig(steps=300), workers=WORKERS)
    failures = [
        f"seed {r.seed}: {r.violation} (replay: dispatch sim --seed {r.seed})"
        for r in report.failures
    ]
    assert report.ok, "\n".join(failures[:10])
    assert report.seeds == SEEDS
    assert report.steps >= SEEDS * 300
    if SEEDS >= 100:  # every kind of run happened, with faults
        assert set(report.shapes) == {"slurm", "kubernetes"}
        assert set(report.supervisors) == {1, 2, 3}
        for event in ("fault", "crash", "kill", "stale", "duplicate"):
            assert report.events[event] > SEEDS // 10, event
        assert {"succeeded", "failed", "cancelled", "held"} <= set(report.jobs)
    print(
        f"\nsim: {report.seeds} seeds, {report.steps} steps, {report.wall_seconds:.0f} s, "
        f"{report.steps_per_second:,.0f} steps/s ({report.workers} workers), "
        f"{report.steps_per_cpu_second:,.0f} steps per CPU second"
    )

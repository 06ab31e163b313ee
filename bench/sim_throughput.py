"""Simulator throughput: steps per second of `dispatch sim` on this machine.

    python bench/sim_throughput.py [--seeds 200] [--steps 300] [--workers 1]

Prints wall-clock steps/s, steps per CPU second (what one core does, whatever else runs on
the machine) and the load average, so that figures taken on a busy machine can be told apart.
"""

from __future__ import annotations

import argparse
import os
import platform
from typing import Any

from dispatch.sim import SimConfig, run_batch


def measure(seeds: int, steps: int, workers: int = 1) -> dict[str, Any]:
    """Run ``seeds`` simulations of ``steps`` steps; the figures as a dict."""
    load_before = os.getloadavg()[0]
    report = run_batch(range(seeds), SimConfig(steps=steps), workers=workers)
    return {
        "seeds": report.seeds,
        "stepsPerSeed": steps,
        "steps": report.steps,
        "quietSteps": report.quiet_steps,
        "workers": report.workers,
        "wallSeconds": round(report.wall_seconds, 2),
        "stepsPerSecond": round(report.steps_per_second),
        "stepsPerCpuSecond": round(report.steps_per_cpu_second),
        "violations": len(report.failures),
        "load": f"{load_before:.1f} before / {os.getloadavg()[0]:.1f} after",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    r = measure(args.seeds, args.steps, args.workers)
    print(
        f"{r['seeds']} seeds x {args.steps} steps ({r['steps']} steps in all, "
        f"{r['quietSteps']} after faults stopped), {r['workers']} worker(s): "
        f"{r['wallSeconds']:.1f} s, {r['stepsPerSecond']:,} steps/s, "
        f"{r['stepsPerCpuSecond']:,} steps per CPU second; violations {r['violations']}"
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {r['load']}"
    )


if __name__ == "__main__":
    main()

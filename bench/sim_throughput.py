"""Simulator throughput: steps per second of `dispatch sim` on this machine.

    python bench/sim_throughput.py [--seeds 200] [--steps 300] [--workers 1]

Prints wall-clock steps/s, steps per CPU second (what one core does, whatever else runs on
the machine) and the load average, so that figures taken on a busy machine can be told apart.
"""

from __future__ import annotations

import argparse
import os
import platform

from dispatch.sim import SimConfig, run_batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    report = run_batch(range(args.seeds), SimConfig(steps=args.steps), workers=args.workers)
    print(
        f"{report.seeds} seeds x {args.steps} steps ({report.steps} steps in all, "
        f"{report.quiet_steps} after faults stopped), {report.workers} worker(s): "
        f"{report.wall_seconds:.1f} s, {report.steps_per_second:,.0f} steps/s, "
        f"{report.steps_per_cpu_second:,.0f} steps per CPU second; "
        f"violations {len(report.failures)}"
    )
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {load_before:.1f} before / {os.getloadavg()[0]:.1f} after"
    )


if __name__ == "__main__":
    main()

"""Reliability: simulator seeds x steps with zero invariant violations, emulator runs with
injected API faults and supervisor kills (jobs lost or duplicated must be 0), and fuzzed
input with no crash: specs and runtimes as values (bench/fuzz.py), and job spec, config,
runtime and dump text through the real entry points (bench/fuzz_text.py)."""

from __future__ import annotations

from typing import Any

from bench import fuzz, fuzz_text, scale, sim_throughput
from dispatch.testing.k8s import FaultRule

#: (name, fault rules, supervisor kills): what the current Kubeflow adapter can be put through
FAULT_RUNS: tuple[tuple[str, tuple[FaultRule, ...], int], ...] = (
    ("5% of all requests answer 500", (FaultRule(status=500, probability=0.05),), 0),
    (
        "every TrainJob watch dropped after 3 events",
        (FaultRule(verb="watch", resource="trainjobs", drop_after_events=3),),
        0,
    ),
    ("supervisor SIGKILLed twice, restarted", (), 2),
    (
        "all three at once",
        (
            FaultRule(status=500, probability=0.05),
            FaultRule(verb="watch", resource="trainjobs", drop_after_events=3),
        ),
        2,
    ),
)


def faults(jobs: int, lifetime: float, time_scale: float, quick: bool) -> list[dict[str, Any]]:
    """Each fault run (only the combined one when ``quick``)."""
    rows = []
    for name, rules, kills in FAULT_RUNS[-1:] if quick else FAULT_RUNS:
        # fresh rules per run: a rule counts its own hits
        fresh = tuple(FaultRule(**{k: v for k, v in vars(r).items() if k != "hits"}) for r in rules)
        found = scale.run_dispatch(
            jobs, lifetime, time_scale, 120 + jobs + lifetime * 4, faults=fresh, kills=kills
        )
        rows.append(
            {
                "run": name,
                "jobs": jobs,
                "ended": found.get("ended"),
                "lost": found.get("lost"),
                "duplicated": found.get("duplicated"),
                "wrongState": found.get("wrongState"),
                "trainJobs": found.get("trainJobs"),
                "faultsInjected": sum(r.hits for r in fresh),
                "kills": kills,
                "killedAt": found.get("killedAt"),
                "error": found.get("error"),
            }
        )
    return rows


def run(
    sim_seeds: int,
    sim_steps: int,
    fault_jobs: int,
    lifetime: float,
    fuzz_examples: int,
    fuzz_text_cases: int,
    *,
    quick: bool = False,
) -> dict[str, Any]:
    fuzzed = fuzz.run(fuzz_examples)
    inputs = fuzz_text.run(fuzz_text_cases)
    # ``crashes`` counts both fuzzers (the figure CI checks); ``valueCrashes`` the first alone
    fuzzed["valueCrashes"] = fuzzed["crashes"]
    fuzzed["crashes"] += sum(kind["crashes"] for kind in inputs.values())
    fuzzed["crashSamples"] += [s for kind in inputs.values() for s in kind["crashSamples"]]
    fuzzed["inputs"] = inputs
    return {
        "sim": sim_throughput.measure(sim_seeds, sim_steps, workers=1),
        "faults": faults(fault_jobs, lifetime, 10.0, quick),
        "fuzz": fuzzed,
    }

"""Random jobs for the simulator: a scripted scenario per attempt and a recovery policy.

Everything is drawn from the simulation's seeded ``random.Random``. Scenarios always end by
themselves (a ``hang`` has a time limit), so that every job can settle once faults stop;
the last scripted entry (which every later attempt repeats) is usually a success.
"""

from __future__ import annotations

import random
from typing import Any

from dispatch.model import Cause, JobSpec, parse_spec

CLUSTER = "sim"
#: every cause an attempt can end with on the memory scheduler
CAUSES = (
    Cause.PREEMPTED,
    Cause.NODE_LOST,
    Cause.OUT_OF_MEMORY,
    Cause.TIMEOUT,
    Cause.NO_CAPACITY,
    Cause.START_FAILURE,
    Cause.APP_ERROR,
    Cause.UNPLANNED_RECOVERY,
    Cause.UNKNOWN,
)
_FAILURES = (
    "app_error@{t} exit=3 rank=1",
    "out_of_memory@{t} rank=0",
    "timeout@{t}",
    "preempted@{t}",
    "preempted@{t} rerun={r}",
    "node_lost@{t} node=1",
    "start_failure",
    "no_capacity@{t}",
    "hang",
)


def _entry(rng: random.Random, last: bool) -> str:
    if last and rng.random() < 0.8:
        text = "succeeded@{t}"
    else:
        text = rng.choice(("succeeded@{t}", *_FAILURES))
    text = text.format(t=rng.randint(3, 60), r=rng.randint(2, 20))
    if rng.random() < 0.3:
        text += f" queue={rng.randint(1, 20)}"
    return text


def scenario(rng: random.Random) -> str:
    """One to three attempts' scripts, e.g. ``preempted@30; succeeded@12 queue=4``."""
    count = rng.randint(1, 3)
    return "; ".join(_entry(rng, i == count - 1) for i in range(count))


def policy(rng: random.Random) -> dict[str, Any]:
    """A valid recovery policy: causes shuffled into up to four rules, each cause once."""
    causes = list(CAUSES)
    rng.shuffle(causes)
    rules: list[dict[str, Any]] = []
    while causes and len(rules) < 4:
        named = [causes.pop() for _ in range(min(len(causes), rng.randint(1, 3)))]
        action = rng.choice(("retry", "retry", "fail", "hold"))
        rule: dict[str, Any] = {"on": [c.value for c in named], "action": action}
        if action == "retry":
            rule["limit"] = rng.randint(0, 2)
            rule["backoff"] = {"initial": rng.choice((0, "1s", "5s", "20s")), "max": "40s"}
        rules.append(rule)
    return {"rules": rules, "unmatched": rng.choice(("fail", "fail", "hold"))}


def job_spec(rng: random.Random, index: int) -> JobSpec:
    """A job for the ``sim`` cluster. Now and then one asks for more nodes than exist, so that
    ``start`` refuses it (``start_failure``)."""
    nodes = 99 if rng.random() < 0.04 else rng.randint(1, 4)
    return parse_spec(
        {
            "name": f"job{index}",
            "cluster": CLUSTER,
            "nodes": nodes,
            "command": ["python", "train.py"],
            "image": "train:latest",
            "timeLimit": f"{rng.randint(30, 120)}s",
            "env": {"MEMORY_SCENARIO": scenario(rng)},
            "recovery": policy(rng),
        }
    )

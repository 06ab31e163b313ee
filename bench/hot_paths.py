"""Microseconds per call of two paths every object state a watch stream delivers goes through:
decoding it and writing it as evidence (``json`` against ``dispatch.jsontext``), and keeping it
beside the object's last state (``laststate.share``), or, for an object's first state, alone or
sharing with the stream's last state, another object's (``LastStates.like``; skipped where it
does not exist); planning one attempt of each example job (``plan_objects``: the objects a
start creates, built and checked), each call for a new job id; and judging one attempt
(``diagnose``, once per dump of ``tests/dumps``: what the supervisor does for each attempt with
new records, over the evidence already read).

    python -m bench.hot_paths [--repeat 300]

The objects are the TrainJobs of the golden plans (``tests/kubeflow/planning/golden``); a
"next state" of each changes its ``resourceVersion`` and its ``status``, as a watch event does.
Run it against another revision's code with ``PYTHONPATH=<that checkout>/src`` (``jsontext``
is skipped where it does not exist).
"""

from __future__ import annotations

import argparse
import copy
import functools
import itertools
import json
import timeit
from pathlib import Path
from typing import Any

from dispatch.adapters.kubeflow.live import laststate

GOLDEN = Path(__file__).parents[1] / "tests" / "kubeflow" / "planning" / "golden"
DUMPS = Path(__file__).parents[1] / "tests" / "dumps"


def objects() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(GOLDEN.glob("*.json"))]


def next_state(obj: dict[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new.setdefault("metadata", {})["resourceVersion"] = "12345"
    new["status"] = {"conditions": [{"type": "Running", "status": "True", "reason": "Started"}]}
    return new


def per_call(fn: Any, items: list[Any], repeat: int) -> float:
    """Microseconds per item, the best of three runs of ``repeat`` passes."""
    best = min(timeit.repeat(lambda: [fn(i) for i in items], number=repeat, repeat=3))
    return best / repeat / len(items) * 1e6


def _plan_one(ids: Any, spec: Any, runtime: Any, settings: Any, _: object) -> Any:
    from dispatch.adapters.kubeflow.planning.plan import plan_objects
    from dispatch.model import Job

    job = Job(id=f"{spec.name}-{next(ids):05d}", spec=spec, created_at=0.0)
    return plan_objects(job, 1, runtime, settings)


def plan_rows(repeat: int) -> dict[str, float]:
    """Microseconds per ``plan_objects`` of the example jobs that plan objects, one row with
    resources asked (``torch``: their quantities go through Trainer's models) and one without
    (``plain``); each call plans a job of a new id, as every start does."""
    from tests.kubeflow.helpers import JOBS, cluster_settings, example_runtimes

    from dispatch.model import load_spec

    rows: dict[str, float] = {}
    runtimes = example_runtimes()
    for stem in ("torch", "plain"):
        spec = load_spec(JOBS / f"{stem}.yaml")
        assert spec.runtime is not None
        runtime = runtimes[(spec.runtime.kind.value, spec.runtime.name)]
        settings = cluster_settings(spec.cluster)

        plan = functools.partial(_plan_one, itertools.count(), spec, runtime, settings)
        rows[f"plan_objects ({stem})"] = per_call(plan, [None], max(1, repeat // 3))
    return rows


def diagnose_rows(repeat: int) -> dict[str, float]:
    """Microseconds per diagnosis of each dump in tests/dumps (its evidence read once)."""
    from dispatch.adapters.kubeflow.causes.decide import diagnose
    from dispatch.adapters.kubeflow.causes.dump import parse_dump
    from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet

    dumps = sorted(DUMPS.glob("*.yaml"))
    sets = [EvidenceSet.from_objects(parse_dump(p.read_text())) for p in dumps]
    return {"diagnose (tests/dumps)": per_call(diagnose, sets, max(1, repeat // 10))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    objs = objects()
    texts = [json.dumps(o) for o in objs]
    pairs = [(next_state(o), laststate.compact(copy.deepcopy(o))) for o in objs]
    size = sum(map(len, texts)) // len(texts)
    rows = {
        "json.loads": per_call(json.loads, texts, args.repeat),
        "json.dumps (sorted, compact)": per_call(
            lambda o: json.dumps(o, separators=(",", ":"), sort_keys=True), objs, args.repeat
        ),
        "laststate.share (next state)": per_call(lambda p: laststate.share(*p), pairs, args.repeat),
    }
    # the first state of an object new to its stream: kept alone (compacted), and shared
    # with the stream's last state, another object's (the TrainJob before it)
    firsts = [(copy.deepcopy(o), None) for o in objs]
    rows["laststate.share (first state)"] = per_call(
        lambda p: laststate.share(*p), firsts, args.repeat
    )
    like = getattr(laststate.LastStates, "like", None)
    if like is not None:
        neighbours = [
            (copy.deepcopy(o), laststate.compact(copy.deepcopy(objs[i - 1])))
            for i, o in enumerate(objs)
        ]
        rows["laststate.share (first, neighbour)"] = per_call(
            lambda p: laststate.share(*p), neighbours, args.repeat
        )
    try:
        from dispatch import jsontext
    except ImportError:
        pass
    else:
        rows["jsontext.loads"] = per_call(jsontext.loads, texts, args.repeat)
        rows["jsontext.dumps"] = per_call(jsontext.dumps, objs, args.repeat)
    rows.update(plan_rows(args.repeat))
    rows.update(diagnose_rows(args.repeat))
    print(f"{len(objs)} TrainJobs of {size} bytes on average")
    for name, micros in rows.items():
        print(f"{name:36s} {micros:7.1f} us")


if __name__ == "__main__":
    main()

"""Fuzzed job specs and runtimes (hypothesis): how many were tried, and that none crashed.

* specs: the example specs (examples/**/job*.yaml, examples/kubeflow/jobs) with one part
  replaced by arbitrary JSON, and arbitrary JSON documents; ``parse_spec`` must return a
  spec or raise ``InvalidSpec``, nothing else;
* runtimes: the example runtimes (examples/kubeflow/runtimes) mutated the same way, and
  arbitrary JSON; ``check_runtime`` must return a verdict (any other outcome is a crash).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch.adapters.kubeflow.planning.rules import check_runtime
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings
from dispatch.model import InvalidSpec, parse_spec, yaml12

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
json_value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


def _load(paths: list[Path]) -> list[Any]:
    return [yaml12.load(p.read_text()) for p in paths]  # YAML 1.2: `on:` stays a string


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, *rest = path
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], tuple(rest), new)
    return copy


def mutated(bases: list[Any]) -> st.SearchStrategy[Any]:
    """A base document with one part (chosen by a drawn index) replaced by arbitrary JSON."""

    def build(choice: tuple[int, int, Any]) -> Any:
        which, where, garbage = choice
        base = bases[which % len(bases)]
        paths = _paths(base)
        return _replace(base, paths[where % len(paths)], garbage)

    return st.tuples(st.integers(0, 10_000), st.integers(0, 10_000), json_value).map(build)


def run(examples: int) -> dict[str, Any]:
    specs = _load(
        sorted(EXAMPLES.glob("**/job*.yaml"))
        + sorted((EXAMPLES / "kubeflow" / "jobs").glob("*.yaml"))
    )
    runtimes = _load(sorted((EXAMPLES / "kubeflow" / "runtimes").glob("*.yaml")))
    counts = {"specs": 0, "specsAccepted": 0, "runtimes": 0, "runtimesAccepted": 0}
    crashes: list[str] = []
    config = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )

    @config
    @given(mutated(specs) | json_value)
    def spec_case(data: Any) -> None:
        counts["specs"] += 1
        try:
            parse_spec(data)
            counts["specsAccepted"] += 1
        except InvalidSpec:
            pass
        except Exception as exc:
            crashes.append(f"parse_spec: {type(exc).__name__}: {exc}"[:300])

    @config
    @given(mutated(runtimes) | json_value, st.booleans())
    def runtime_case(raw: Any, allow_restart: bool) -> None:
        counts["runtimes"] += 1
        try:
            verdict = check_runtime(raw, KubeflowSettings(allow_rank_restart=allow_restart))
            counts["runtimesAccepted"] += not verdict.reasons
        except Exception as exc:
            crashes.append(f"check_runtime: {type(exc).__name__}: {exc}"[:300])

    random.seed(0)
    spec_case()
    runtime_case()
    return {**counts, "crashes": len(crashes), "crashSamples": crashes[:5]}


if __name__ == "__main__":
    import json

    print(json.dumps(run(200), indent=1))

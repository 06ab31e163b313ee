"""Shared test data for the Kubeflow adapter: the example runtimes and clusters, as values."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings, parse_settings
from dispatch.config import load_config
from dispatch.model import yaml12
from tests.conftest import EXAMPLES

KUBEFLOW_EXAMPLES = EXAMPLES / "kubeflow"
RUNTIMES = KUBEFLOW_EXAMPLES / "runtimes"
JOBS = KUBEFLOW_EXAMPLES / "jobs"
CONFIG = KUBEFLOW_EXAMPLES / "config.yaml"


def load_yaml(path: Path) -> Any:
    return yaml12.load(path.read_text(encoding="utf-8"))


def example_runtimes() -> dict[tuple[str, str], dict[str, Any]]:
    """The example runtimes by (kind, name), as a cluster would hold them."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for file in sorted(RUNTIMES.glob("*.yaml")):
        raw = load_yaml(file)
        found[(raw["kind"], raw["metadata"]["name"])] = raw
    return found


def example_runtime(stem: str) -> dict[str, Any]:
    """A fresh copy of one example runtime file (tests may mutate it)."""
    return copy.deepcopy(load_yaml(RUNTIMES / f"{stem}.yaml"))


def cluster_settings(name: str) -> KubeflowSettings:
    return parse_settings(load_config(CONFIG).cluster(name))


def trainer_job(runtime: dict[str, Any]) -> dict[str, Any]:
    """The first replicated job of a runtime (the trainer job of every valid example)."""
    job: dict[str, Any] = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    return job


def pod_spec(runtime: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = trainer_job(runtime)["template"]["spec"]["template"]["spec"]
    return spec


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait for ``condition`` (a guard against hanging, not a timing assertion)."""
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")

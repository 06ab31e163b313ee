"""The conformance suite against the Kubeflow adapter, on the emulator over real HTTP, with
Trainer, JobSet, the Job controller, the scheduler and the kubelet running (no Kueue: the
jobs name no queue).

Pods behave as the job spec's ``EMULATOR_SCENARIO`` says (the emulator's kubelet reads it):
the quick job's pods exit 0 after a few seconds, rank 1 of the failing job exits 3, the long
job's pods run until deleted. The fixture's seconds are the emulator's, which run
``TIME_SCALE`` times faster than real ones; the adapters read the same clock.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dispatch.conformance import AdapterFixture, Check, checks_parameters, run_under_pytest
from dispatch.model import JobSpec, parse_spec

from .harness import World

TIME_SCALE = 20.0

RUNTIME = {"kind": "ClusterTrainingRuntime", "name": "torch-dispatch"}


def _spec(name: str, scenario: str, **extra: Any) -> JobSpec:
    fields = {
        "name": name,
        "cluster": "kf",
        "runtime": RUNTIME,
        "nodes": 2,
        "command": ["python", "train.py"],
        "image": "train:latest",
        "env": {"EMULATOR_SCENARIO": scenario},
        **extra,
    }
    return parse_spec(fields)


def kubeflow_fixture(world: World) -> AdapterFixture:
    async def advance(seconds: float) -> None:
        await asyncio.sleep(seconds / TIME_SCALE)

    def footprint() -> tuple[str, ...]:
        """Every object an attempt is made of: TrainJobs, runtime copies, JobSets, pods."""
        kinds = [("TrainJob", None), ("TrainingRuntime", None),
                 ("JobSet", "jobset.x-k8s.io/v1alpha2"), ("Pod", "v1")]  # fmt: skip
        found = []
        for kind, api in kinds:
            objects = world.objects(kind, api) if api else world.objects(kind)
            found += [f"{kind}/{o['metadata']['name']}" for o in objects]
        return tuple(sorted(found))

    return AdapterFixture(
        name="kubeflow",
        make_adapter=world.adapter,
        succeeds=_spec("quick", "default: {startAfter: 1, runFor: 5}"),
        fails=_spec(
            "fails",
            "default: {startAfter: 1, runFor: 600}\npods: [{index: 1, runFor: 5, exitCode: 3}]",
        ),
        runs_long=_spec("long", "default: {startAfter: 1, runFor: null}"),
        refused=_spec(
            "refused",
            "default: {}",
            runtime={"kind": "ClusterTrainingRuntime", "name": "torch-distributed"},
        ),
        advance=advance,
        patience=600.0,
        poll=2.0,
        real_timeout=60.0,
        footprint=footprint,
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("check", checks_parameters())
def test_kubeflow_adapter_conforms_on_the_emulator(check: Check, tmp_path: Path) -> None:
    world = World(tmp_path, time_scale=TIME_SCALE)
    try:
        run_under_pytest(check, kubeflow_fixture(world))
    finally:
        world.close()

"""The v2.3 TrainJob CRD's defaults, applied by the emulator's API server as a real one does:
``spec.suspend`` defaults to false, so the JobSet Trainer builds is never suspended by the
runtime template's ``suspend: true`` (Trainer's JobSet plugin copies the TrainJob's value)."""

from __future__ import annotations

from typing import Any

from dispatch.testing.k8s.runtimes import torch_distributed

from .scenario_helpers import JOBSET, TRAINER, cluster, find, trainjob, wait_for


def test_suspend_defaults_to_false_and_wins_over_the_runtime_template() -> None:
    rt = torch_distributed()
    rt["metadata"]["name"] = "suspended-template"
    rt["spec"]["template"]["spec"]["suspend"] = True
    with cluster() as emu:
        emu.create(rt)
        emu.create(trainjob("tj", "suspended-template"))
        stored = find(emu, TRAINER, "TrainJob", "tj")
        assert stored is not None and stored["spec"]["suspend"] is False
        jobset: Any = wait_for("the JobSet", lambda: find(emu, JOBSET, "JobSet", "tj"))
        assert jobset["spec"]["suspend"] is False
        held = trainjob("held", "suspended-template", suspend=True)
        emu.create(held)
        assert find(emu, TRAINER, "TrainJob", "held")["spec"]["suspend"] is True  # type: ignore[index]

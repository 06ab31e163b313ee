"""``dispatch plan --show-jobset`` shows the JobSet that Trainer (the emulator's controller)
then creates from the TrainJob, field for field but the owner's uid."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from dispatch.adapters.kubeflow.planning.plan import with_jobset
from dispatch.cli.main import cli

from .harness import World

JOBSET = "jobset.x-k8s.io/v1alpha2"


def test_the_shown_jobset_is_the_one_trainer_creates(world: World) -> None:
    job = world.records.get_job(world.submit("shown", {"default": {"runFor": 30}})).job
    adapter = world.adapter()
    plan = with_jobset(asyncio.run(adapter.plan(job, 1)))
    [shown] = [a.content for a in plan.artifacts if a.kind == "JobSet"]
    asyncio.run(adapter.start(job, 1))

    def created() -> dict[str, Any] | None:
        return next(iter(world.objects("JobSet", JOBSET)), None)

    deadline = time.monotonic() + 30
    while created() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    jobset = created()
    assert jobset is not None
    assert jobset["spec"] == shown["spec"]
    assert jobset["metadata"]["labels"] == shown["metadata"]["labels"]
    [owner] = jobset["metadata"]["ownerReferences"]
    assert {**owner, "uid": "-"} == {**shown["metadata"]["ownerReferences"][0], "uid": "-"}


def test_dispatch_plan_show_jobset_prints_it(world: World, tmp_path: Path) -> None:
    config = tmp_path / "dispatch.yaml"
    entry = {"name": "kf", "adapter": "kubeflow", **world.settings}
    config.write_text(yaml.safe_dump({"clusters": [entry]}))
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: shown\ncluster: kf\n"
        "runtime: {kind: ClusterTrainingRuntime, name: torch-dispatch}\n"
        "nodes: 2\nimage: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime\n"
        "command: [torchrun, train.py]\nresources: {cpu: '1'}\n"
    )
    runner = CliRunner()
    env = {"DISPATCH_STATE_DIR": str(tmp_path / "state")}
    text = runner.invoke(
        cli, ["--config", str(config), "plan", str(spec), "--show-jobset"], env=env
    )
    assert text.exit_code == 0, text.output
    assert "  Trainer would create JobSet shown-" in text.output
    assert "kind: JobSet" in text.output and "PET_NNODES" in text.output
    plain = runner.invoke(cli, ["--config", str(config), "plan", str(spec)], env=env)
    assert "kind: JobSet" not in plain.output  # only when asked
    assert "would create JobSet" not in plain.output
    data = json.loads(
        runner.invoke(
            cli,
            ["--config", str(config), "plan", str(spec), "--show-jobset", "-o", "json"],
            env=env,
        ).output
    )
    kinds = [o["kind"] for o in data["objects"]]
    assert kinds == ["TrainingRuntime", "TrainJob", "JobSet"]

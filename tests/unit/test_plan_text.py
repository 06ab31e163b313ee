"""Text ``dispatch plan`` shows what would run (issue 26): every adapter's command line,
working directory and the *names* of the variables it sets, never their values; ``-o json``
keeps its shape. Before, it showed only "would create KIND NAME"."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.testing import CliRunner

from dispatch.adapters.kubeflow.planning.plan import plan_objects
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings
from dispatch.adapters.slurm.script import build_sbatch_script
from dispatch.cli.display import plan_lines
from dispatch.cli.main import cli
from dispatch.model import (
    Artifact,
    CapabilityReport,
    ExecutionIdentity,
    Job,
    Plan,
    parse_spec,
)
from tests.kubeflow.helpers import example_runtime

VALUE = "hunter2-value"  # an env value: it must never appear in text plan output


def _text(plan: Plan) -> str:
    return click.unstyle("\n".join(plan_lines(plan)))


def test_local_plan_shows_argv_cwd_and_env_names_but_no_values(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: shown\nnodes: 1\nprocsPerNode: 2\n"
        f'command: [python, "-c", "print(1)"]\nenv: {{API_TOKEN: {VALUE}}}\n'
        f"workingDir: {tmp_path}\n"
    )
    env = {"DISPATCH_STATE_DIR": str(tmp_path / "state")}
    text = CliRunner().invoke(cli, ["plan", str(spec)], env=env)
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    rank = lines.index("  would create process node-0/rank-1")
    assert lines[rank + 1] == "      argv         python -c 'print(1)'"
    assert lines[rank + 2] == f"      cwd          {tmp_path}"
    env_text = " ".join(lines[rank + 3 : rank + 6])
    assert lines[rank + 3].startswith("      env          ")
    assert "API_TOKEN" in env_text and "RANK" in env_text and "WORLD_SIZE" in env_text
    assert VALUE not in text.output
    assert "env above" not in text.output
    shown = CliRunner().invoke(cli, ["plan", str(spec), "-o", "json"], env=env)
    process = json.loads(shown.stdout)["objects"][2]
    assert process["content"]["env"]["API_TOKEN"] == VALUE  # json keeps its shape and values


def test_slurm_plan_shows_the_srun_line_the_working_directory_and_exported_names() -> None:
    spec = parse_spec(
        {
            "name": "ddp",
            "nodes": 2,
            "procsPerNode": 2,
            "command": ["python", "train.py"],
            "env": {"API_TOKEN": VALUE},
            "workingDir": "/shared/my project",
        }
    )
    identity = ExecutionIdentity(job_id="ddp-1", attempt=1, cluster="hpc")
    script = build_sbatch_script(spec, identity, output_dir="/shared/out")
    plan = Plan(
        identity,
        "slurm",
        CapabilityReport("hpc", "slurm"),
        (
            Artifact("sbatch-script", "dispatch-ddp-1-a1", script),
            Artifact(
                "argv", "sbatch", {"argv": ["sbatch", "--parsable"], "stdin": "sbatch-script"}
            ),
        ),
    )
    text = _text(plan)
    assert "      argv         srun --nodes=2 --ntasks=4" in text
    assert text.splitlines()[2].endswith("dispatch-task python train.py")
    assert "      cwd          /shared/my project" in text
    assert "API_TOKEN" in text and "OMP_NUM_THREADS" in text and "PET_MASTER_PORT" in text
    assert VALUE not in text
    assert "      argv         sbatch --parsable\n      stdin        the sbatch-script" in text


def test_kubeflow_plan_shows_the_trainer_command_and_env_names() -> None:
    spec = parse_spec(
        {
            "name": "train",
            "cluster": "kf",
            "command": ["torchrun", "train.py"],
            "args": ["--epochs", "3"],
            "env": {"API_TOKEN": VALUE},
            "runtime": {"name": "torch-dispatch"},
        }
    )
    job = Job("train-ab12c", spec, 0.0)
    plan = plan_objects(job, 1, example_runtime("torch"), KubeflowSettings(namespace="ml-team"))
    text = _text(plan)
    trainjob = text.index("would create TrainJob")
    assert "      argv         torchrun train.py --epochs 3" in text[trainjob:]
    assert "      cwd          the image's working directory" in text[trainjob:]
    assert "API_TOKEN" in text[trainjob:] and "DISPATCH_ATTEMPT" in text[trainjob:]
    assert VALUE not in text


def test_memory_plan_shows_its_command_and_env_names() -> None:
    identity = ExecutionIdentity(job_id="m-1", attempt=1, cluster="mem")
    content = {"command": ["python", "a.py"], "env": {"DISPATCH_JOB": "m-1"}}
    plan = Plan(
        identity,
        "memory",
        CapabilityReport("mem", "memory"),
        (Artifact("memory-job", "m-1-a1", content),),
    )
    lines = _text(plan).splitlines()
    assert lines[2:4] == ["      argv         python a.py", "      env          DISPATCH_JOB"]

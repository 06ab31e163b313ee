"""``dispatch`` end to end on the real two-node Slurm: a configuration file names the cluster,
each call is a new process, and the job spec is what a user would write.

The PyTorch DDP example (``examples/ddp``) runs here unchanged: the same files, with only
``cluster:`` set to the Slurm cluster. It needs torch (skipped without it). ``torchrun`` and
``python`` are found on the ``PATH`` the job is submitted with (sbatch passes the submitting
environment on, as on a login node with an activated virtual environment).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dispatch.model import load_spec
from tests.conftest import EXAMPLES
from tests.slurm.realslurm import RealSlurm

ENV_PRINT = 'echo "node=$PET_NODE_RANK attempt=$DISPATCH_ATTEMPT cluster=$DISPATCH_CLUSTER"'


def dispatch(
    config: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run the real ``dispatch`` command in a new process, with ``--config config``."""
    return subprocess.run(
        [sys.executable, "-m", "dispatch", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or dict(os.environ),
        check=False,
    )


def test_run_status_and_logs_through_the_cli(slurm_config_file: Path, tmp_path: Path) -> None:
    spec = tmp_path / "hello" / "job.yaml"
    spec.parent.mkdir()
    spec.write_text(
        f"name: hello\ncluster: testslurm\nnodes: 2\ncommand: [sh, -c, {json.dumps(ENV_PRINT)}]\n"
    )
    done = dispatch(slurm_config_file, "run", str(spec), "--output", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["state"], result["cause"]) == ("succeeded", None)
    assert [a["attempt"] for a in result["attempts"]] == [1]

    status = dispatch(slurm_config_file, "status", result["job"], "--output", "json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "succeeded"
    logs = dispatch(slurm_config_file, "logs", result["job"])
    assert logs.returncode == 0, logs.stderr
    assert sorted(logs.stdout.splitlines()) == [
        "[rank 0] node=0 attempt=1 cluster=testslurm",
        "[rank 1] node=1 attempt=1 cluster=testslurm",
    ]


def test_plan_shows_the_batch_script_and_a_refused_run_creates_nothing(
    slurm_config_file: Path, real_slurm: RealSlurm, tmp_path: Path
) -> None:
    example = _ddp_copy(tmp_path)  # planning needs no torch: nothing runs
    plan = dispatch(slurm_config_file, "plan", str(example / "job.yaml"), "--output", "json")
    assert plan.returncode == 0, plan.stderr
    artifacts = json.loads(plan.stdout)["objects"]
    script = next(a["content"] for a in artifacts if a["kind"] == "sbatch-script")
    for line in ("#SBATCH --nodes=2", "#SBATCH --no-requeue", "#SBATCH --mem=4096M"):
        assert line in script.splitlines()
    assert "dispatch-task torchrun train.py" in script

    big = tmp_path / "big.yaml"
    big.write_text("name: big\ncluster: testslurm\nnodes: 3\ncommand: [sh, -c, 'true']\n")
    refused = dispatch(slurm_config_file, "run", str(big), "--output", "json")
    assert refused.returncode == 1
    assert [r["rule"] for r in json.loads(refused.stdout)["reasons"]] == ["slurm-too-many-nodes"]
    listed = real_slurm.run("squeue", "-h", "-t", "all", "-o", "%j").stdout.split()
    assert not [name for name in listed if name.startswith("dispatch-big-")]


def _ddp_copy(tmp_path: Path) -> Path:
    """examples/ddp copied, with only ``cluster:`` added to its job spec."""
    example = tmp_path / "ddp"
    shutil.copytree(EXAMPLES / "ddp", example)
    original = (EXAMPLES / "ddp" / "job.yaml").read_text()
    changed = original.replace("name: ddp-demo\n", "name: ddp-demo\ncluster: testslurm\n", 1)
    (example / "job.yaml").write_text(changed)
    assert load_spec(example / "job.yaml") == load_spec(EXAMPLES / "ddp" / "job.yaml").model_copy(
        update={"cluster": "testslurm"}
    )
    return example


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_ddp_example_runs_unchanged_on_slurm(slurm_config_file: Path, tmp_path: Path) -> None:
    example = _ddp_copy(tmp_path)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "TMPDIR": str(tmp_path),  # torchrun leaves folders in the temp dir
    }

    done = dispatch(
        slurm_config_file, "run", str(example / "job.yaml"), "-o", "json", env=env, timeout=360
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert (result["state"], result["cause"]) == ("succeeded", None), result
    job = result["job"]
    folder = example / "checkpoints" / job / "attempt-1"
    epochs = sorted(p.name.removesuffix(".pt") for p in folder.iterdir())  # files or folders
    assert epochs == ["epoch-1", "epoch-2", "epoch-3"]
    logs = dispatch(slurm_config_file, "logs", job, "--rank", "0", env=env)
    assert logs.returncode == 0, logs.stderr
    assert "attempt 1 epoch 3: loss" in logs.stdout
    assert "(4 ranks)" in logs.stdout  # 2 Slurm nodes x 2 processes in one process group

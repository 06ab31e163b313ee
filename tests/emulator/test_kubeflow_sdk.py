"""The Kubeflow SDK's TrainerClient (Kubernetes backend), unmodified, against the emulator:
list runtimes, train, wait_for_job_status, get_job, delete_job. It runs in its own venv."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dispatch.testing.k8s import ClusterConfig, Emulator
from dispatch.testing.k8s.controllers import standard_controllers
from dispatch.testing.k8s.runtimes import torch_distributed

from .sdk_venv import ensure_sdk_venv

SCRIPT = Path(__file__).with_name("sdk_script.py")


@pytest.mark.timeout(900)
def test_trainer_client_lifecycle(tmp_path: Path) -> None:
    python, why = ensure_sdk_venv()
    if python is None:
        pytest.skip(why)
    config = ClusterConfig(time_scale=50, controllers=standard_controllers())
    with Emulator(config, kubeconfig=tmp_path / "kubeconfig") as emu:
        emu.create(torch_distributed())
        done = subprocess.run(
            [str(python), str(SCRIPT), str(emu.kubeconfig)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert "torch-distributed" in seen["runtimes"]
        assert seen["status"] == "Complete"
        assert seen["nodes"] == 2
        assert seen["steps"] == ["node-0", "node-1"]
        trainer = emu.cluster.rtype("trainer.kubeflow.org/v1alpha1", "TrainJob")
        left = emu.call(lambda: emu.cluster.store.list(trainer, "default").items)
        assert [
            t["metadata"]["name"] for t in left if not t["metadata"].get("deletionTimestamp")
        ] == []

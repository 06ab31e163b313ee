"""Interoperability: the Kubeflow SDK's TrainerClient, unmodified and in its own venv, reads
and follows a TrainJob that dispatch created (issue 6)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.config import ClusterConfig as DispatchCluster
from dispatch.testing.k8s import ClusterConfig, Emulator
from dispatch.testing.k8s.controllers import standard_controllers
from tests.emulator.sdk_venv import ensure_sdk_venv
from tests.kubeflow.adapter.conftest import (
    NAMESPACE,
    RUNTIMES,
    example_spec,
    job_of,
    publish_trainer_version,
    run,
)

SCRIPT = Path(__file__).with_name("sdk_read.py")


@pytest.mark.timeout(900)
def test_trainer_client_reads_and_follows_a_trainjob_dispatch_created(tmp_path: Path) -> None:
    python, why = ensure_sdk_venv()
    if python is None:
        pytest.skip(why)
    config = ClusterConfig(
        namespaces=("default", NAMESPACE, "kubeflow-system"),
        time_scale=50,
        controllers=standard_controllers(),
    )
    with Emulator(config, kubeconfig=tmp_path / "kubeconfig") as emu:
        emu.create(yaml.safe_load((RUNTIMES / "torch.yaml").read_text()))
        publish_trainer_version(emu, "v2.3.0")
        adapter = KubeflowAdapter(
            DispatchCluster(
                name="kf",
                adapter="kubeflow",
                settings={"kubeconfig": str(emu.kubeconfig), "namespace": NAMESPACE},
            ),
            AdapterContext(state_dir=tmp_path / "state"),
        )
        # the emulated nodes have no GPUs: the example asks for two per node
        spec = example_spec("torch", nodes=2, resources={"cpu": "1", "memory": "1Gi"})
        handle = run(adapter.start(job_of(spec), 1))
        done = subprocess.run(
            [str(python), str(SCRIPT), str(emu.kubeconfig), NAMESPACE, handle.native],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert handle.native in seen["listed"]
        assert seen["name"] == handle.native
        assert seen["status"] == "Complete"
        assert seen["nodes"] == 2
        assert len(seen["steps"]) == 2

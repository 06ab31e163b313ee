"""docs/how-to/run-for-a-team.md, end to end on the emulator: an empty cluster and database,
deploy/'s manifests applied with kubectl, a job submitted from a "laptop" that then goes away,
and a supervisor authenticated as the deployment's service account (which the emulator's
RBAC limits to the generated Role) supervising it through a lost node to success.

The supervisor runs as a process on this machine with the service account's token in a
kubeconfig: the pod itself (the image) cannot run here, and in a pod dispatch would read the
same token from the service-account files (tests/deploy/test_in_cluster.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatch.testing.k8s import Emulator
from dispatch.testing.k8s.kubeflow import install_default_runtimes, kubeflow_cluster_config
from dispatch.testing.postgres import PostgresServer
from tests.conftest import EXAMPLES, REPO

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
NAMESPACE = "ml-team"  # deploy/overlays/example's
ACCOUNT = "dispatch-supervisor"
JOB = {
    "name": "train",
    "cluster": "prod",
    "runtime": {"kind": "ClusterTrainingRuntime", "name": "torch-dispatch"},
    "nodes": 2,
    "command": ["torchrun", "train.py"],
    "env": {"EMULATOR_SCENARIO": json.dumps(
        {"default": {"startAfter": 2, "runFor": 80, "logs": ["step 1 loss 0.5"]}}
    )},
    "recovery": {
        "rules": [{"on": ["node_lost"], "action": "retry", "limit": 2, "backoff": {"initial": "1s"}}],
        "unmatched": "fail",
    },
}  # fmt: skip


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)


def _config(path: Path, kubeconfig: Path) -> Path:
    cluster = {"name": "prod", "adapter": "kubeflow", "supervision": "remote",
               "kubeconfig": str(kubeconfig), "namespace": NAMESPACE}  # fmt: skip
    path.write_text(yaml.safe_dump({"clusters": [cluster]}))
    return path


def _running_pods(emulator: Emulator) -> list[dict[str, Any]]:
    cluster = emulator.cluster
    pods = emulator.call(lambda: cluster.store.objects(cluster.rtype("v1", "Pod")))
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_job_from_a_closed_laptop_is_recovered_by_the_cluster_supervisor(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    config = kubeflow_cluster_config(nodes=3, namespaces=(NAMESPACE,), time_scale=10.0)
    with Emulator(config, kubeconfig=tmp_path / "admin-kubeconfig") as emulator:
        emulator.call(lambda: install_default_runtimes(emulator.cluster))
        admin = {"KUBECONFIG": str(emulator.kubeconfig), "HOME": str(tmp_path),
                 "PATH": "/usr/bin:/bin"}  # fmt: skip
        for args in (
            ["apply", "--validate=false", "-f", str(EXAMPLES / "kubeflow/runtimes/torch.yaml")],
            ["apply", "--validate=false", "-k", str(REPO / "deploy/overlays/example")],
        ):
            applied = _run([str(KUBECTL), *args], admin)
            assert applied.returncode == 0, applied.stderr
        token_kubeconfig = emulator.service_account_kubeconfig(
            tmp_path / "pod-kubeconfig", NAMESPACE, ACCOUNT
        )
        records = postgres.create_database()
        base = {**os.environ, "DISPATCH_RECORDS": records, "USER": "alice", "LOGNAME": "alice"}
        laptop = {**base, "DISPATCH_STATE_DIR": str(tmp_path / "laptop"),
                  "DISPATCH_CONFIG": str(_config(tmp_path / "laptop.yaml", emulator.kubeconfig))}  # fmt: skip
        spec = tmp_path / "job.yaml"
        spec.write_text(yaml.safe_dump(JOB))
        submitted = _run([sys.executable, "-m", "dispatch", "submit", str(spec)], laptop)
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip()
        assert not (tmp_path / "laptop" / "supervisor.log").exists()  # the laptop can go away

        pod = {**base, "DISPATCH_STATE_DIR": str(tmp_path / "pod"),
               "DISPATCH_CONFIG": str(_config(tmp_path / "pod.yaml", token_kubeconfig))}  # fmt: skip
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "dispatch", "supervise", "--cluster", "prod", "--owner",
             f"{ACCOUNT}-0", "--poll-interval", "1", "--lease-ttl", "10"],
            env=pod, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while len(_running_pods(emulator)) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            running = _running_pods(emulator)
            assert len(running) >= 2, "attempt 1 never ran"
            lost = running[0]["spec"]["nodeName"]
            deleted = _run([str(KUBECTL), "delete", "node", lost, "--wait=false"], admin)
            assert deleted.returncode == 0, deleted.stderr
            status: dict[str, Any] = {}
            while time.monotonic() < deadline + 90:
                shown = _run([sys.executable, "-m", "dispatch", "status", job, "-o", "json"],
                             laptop)  # fmt: skip
                status = json.loads(shown.stdout)
                if status["state"] in ("succeeded", "failed", "cancelled"):
                    break
                time.sleep(0.5)
        finally:
            supervisor.send_signal(signal.SIGTERM)
            _, errors = supervisor.communicate(timeout=60)
        assert supervisor.returncode == 0, errors[-2000:]
        assert status["state"] == "succeeded", status["summary"]
        assert [(a["state"], a["cause"]) for a in status["attempts"]] == [
            ("failed", "node_lost"),
            ("succeeded", None),
        ]
        assert status["submittedBy"] == "alice"
        assert status["decision"] is not None
        teammate = {**laptop, "DISPATCH_STATE_DIR": str(tmp_path / "bob"), "USER": "bob"}
        listed = _run([sys.executable, "-m", "dispatch", "list", "-o", "json"], teammate)
        assert [j["job"] for j in json.loads(listed.stdout)] == [job]
        logs = _run([sys.executable, "-m", "dispatch", "logs", job, "--rank", "1"], teammate)
        assert logs.returncode == 0, logs.stderr
        assert "step 1 loss 0.5" in logs.stdout  # rank 1 of the last attempt, from its pod

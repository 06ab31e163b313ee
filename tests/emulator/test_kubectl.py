"""``kubectl``, unmodified, against the emulator (skipped when kubectl is not installed).

Limits: the emulator serves no OpenAPI documents (use ``--validate=false``) and does not decode
protobuf request bodies (``kubectl auth can-i`` sends one: it gets 415).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dispatch.testing.k8s import Emulator

from .conftest import KUBECTL, kubectl, trainjob

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")


def test_kubectl_get_apply_delete(emulator: Emulator, tmp_path: Path) -> None:
    nodes = kubectl(emulator, tmp_path, "get", "nodes", "-o", "name")
    assert nodes.returncode == 0, nodes.stderr
    assert nodes.stdout.split() == ["node/node-1", "node/node-2"]
    applied = kubectl(
        emulator, tmp_path, "apply", "--validate=false", "-f", "-", stdin=json.dumps(trainjob("tj"))
    )
    assert applied.returncode == 0, applied.stderr
    assert "trainjob.trainer.kubeflow.org/tj created" in applied.stdout
    got = kubectl(emulator, tmp_path, "get", "trainjob", "tj", "-o", "json")
    assert json.loads(got.stdout)["spec"]["runtimeRef"]["name"] == "torch-distributed"
    bad = kubectl(
        emulator,
        tmp_path,
        "create",
        "--validate=false",
        "-f",
        "-",
        stdin=json.dumps(trainjob("x" * 64)),
    )
    assert bad.returncode == 1
    assert "metadata.name must be no more than 63 characters" in bad.stderr
    deleted = kubectl(emulator, tmp_path, "delete", "trainjob", "tj")
    assert deleted.returncode == 0, deleted.stderr
    missing = kubectl(emulator, tmp_path, "get", "trainjob", "tj")
    assert missing.returncode == 1 and "NotFound" in missing.stderr


def test_kubectl_logs(emulator: Emulator, tmp_path: Path) -> None:
    emulator.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "node", "image": "busybox"}]},
        }
    )
    emulator.append_log("default", "p", "node", "hello from rank 0")
    logs = kubectl(emulator, tmp_path, "logs", "p")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout == "hello from rank 0\n"

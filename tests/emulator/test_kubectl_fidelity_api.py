"""``kubectl``, unmodified, on the API-server semantics of issue 27: a server-side dry run
creates nothing, and server-side apply conflicts between field managers as a real server's
do (skipped when kubectl is not installed)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from dispatch.testing.k8s import Emulator

from .conftest import KUBECTL, kubectl, trainjob

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")


def test_apply_dry_run_server_creates_nothing(emulator: Emulator, tmp_path: Path) -> None:
    manifest = tmp_path / "trainjob.json"
    manifest.write_text(json.dumps(trainjob("dry")))
    applied = kubectl(
        emulator, tmp_path, "apply", "--dry-run=server", "--validate=false", "-f", str(manifest)
    )
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "trainjob.trainer.kubeflow.org/dry created (server dry run)"
    time.sleep(0.5)  # a created TrainJob would have its JobSet and pods by now
    for kind in ("trainjobs", "jobsets", "jobs", "pods"):
        listed = kubectl(emulator, tmp_path, "get", kind, "-o", "name")
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout == "", kind


def _configmap(value: str) -> str:
    return json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": value}}
    )


def test_server_side_apply_conflicts_unless_forced(emulator: Emulator, tmp_path: Path) -> None:
    def apply(manager: str, value: str, *flags: str) -> subprocess.CompletedProcess[str]:
        return kubectl(
            emulator,
            tmp_path,
            "apply",
            "--server-side",
            "--validate=false",
            f"--field-manager={manager}",
            *flags,
            "-f",
            "-",
            stdin=_configmap(value),
        )

    first = apply("alice", "1")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "configmap/c serverside-applied"
    conflict = apply("bob", "2")
    assert conflict.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "alice": .data.x' in conflict.stderr
    forced = apply("bob", "2", "--force-conflicts")
    assert forced.returncode == 0, forced.stderr
    got = kubectl(
        emulator, tmp_path, "get", "configmap", "c", "-o", "json", "--show-managed-fields"
    )
    stored = json.loads(got.stdout)
    assert stored["data"] == {"x": "2"}
    owners = {(e["manager"], e["operation"]) for e in stored["metadata"]["managedFields"]}
    assert owners == {("bob", "Apply")}


def test_server_side_apply_takes_over_from_client_side_apply(
    emulator: Emulator, tmp_path: Path
) -> None:
    """kubectl's own manager inherits the fields its client-side apply set (the server's
    ``lastAppliedManager``), then kubectl migrates the entries; another manager conflicts."""
    created = kubectl(
        emulator, tmp_path, "apply", "--validate=false", "-f", "-", stdin=_configmap("1")
    )
    assert created.returncode == 0, created.stderr
    upgraded = kubectl(
        emulator,
        tmp_path,
        "apply",
        "--server-side",
        "--validate=false",
        "-f",
        "-",
        stdin=_configmap("2"),
    )
    assert upgraded.returncode == 0, upgraded.stderr
    other = kubectl(
        emulator,
        tmp_path,
        "apply",
        "--server-side",
        "--validate=false",
        "--field-manager=other",
        "-f",
        "-",
        stdin=_configmap("3"),
    )
    assert other.returncode == 1
    assert 'conflict with "kubectl": .data.x' in other.stderr

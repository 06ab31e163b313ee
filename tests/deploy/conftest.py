"""The deploy/ manifests as kustomize renders them, and kubectl against the emulator."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatch.testing.k8s import ClusterConfig, Emulator
from tests.conftest import REPO

KUBECTL = shutil.which("kubectl")
OVERLAY = REPO / "deploy" / "overlays" / "example"
NAMESPACE = "ml-team"  # the example overlay's
NAME = "dispatch-supervisor"
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl (with its built-in kustomize) is not installed here"
)


def kubectl(
    home: Path, *args: str, kubeconfig: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kubectl with a HOME of its own (its cache) and, when given, the kubeconfig only."""
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [str(KUBECTL), *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every object of ``kubectl kustomize deploy/overlays/example``."""
    if KUBECTL is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed here")
    done = kubectl(tmp_path_factory.mktemp("home"), "kustomize", str(OVERLAY))
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d is not None]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind]
    return found


def create_namespace(emulator: Emulator, home: Path, name: str = NAMESPACE) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # kubectl create namespace sends protobuf, which the emulator does not decode: apply JSON
    done = kubectl(
        home, "apply", "--validate=false", "-f", "-", kubeconfig=emulator.kubeconfig, stdin=body
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[Emulator]:
    with Emulator(ClusterConfig(), kubeconfig=tmp_path / "kubeconfig") as emu:
        yield emu

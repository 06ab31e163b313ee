"""Fixtures: one emulator per test (fast to start), and clients configured for it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.testing.k8s import ClusterConfig, Emulator

#: the real kubectl, when this machine has one (its tests skip without it)
KUBECTL = shutil.which("kubectl")


def kubectl(
    emulator: Emulator, home: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real kubectl against ``emulator`` (``home``: its HOME, for its cache)."""
    env = {"KUBECONFIG": str(emulator.kubeconfig), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [str(KUBECTL), *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[Emulator]:
    with Emulator(ClusterConfig(bookmark_interval=0.2), kubeconfig=tmp_path / "kubeconfig") as emu:
        yield emu


def trainjob(name: str, runtime: str = "torch-distributed", **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime}, **spec},
    }


def pod(
    name: str, labels: dict[str, str] | None = None, containers: tuple[str, ...] = ("node",)
) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": c, "image": "busybox"} for c in containers]},
    }

"""Fixtures: one emulator per test (fast to start), and clients configured for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.testing.k8s import ClusterConfig, Emulator


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

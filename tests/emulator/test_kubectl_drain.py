"""``kubectl cordon`` and ``kubectl drain`` (unmodified) against the emulator: drain finds
``pods/eviction`` in discovery, evicts through it, and a PodDisruptionBudget that allows no
disruption holds it until its timeout, as on a cluster (issue 27, item 6). Skipped when kubectl
is not installed."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from dispatch.testing.k8s import Emulator

from .conftest import KUBECTL, kubectl, pod

pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def _running_on_node_1(emulator: Emulator, name: str) -> None:
    """A pod its kubelet on node-1 reports Running and Ready (the fixture runs no kubelet)."""
    body: dict[str, Any] = pod(name, {"app": "train"})
    body["spec"]["nodeName"] = "node-1"
    emulator.create(body)
    cluster = emulator.cluster
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    emulator.call(
        lambda: cluster.store.patch(
            cluster.rtype("v1", "Pod"), "default", name,
            "application/merge-patch+json", {"status": status}, subresource="status",
        )
    )  # fmt: skip


def _pods(emulator: Emulator) -> list[str]:
    cluster = emulator.cluster
    listed = emulator.call(lambda: cluster.store.list(cluster.rtype("v1", "Pod"), "default"))
    return sorted(p["metadata"]["name"] for p in listed.items)


def _budget_allows(emulator: Emulator, allowed: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        budget = emulator.get("policy/v1", "PodDisruptionBudget", "all")
        status = budget.get("status") or {}
        if status.get("observedGeneration") and status.get("disruptionsAllowed") == allowed:
            return
        time.sleep(0.02)
    raise AssertionError(f"the budget never allowed {allowed}: {budget}")


def test_cordon_sets_unschedulable(emulator: Emulator, tmp_path: Path) -> None:
    done = kubectl(emulator, tmp_path, "cordon", "node-1")
    assert done.returncode == 0, done.stderr
    assert "node/node-1 cordoned" in done.stdout
    node = emulator.get("v1", "Node", "node-1", namespace=None)
    assert node["spec"]["unschedulable"] is True
    kubectl(emulator, tmp_path, "uncordon", "node-1")
    assert not emulator.get("v1", "Node", "node-1", namespace=None)["spec"].get("unschedulable")


def test_drain_is_held_by_a_budget_then_evicts(emulator: Emulator, tmp_path: Path) -> None:
    for name in ("a", "b"):
        _running_on_node_1(emulator, name)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "all"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}},
    }
    emulator.create(budget)
    _budget_allows(emulator, 0)
    drain = ("drain", "node-1", "--ignore-daemonsets", "--delete-emptydir-data", "--force")
    held = kubectl(emulator, tmp_path, *drain, "--timeout=7s")
    assert held.returncode != 0
    assert "node/node-1 cordoned" in held.stdout
    # kubectl got 429 and retried (every 5 s) until its timeout: the evictions went through
    # pods/eviction, which a plain delete would not have
    assert f"(will retry after 5s): {VIOLATION}" in held.stderr
    assert "global timeout reached: 7s" in held.stderr
    assert _pods(emulator) == ["a", "b"]
    assert emulator.get("v1", "Node", "node-1", namespace=None)["spec"]["unschedulable"] is True
    relaxed = kubectl(
        emulator, tmp_path, "patch", "pdb", "all", "--type=merge",
        "-p", json.dumps({"spec": {"minAvailable": 0}}),
    )  # fmt: skip
    assert relaxed.returncode == 0, relaxed.stderr
    _budget_allows(emulator, 2)
    drained = kubectl(emulator, tmp_path, *drain, "--timeout=20s")
    assert drained.returncode == 0, drained.stderr
    assert "evicting pod default/a" in drained.stdout + drained.stderr
    assert "node/node-1 drained" in drained.stdout
    assert _pods(emulator) == []

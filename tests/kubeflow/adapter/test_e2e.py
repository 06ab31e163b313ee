"""The same flow against a real cluster: runs only with DISPATCH_E2E_KUBECONFIG set.

Optional: DISPATCH_E2E_NAMESPACE (else the kubeconfig context's), DISPATCH_E2E_RUNTIME (a
ClusterTrainingRuntime that satisfies dispatch's rules, default ``torch-dispatch``, e.g.
examples/kubeflow/runtimes/torch.yaml applied to the cluster). The job is started held
(``spec.suspend``), so no pod runs, then cancelled.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.config import ClusterConfig
from dispatch.model import Job, State, parse_spec

from .conftest import run

KUBECONFIG = os.environ.get("DISPATCH_E2E_KUBECONFIG")
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not KUBECONFIG, reason="needs a real cluster (DISPATCH_E2E_KUBECONFIG)"),
]


def test_start_adopt_observe_and_cancel_on_a_real_cluster(tmp_path: Path) -> None:
    settings = {"kubeconfig": KUBECONFIG}
    if os.environ.get("DISPATCH_E2E_NAMESPACE"):
        settings["namespace"] = os.environ["DISPATCH_E2E_NAMESPACE"]
    adapter = KubeflowAdapter(
        ClusterConfig(name="e2e", adapter="kubeflow", settings=settings),
        AdapterContext(state_dir=tmp_path),
    )
    runtime = os.environ.get("DISPATCH_E2E_RUNTIME", "torch-dispatch")
    spec = parse_spec(
        {
            "name": "e2e",
            "cluster": "e2e",
            "runtime": {"kind": "ClusterTrainingRuntime", "name": runtime},
            "nodes": 1,
            "command": ["torchrun", "-c", "pass"],
        }
    )
    report = run(adapter.capabilities(spec))
    assert report.accepted, report.refusals
    job = Job(
        id=f"e2e-{os.getpid() % 100000:05d}{int(time.time()) % 1000:03d}", spec=spec, created_at=0.0
    )
    handle = run(adapter.start(job, 1, held=True))
    try:
        again = run(adapter.start(job, 1, held=True))
        assert again.data["uid"] == handle.data["uid"]
        assert run(adapter.observe(handle)).state is State.HELD
    finally:
        run(adapter.cancel(handle, "dispatch-e2e", "test over"))
    assert run(adapter.observe(handle)).state is State.CANCELLED

"""An emulated Kubeflow cluster over HTTP, with the example runtimes, and adapters bound to it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

pytest.importorskip("kubernetes_asyncio")

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.config import ClusterConfig as DispatchCluster
from dispatch.model import AttemptHandle, Job, JobSpec, parse_spec
from dispatch.testing.k8s import ClusterConfig, Emulator
from tests.conftest import EXAMPLES

T = TypeVar("T")
TRAINER = "trainer.kubeflow.org/v1alpha1"
NAMESPACE = "ml-team"
RUNTIMES = EXAMPLES / "kubeflow" / "runtimes"
JOBS = EXAMPLES / "kubeflow" / "jobs"
JOB_ID_SUFFIX = "x7k2p"


async def start_drained(
    adapter: KubeflowAdapter, job: Job, attempt: int, *, held: bool = False
) -> AttemptHandle:
    """``start``, then ``drain`` on the same event loop, as a supervisor's step does: the
    patch making the runtime copy owned by its TrainJob has been sent."""
    handle = await adapter.start(job, attempt, held=held)
    await adapter.drain()
    return handle


def run(coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """Run one coroutine on a fresh event loop (as the CLI does), with a generous timeout."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def publish_trainer_version(emu: Emulator, version: str) -> None:
    """The ConfigMap Trainer's chart publishes for its SDK (kubeflow-system namespace)."""
    emu.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kubeflow-trainer-public", "namespace": "kubeflow-system"},
            "data": {"kubeflow_trainer_version": version},
        }
    )


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[Emulator]:
    """An emulated cluster serving Trainer 2.3, JobSet and Kueue, with the example runtimes."""
    config = ClusterConfig(
        namespaces=("default", NAMESPACE, "kubeflow-system"), bookmark_interval=0.2
    )
    with Emulator(config, kubeconfig=tmp_path / "kubeconfig") as emu:
        for path in sorted(RUNTIMES.glob("*.yaml")):
            emu.create(yaml.safe_load(path.read_text()))
        publish_trainer_version(emu, "v2.3.0")
        yield emu


def stored(emu: Emulator, kind: str, api_version: str = TRAINER) -> list[dict[str, Any]]:
    """Every stored object of ``kind`` (read on the emulator's loop)."""
    cluster = emu.cluster
    rtype = cluster.rtype(api_version, kind)
    return emu.call(lambda: [dict(o) for o in cluster.store.objects(rtype)])


def names(emu: Emulator, kind: str) -> list[str]:
    return [o["metadata"]["name"] for o in stored(emu, kind)]


def patch(
    emu: Emulator,
    kind: str,
    name: str,
    body: dict[str, Any],
    *,
    namespace: str | None = NAMESPACE,
    subresource: str | None = None,
) -> dict[str, Any]:
    """A merge patch applied directly in the store (what a controller or a user would do)."""
    cluster = emu.cluster
    rtype = cluster.rtype(TRAINER, kind)
    ns = namespace if rtype.namespaced else None
    return emu.call(
        lambda: cluster.store.patch(
            rtype, ns, name, "application/merge-patch+json", body, subresource=subresource
        )
    )


AdapterFactory = Callable[..., KubeflowAdapter]


@pytest.fixture
def make_adapter(emulator: Emulator, tmp_path: Path) -> AdapterFactory:
    """``make_adapter(name="kf", **settings)``: a KubeflowAdapter for the emulator."""

    def make(
        name: str = "kf", request_timeout: float | None = None, **settings: Any
    ) -> KubeflowAdapter:
        entry = {"kubeconfig": str(emulator.kubeconfig), "namespace": NAMESPACE, **settings}
        entry = {k: v for k, v in entry.items() if v is not None}
        return KubeflowAdapter(
            DispatchCluster(name=name, adapter="kubeflow", settings=entry),
            AdapterContext(state_dir=tmp_path / "state" / name),
            request_timeout=request_timeout,
        )

    return make


def example_spec(example: str, cluster: str = "kf", **overrides: Any) -> JobSpec:
    data = yaml.safe_load((JOBS / f"{example}.yaml").read_text())
    data.update(cluster=cluster, **overrides)
    return parse_spec(data)


def job_of(spec: JobSpec) -> Job:
    return Job(id=f"{spec.name}-{JOB_ID_SUFFIX}", spec=spec, created_at=0.0)

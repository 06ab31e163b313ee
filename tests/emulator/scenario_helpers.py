"""Helpers for scenario tests: a cluster with the standard controllers, waits on conditions."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dispatch.testing.k8s import ClusterConfig, Emulator
from dispatch.testing.k8s.controllers import KueueConfig, standard_controllers
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.runtimes import torch_distributed
from dispatch.testing.k8s.scenario import Scenario

TRAINER = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"
TIMEOUT = 60.0  # real seconds; waits return as soon as the condition holds


@contextmanager
def cluster(
    scenario: Scenario | None = None,
    kueue: KueueConfig | None = None,
    *,
    time_scale: float = 200.0,
    runtimes: tuple[dict[str, Any], ...] = (),
    nodes: tuple[str, ...] = ("node-1", "node-2"),
) -> Iterator[Emulator]:
    config = ClusterConfig(
        time_scale=time_scale,
        nodes=nodes,
        controllers=standard_controllers(scenario, kueue),
        compaction_window=1e9,
    )
    with Emulator(config) as emu:
        for runtime in (torch_distributed(), *runtimes):
            emu.create(runtime)
        yield emu
        assert emu.cluster.controller_errors == []


def trainjob(name: str, runtime: str = "torch-distributed", **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    return {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {"name": name, "labels": labels},
        "spec": {"runtimeRef": {"name": runtime}, **spec},
    }


def objects(
    emu: Emulator, api_version: str, kind: str, namespace: str | None = "default", **labels: str
) -> list[dict[str, Any]]:
    from dispatch.testing.k8s.selectors import LabelSelector

    cluster_ = emu.cluster
    rtype = cluster_.rtype(api_version, kind)
    selector = LabelSelector.parse(",".join(f"{k}={v}" for k, v in labels.items()))
    return emu.call(lambda: cluster_.store.list(rtype, namespace, labels=selector).items)


def find(
    emu: Emulator, api_version: str, kind: str, name: str, namespace: str | None = "default"
) -> dict[str, Any] | None:
    found = [o for o in objects(emu, api_version, kind, namespace) if o["metadata"]["name"] == name]
    return found[0] if found else None


def wait_for(what: str, probe: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    """Poll ``probe`` until it returns something truthy (real seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def cond(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    if obj is None:
        return None
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype]
    return found[0] if found and found[0]["status"] == "True" else None


def trainjob_condition(emu: Emulator, name: str, ctype: str) -> dict[str, Any]:
    return wait_for(
        f"TrainJob {name} {ctype}", lambda: cond(find(emu, TRAINER, "TrainJob", name), ctype)
    )


def events(emu: Emulator, name: str, namespace: str = "default") -> list[dict[str, Any]]:
    return [
        e for e in objects(emu, "v1", "Event", namespace) if e["involvedObject"]["name"] == name
    ]


def pods(emu: Emulator, trainjob_name: str) -> list[dict[str, Any]]:
    return objects(emu, "v1", "Pod", **{"jobset.sigs.k8s.io/jobset-name": trainjob_name})


def delete_now(emu: Emulator, rtype: Any, namespace: str, name: str) -> None:
    """Delete the object at once (no grace), as its controller or a person would; one its
    controller deleted first (a failed Job stops its other pods) is gone already, not an
    error."""

    def delete() -> None:
        try:
            emu.cluster.store.delete(rtype, namespace, name, grace_period_seconds=0)
        except ApiError as exc:
            if exc.code != 404:
                raise

    emu.call(delete)

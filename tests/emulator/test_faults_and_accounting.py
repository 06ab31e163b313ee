"""Fault injection and request accounting, seen through the official client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402
from urllib3.exceptions import MaxRetryError, ProtocolError, ReadTimeoutError  # noqa: E402

from dispatch.testing.k8s import Emulator, FaultInjector, FaultRule  # noqa: E402


@pytest.fixture
def core(emulator: Emulator) -> Iterator[client.CoreV1Api]:
    api_client = config.new_client_from_config(str(emulator.kubeconfig))
    yield client.CoreV1Api(api_client)
    api_client.close()


def test_status_fault_fires_given_number_of_times(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    rule = emulator.faults.add(FaultRule(verb="list", resource="pods", status=500, times=2))
    for _ in range(2):
        with pytest.raises(ApiException) as exc:
            core.list_namespaced_pod("default")
        assert exc.value.status == 500
    assert core.list_namespaced_pod("default").items == []
    assert rule.hits == 2
    core.list_namespaced_config_map("default")  # other resources were never affected


def test_429_carries_retry_after(emulator: Emulator, core: client.CoreV1Api) -> None:
    emulator.faults.add(FaultRule(verb="create", resource="configmaps", status=429, retry_after=7))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    assert exc.value.status == 429
    assert exc.value.headers["Retry-After"] == "7"


def test_hang_then_drop(emulator: Emulator, core: client.CoreV1Api) -> None:
    rule = emulator.faults.add(FaultRule(verb="get", resource="namespaces", hang=0.2))
    # urllib3 retries a dropped GET a few times, then gives up
    with pytest.raises((ProtocolError, ReadTimeoutError, MaxRetryError, ApiException, OSError)):
        core.read_namespace("default", _request_timeout=5)
    assert rule.hits >= 1
    emulator.faults.remove(rule)
    assert core.read_namespace("default").metadata.name == "default"


def test_latency(emulator: Emulator, core: client.CoreV1Api) -> None:
    emulator.faults.add(FaultRule(verb="get", resource="nodes", latency=0.3))
    start = time.monotonic()
    core.read_node("node-1")
    assert time.monotonic() - start >= 0.3


def test_watch_dropped_after_events(emulator: Emulator, core: client.CoreV1Api) -> None:
    for i in range(3):
        core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    emulator.faults.add(
        FaultRule(verb="watch", resource="configmaps", drop_after_events=2, times=1)
    )
    seen: list[str] = []

    def consume() -> None:
        stream = watch.Watch().stream(core.list_namespaced_config_map, "default", timeout_seconds=5)
        seen.extend(event["object"].metadata.name for event in stream)

    with pytest.raises(ProtocolError):
        consume()
    assert seen == ["c0", "c1"]


def test_watch_gone_fault(emulator: Emulator, core: client.CoreV1Api) -> None:
    emulator.faults.add(FaultRule(verb="watch", resource="pods", watch_gone=True, times=1))
    rv = core.list_namespaced_pod("default").metadata.resource_version
    with pytest.raises(ApiException) as exc:
        for _ in watch.Watch().stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=5
        ):
            pass
    assert exc.value.status == 410


def test_probability_is_deterministic_with_a_seed() -> None:
    def pattern(seed: int) -> list[bool]:
        faults = FaultInjector(seed)
        faults.add(FaultRule(status=500, probability=0.5))
        return [faults.decide("get", "pods", "default", "p").fails for _ in range(32)]

    assert pattern(7) == pattern(7)
    assert 0 < sum(pattern(7)) < 32


def test_accounting_counts_requests_and_open_watches(
    emulator: Emulator, core: client.CoreV1Api
) -> None:
    emulator.cluster.accounting.reset()
    core.list_namespaced_pod("default")
    core.list_namespaced_pod("default")
    core.read_node("node-1")
    w = watch.Watch()

    def watcher() -> None:
        for event in w.stream(core.list_namespaced_pod, "default", timeout_seconds=30):
            if event["object"].metadata.name == "stop":
                break  # closes the connection: the server must notice

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while emulator.open_watches() != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    counts = emulator.requests()
    assert counts.count("list", "pods") == 2 and counts.count("get", "nodes") == 1
    assert counts.open_watches == {"pods": 1} and counts.count("watch") == 1
    core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "stop"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    )
    thread.join(timeout=10)
    assert not thread.is_alive()
    deadline = time.monotonic() + 10
    while emulator.open_watches() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert emulator.open_watches() == 0

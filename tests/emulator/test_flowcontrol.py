"""API Priority and Fairness: 429 under configured overload, over real HTTP on loopback.

A latency fault keeps requests executing (holding their seats) for a second; the tests wait
for the seats and the queue to fill (reading the priority level's counters), never on time.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dispatch.testing.k8s import ClusterConfig, Emulator, FaultRule
from dispatch.testing.k8s.flowcontrol import (
    EXEMPT,
    FLOW_SCHEMA_HEADER,
    GLOBAL_DEFAULT,
    PRIORITY_LEVEL_HEADER,
    FlowControl,
    RetryAfter,
)

NAMESPACE = "/api/v1/namespaces/default"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
REJECTED = b"Too many requests, please try again later.\n"
#: what every request of the limited level carries
LIMITED_HEADERS = GLOBAL_DEFAULT.headers


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def _get(emulator: Emulator, path: str, token: str | None = None) -> Answer:
    host, port = emulator.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        resp = conn.getresponse()
        return Answer(resp.status, dict(resp.getheaders()), resp.read())
    finally:
        conn.close()


class Background:
    """Requests sent on threads; :meth:`answers` joins them."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._answers: list[Answer] = []

    def send(self, fn: Callable[[], Answer], count: int = 1) -> None:
        for _ in range(count):
            thread = threading.Thread(target=lambda: self._answers.append(fn()), daemon=True)
            thread.start()
            self._threads.append(thread)

    def answers(self) -> list[Answer]:
        for thread in self._threads:
            thread.join(timeout=60)
        return self._answers


def _level_reaches(emulator: Emulator, executing: int, waiting: int = 0) -> None:
    """Wait until the limited level has this many requests executing and waiting."""
    flow = emulator.cluster.server.flow
    assert flow is not None
    level = flow.level
    deadline = time.monotonic() + 30
    while emulator.call(lambda: (level.executing, level.waiting)) != (executing, waiting):
        assert time.monotonic() < deadline, (level.executing, level.waiting)
        time.sleep(0.01)


def _emulator(tmp_path: Path, flow: FlowControl | None) -> Emulator:
    return Emulator(ClusterConfig(flow_control=flow), kubeconfig=tmp_path / "kubeconfig")


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Emulator]:
    """Two seats, two places in the queue, nobody exempt (the administrator is limited too)."""
    flow = FlowControl(seats=2, queue_length=2, queue_wait=30, exempt_groups=frozenset())
    with _emulator(tmp_path, flow) as emu:
        yield emu


def test_beyond_seats_and_queue_requests_get_apf_429(limited: Emulator) -> None:
    limited.faults.add(FaultRule(verb="get", resource="namespaces", latency=1.0))
    slow = Background()
    slow.send(lambda: _get(limited, NAMESPACE), 2)
    _level_reaches(limited, executing=2)
    slow.send(lambda: _get(limited, NAMESPACE), 2)
    _level_reaches(limited, executing=2, waiting=2)

    rejected = [_get(limited, NAMESPACE) for _ in range(2)]

    for answer in rejected:
        assert answer.status == 429
        assert answer.body == REJECTED  # Go's http.Error, not a Status
        assert answer.headers["Content-Type"] == "text/plain; charset=utf-8"
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["Retry-After"] == "1"
        assert answer.headers[FLOW_SCHEMA_HEADER] == LIMITED_HEADERS[FLOW_SCHEMA_HEADER]
        assert answer.headers[PRIORITY_LEVEL_HEADER] == LIMITED_HEADERS[PRIORITY_LEVEL_HEADER]
    served = slow.answers()
    assert [a.status for a in served] == [200] * 4  # the queued two were served after all
    for answer in served:
        assert answer.headers[PRIORITY_LEVEL_HEADER] == LIMITED_HEADERS[PRIORITY_LEVEL_HEADER]
    counts = limited.requests()
    assert counts.count("get", "namespaces") == 4  # served only
    assert counts.throttled == {("get", "namespaces"): 2}
    assert counts.throttled_total == 2


def test_a_request_waiting_past_the_queue_wait_is_rejected(tmp_path: Path) -> None:
    flow = FlowControl(seats=1, queue_length=1, queue_wait=0.1, exempt_groups=frozenset())
    with _emulator(tmp_path, flow) as emu:
        emu.faults.add(FaultRule(verb="get", resource="namespaces", latency=1.0))
        slow = Background()
        slow.send(lambda: _get(emu, NAMESPACE))
        _level_reaches(emu, executing=1)

        waited = _get(emu, CONFIGMAPS)  # queued: place free, seat not

        assert (waited.status, waited.body) == (429, REJECTED)
        assert [a.status for a in slow.answers()] == [200]
        assert emu.requests().throttled == {("list", "configmaps"): 1}
        assert _get(emu, CONFIGMAPS).status == 200  # the seat is free again


def test_system_masters_are_exempt_by_default(tmp_path: Path) -> None:
    with _emulator(tmp_path, FlowControl(seats=1, queue_length=0)) as emu:
        emu.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})
        emu.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "reader"},
                "rules": [{"apiGroups": [""], "resources": ["*"], "verbs": ["get", "list"]}],
            }
        )
        emu.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "robot-reads"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}],
            }
        )  # fmt: skip
        token = emu.service_account_token("default", "robot")
        emu.faults.add(FaultRule(verb="get", resource="namespaces", latency=1.0))
        slow = Background()
        slow.send(lambda: _get(emu, NAMESPACE, token))
        _level_reaches(emu, executing=1)

        robot = _get(emu, CONFIGMAPS, token)
        admin = Background()
        admin.send(lambda: _get(emu, NAMESPACE), 4)  # slow too, all at once, yet served
        admins = admin.answers()

        assert robot.status == 429
        assert [a.status for a in admins] == [200] * 4
        for answer in admins:
            assert answer.headers[FLOW_SCHEMA_HEADER] == EXEMPT.headers[FLOW_SCHEMA_HEADER]
            assert answer.headers[PRIORITY_LEVEL_HEADER] == EXEMPT.headers[PRIORITY_LEVEL_HEADER]
        assert [a.status for a in slow.answers()] == [200]
        assert emu.requests().throttled == {("list", "configmaps"): 1}


def test_exempt_users_are_never_limited(tmp_path: Path) -> None:
    flow = FlowControl(
        seats=1,
        queue_length=0,
        exempt_users=frozenset({"kubernetes-admin"}),
        exempt_groups=frozenset(),
    )
    with _emulator(tmp_path, flow) as emu:
        emu.faults.add(FaultRule(verb="get", resource="namespaces", latency=0.5))
        admin = Background()
        admin.send(lambda: _get(emu, NAMESPACE), 3)
        assert [a.status for a in admin.answers()] == [200] * 3
        assert emu.requests().throttled == {}


def test_a_watch_holds_its_seat_only_until_its_headers_are_sent(tmp_path: Path) -> None:
    flow = FlowControl(seats=1, queue_length=0, exempt_groups=frozenset())
    with _emulator(tmp_path, flow) as emu:
        host, port = emu.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request("GET", f"{CONFIGMAPS}?watch=1&timeoutSeconds=30")
            watch = conn.getresponse()  # the headers are in; the stream stays open
            assert watch.status == 200
            assert watch.headers[PRIORITY_LEVEL_HEADER] == LIMITED_HEADERS[PRIORITY_LEVEL_HEADER]
            assert emu.open_watches() == 1

            listed = _get(emu, CONFIGMAPS)  # the one seat is free again

            assert listed.status == 200
            assert emu.open_watches() == 1
        finally:
            conn.close()
        assert emu.requests().throttled == {}


def test_without_flow_control_nothing_is_limited(emulator: Emulator) -> None:
    emulator.faults.add(FaultRule(verb="get", resource="namespaces", latency=0.5))
    many = Background()
    many.send(lambda: _get(emulator, NAMESPACE), 6)
    answers = many.answers()
    assert [a.status for a in answers] == [200] * 6
    assert all(FLOW_SCHEMA_HEADER not in a.headers for a in answers)
    assert emulator.cluster.server.flow is None
    assert emulator.requests().throttled == {}


def test_the_official_client_sees_429_with_retry_after(limited: Emulator) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    api_client = kubernetes.config.new_client_from_config(str(limited.kubeconfig))
    try:
        core = kubernetes.client.CoreV1Api(api_client)
        core.list_namespaced_config_map("default")  # connected before the level fills
        limited.faults.add(FaultRule(verb="get", resource="namespaces", latency=2.0))
        slow = Background()
        slow.send(lambda: _get(limited, NAMESPACE), 4)
        _level_reaches(limited, executing=2, waiting=2)
        # a create: urllib3 itself retries a GET answered 429 with Retry-After
        with pytest.raises(kubernetes.client.rest.ApiException) as exc:
            core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    finally:
        api_client.close()
    assert exc.value.status == 429
    assert exc.value.headers["Retry-After"] == "1"
    assert exc.value.body.encode() == REJECTED
    assert [a.status for a in slow.answers()] == [200] * 4


def test_retry_after_doubles_under_many_drops_and_comes_back_down() -> None:
    tracker = RetryAfter()
    for _ in range(3):
        tracker.dropped(100.2)
    assert tracker.value == 1  # reconsidered only when a new second starts
    tracker.dropped(101.0)  # 3 drops in the last second: 3 x 1
    assert tracker.value == 2
    for _ in range(5):
        tracker.dropped(102.5)
    tracker.dropped(103.0)  # 6 in the last two seconds, but raised only 2 s after the last raise
    assert tracker.value == 4
    tracker.dropped(110.0)  # none in the last four seconds
    assert tracker.value == 3
    tracker.dropped(120.0)
    tracker.dropped(130.0)
    assert tracker.value == 1


def test_retry_after_stops_at_32() -> None:
    tracker = RetryAfter()
    for second in range(1000, 1400):
        for _ in range(200):
            tracker.dropped(float(second))
    assert tracker.value == 32


def test_configuration_is_checked() -> None:
    with pytest.raises(ValueError, match="seats"):
        FlowControl(seats=0)
    with pytest.raises(ValueError, match="queue_length"):
        FlowControl(queue_length=-1)

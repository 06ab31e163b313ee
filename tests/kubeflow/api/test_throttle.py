"""The Kubernetes client's throttle, against the emulator over HTTP: a 429 / Retry-After answer
is waited out by its request, which is sent again, at most ``max_retries`` times; it halves how
many requests the connection sends at once, answers not throttled raise that again up to
``max_in_flight``; a watch's stream keeps no slot. Waits run in virtual time (an injected
clock)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
import yaml

pytest.importorskip("kubernetes_asyncio")

from dispatch.adapters.kubeflow.api.client import TRAINJOBS, Connection, Session
from dispatch.adapters.kubeflow.api.listwatch import list_raw, watch_raw
from dispatch.adapters.kubeflow.api.throttle import (
    DEFAULT_PAUSE,
    MAX_PAUSE,
    MAX_RETRIES,
    Throttle,
    retry_after,
    submitting,
)
from dispatch.adapters.kubeflow.planning.settings import settings_from_mapping
from dispatch.clock import Clock, ManualClock, SystemClock
from dispatch.model import ConfigError, SchedulerUnavailable
from dispatch.testing.k8s import ClusterConfig, Emulator, FaultRule
from tests.kubeflow.helpers import until

T = TypeVar("T")
NS = "ml-team"
TRAINER = "trainer.kubeflow.org/v1alpha1"


def trainjob(name: str) -> dict[str, Any]:
    return {"apiVersion": TRAINER, "kind": "TrainJob",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": True}}  # fmt: skip


def stored(emu: Emulator, name: str) -> list[str]:
    """The stored TrainJobs named ``name`` (read on the emulator's loop)."""
    cluster = emu.cluster
    rtype = cluster.rtype(TRAINER, "TrainJob")
    return emu.call(
        lambda: [
            o["metadata"]["name"]
            for o in cluster.store.objects(rtype)
            if o["metadata"]["name"] == name
        ]
    )


class VirtualClock:
    """Time that moves only with ``advance``; a ``sleep`` lasts until then (and is recorded)."""

    def __init__(self) -> None:
        self._now = 1000.0
        self.sleeps: list[float] = []
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + seconds, woken))
        await woken

    def advance(self, seconds: float) -> None:
        self._now += seconds
        for deadline, woken in list(self._sleepers):
            if deadline <= self._now:
                self._sleepers.remove((deadline, woken))
                woken.set_result(None)


class ConcurrentLatency(SystemClock):
    """The emulator's wall clock, counting the requests sleeping in a latency fault of
    ``seconds`` at once (that is, the requests the server is handling at once)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.now_sleeping = 0
        self.peak = 0

    async def sleep(self, seconds: float) -> None:
        if seconds != self.seconds:
            await super().sleep(seconds)
            return
        self.now_sleeping += 1
        self.peak = max(self.peak, self.now_sleeping)
        try:
            await super().sleep(seconds)
        finally:
            self.now_sleeping -= 1


@pytest.fixture
def emu(tmp_path: Path) -> Iterator[Emulator]:
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        yield emu


def with_session(
    emu: Emulator,
    body: Callable[[Session, Connection], Awaitable[T]],
    *,
    clock: Clock | None = None,
    max_in_flight: int = 32,
) -> T:
    """Run ``body`` with a session of a new connection to ``emu``, on a fresh event loop."""

    async def main() -> T:
        connection = Connection(emu.kubeconfig, None, max_in_flight=max_in_flight, clock=clock)
        try:
            async with connection.session() as session:
                return await asyncio.wait_for(body(session, connection), 60)
        finally:
            await connection.aclose()

    return asyncio.run(main())


# --- the decision, pure ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "header", "wait"),
    [
        (429, "3", 3.0),  # the server's wait
        (429, "0", 0.0),  # at once
        (429, None, DEFAULT_PAUSE),  # a 429 is always retried
        (429, "soon", DEFAULT_PAUSE),  # not whole seconds: unreadable
        (429, "-2", DEFAULT_PAUSE),
        (429, "3600", MAX_PAUSE),  # capped
        (503, "2", 2.0),  # a 5xx with Retry-After
        (500, None, None),  # a 5xx without: not retried
        (503, "1.5", None),  # nor with an unreadable one
        (409, "2", None),  # never below 500 but 429
        (200, "2", None),
    ],
)
def test_which_answers_are_sent_again_and_after_how_long(
    status: int, header: str | None, wait: float | None
) -> None:
    headers = {} if header is None else {"Retry-After": header}
    assert retry_after(status, headers) == wait


def test_the_server_throttling_is_logged_at_most_once_a_second(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(100.0)
    throttle = Throttle(clock=clock)
    caplog.set_level(logging.INFO, "dispatch.adapters.kubeflow.api.throttle")
    for _ in range(5):
        throttle.throttled(2.0, 429, "POST", "https://k8s:6443/apis/x?limit=1", 0)
    clock.advance(1.0)
    throttle.throttled(3.0, 429, "POST", "https://k8s:6443/apis/y", 0)
    assert [r.getMessage() for r in caplog.records] == [
        "the API server throttles requests: POST /apis/x answered 429 with Retry-After 2s; "
        "at most 16 requests at once now (1 throttling answers so far)",
        "the API server throttles requests: POST /apis/y answered 429 with Retry-After 3s; "
        "at most 16 requests at once now (6 throttling answers so far)",
    ]
    assert throttle.stats.throttled == 6


def test_throttling_halves_the_limit_once_per_wait_and_answers_raise_it_again() -> None:
    clock = ManualClock(100.0)
    throttle = Throttle(8, clock=clock)
    for _ in range(5):  # the answers to requests sent together: one signal
        throttle.throttled(2.0, 429, "POST", "https://k8s/apis/x", 0)
    assert throttle.limit == 4
    clock.advance(2.0)  # the server still refuses after the wait it asked for
    throttle.throttled(2.0, 429, "POST", "https://k8s/apis/x", 0)
    assert throttle.limit == 2
    clock.advance(2.0)
    for _ in range(3):
        throttle.throttled(1.0, 429, "POST", "https://k8s/apis/x", 0)
        clock.advance(1.0)
    assert throttle.limit == 1  # never below one
    assert throttle.stats.lowest_limit == 1
    raised = []
    for _ in range(40):
        throttle.answered()
        raised.append(throttle.limit)
    # one more at once after about ``limit`` answers each time, up to max_in_flight
    assert raised[0] == 2 and raised[-1] == 8 and raised == sorted(raised)
    assert raised.index(5) - raised.index(4) in (4, 5)


class Holders:
    """Requests that take a slot of ``throttle`` and hold it until released, in the order
    they got their slots (``order``)."""

    def __init__(self, throttle: Throttle) -> None:
        self.throttle = throttle
        self.order: list[str] = []
        self._release: dict[str, asyncio.Event] = {}
        self.tasks: list[asyncio.Task[None]] = []

    def send(self, name: str, *, submits: bool) -> None:
        self._release[name] = asyncio.Event()
        self.tasks.append(asyncio.ensure_future(self._hold(name, submits)))

    async def _hold(self, name: str, submits: bool) -> None:
        with submitting() if submits else contextlib.nullcontext():
            async with self.throttle.slot():
                self.order.append(name)
                await self._release[name].wait()

    async def release(self, name: str) -> str | None:
        """Release ``name``'s slot; the request that took it, if any."""
        before = len(self.order)
        self._release[name].set()
        for _ in range(20):
            await asyncio.sleep(0)
        return self.order[before] if len(self.order) > before else None


def test_requests_that_follow_take_free_slots_before_those_that_submit() -> None:
    async def body() -> None:
        holders = Holders(Throttle(4))
        for i in range(4):  # a burst of starts holds every slot, more wait
            holders.send(f"start-{i}", submits=True)
        await asyncio.sleep(0)
        for i in range(4, 6):
            holders.send(f"start-{i}", submits=True)
        await asyncio.sleep(0)
        holders.send("check", submits=False)
        holders.send("log", submits=False)
        await asyncio.sleep(0)
        assert holders.order == [f"start-{i}" for i in range(4)]
        assert await holders.release("start-0") == "check"  # came after the starts waiting
        assert await holders.release("start-1") == "log"
        assert await holders.release("start-2") == "start-4"  # nothing else waits
        for name in ("start-3", "start-4", "check", "log"):
            await holders.release(name)
        assert await holders.release("start-5") is None
        await asyncio.gather(*holders.tasks)

    asyncio.run(body())


def test_submitting_requests_keep_a_quarter_of_the_slots_while_others_wait() -> None:
    async def body() -> None:
        holders = Holders(Throttle(4))  # a quarter: one slot
        for i in range(4):
            holders.send(f"check-{i}", submits=False)
        await asyncio.sleep(0)
        holders.send("start-0", submits=True)
        await asyncio.sleep(0)
        holders.send("check-4", submits=False)
        await asyncio.sleep(0)
        # no start in flight: the first start waiting goes, though a check waits too
        assert await holders.release("check-0") == "start-0"
        holders.send("start-1", submits=True)
        await asyncio.sleep(0)
        holders.send("check-5", submits=False)
        await asyncio.sleep(0)
        assert await holders.release("check-1") == "check-4"
        # one start in flight is its share: the check that waited after it goes first
        assert await holders.release("check-2") == "check-5"
        for name in ("check-3", "check-4", "check-5", "start-0", "start-1"):
            await holders.release(name)
        await asyncio.gather(*holders.tasks)

    asyncio.run(body())


def test_the_cluster_setting_max_in_flight() -> None:
    assert settings_from_mapping({}).max_in_flight == 32
    assert settings_from_mapping({"maxInFlight": 4}).max_in_flight == 4
    for wrong in (0, -1, 2.5, True, "8"):
        with pytest.raises(ConfigError, match="`maxInFlight` must be a positive whole number"):
            settings_from_mapping({"maxInFlight": wrong}, cluster="kf")


# --- over HTTP --------------------------------------------------------------------------------


def test_a_create_answered_429_is_sent_again_after_the_wait_and_made_once(emu: Emulator) -> None:
    rule = emu.faults.add(
        FaultRule(verb="create", resource="trainjobs", status=429, retry_after=3, times=2)
    )
    clock = ManualClock(100.0)

    async def body(session: Session, connection: Connection) -> Throttle:
        created = await session.create(TRAINJOBS, trainjob("one"), NS)
        assert created["metadata"]["name"] == "one"
        return connection.throttle

    throttle = with_session(emu, body, clock=clock)
    assert rule.hits == 2
    assert emu.requests().count("create", "trainjobs") == 3  # 429, 429, created
    assert stored(emu, "one") == ["one"]
    stats = throttle.stats
    assert (stats.throttled, stats.retries, stats.gave_up) == (2, 2, 0)
    assert stats.waited == 6.0  # Retry-After: 3, twice
    assert clock.now() == 106.0


def test_after_max_retries_the_429_is_raised_as_scheduler_unavailable_with_its_delay(
    emu: Emulator,
) -> None:
    emu.faults.add(FaultRule(verb="create", resource="trainjobs", status=429, retry_after=2))

    async def body(session: Session, connection: Connection) -> Throttle:
        with pytest.raises(SchedulerUnavailable) as raised:
            await session.create(TRAINJOBS, trainjob("never"), NS)
        assert raised.value.delay == 2.0
        assert "429" in str(raised.value)
        return connection.throttle

    throttle = with_session(emu, body, clock=ManualClock(100.0))
    assert emu.requests().count("create", "trainjobs") == MAX_RETRIES + 1
    assert stored(emu, "never") == []
    stats = throttle.stats
    assert (stats.throttled, stats.retries, stats.gave_up) == (MAX_RETRIES + 1, MAX_RETRIES, 1)


def test_while_a_request_waits_out_its_429_the_others_are_sent(emu: Emulator) -> None:
    emu.faults.add(
        FaultRule(verb="create", resource="trainjobs", status=429, retry_after=2, times=1)
    )
    clock = VirtualClock()

    async def body(session: Session, connection: Connection) -> Throttle:
        first = asyncio.create_task(session.create(TRAINJOBS, trainjob("first"), NS))
        await until(lambda: clock.sleeps == [2.0])  # throttled: it waits, holding no slot
        await session.create(TRAINJOBS, trainjob("second"), NS)  # sent, and made, meanwhile
        assert stored(emu, "first") == []
        assert connection.throttle.limit == 16  # halved, from 32
        clock.advance(2.0)
        await first
        return connection.throttle

    throttle = with_session(emu, body, clock=clock)
    assert emu.requests().count("create", "trainjobs") == 3
    assert stored(emu, "first") == ["first"]
    assert stored(emu, "second") == ["second"]
    stats = throttle.stats
    assert (stats.throttled, stats.retries, stats.waited) == (1, 1, 2.0)


def test_max_in_flight_bounds_the_requests_the_server_handles_at_once(emu: Emulator) -> None:
    wall = ConcurrentLatency(0.15)
    server = emu.cluster.server
    emu.call(lambda: setattr(server, "wall", wall))
    emu.faults.add(FaultRule(verb="get", resource="trainjobs", latency=wall.seconds))

    async def body(session: Session, connection: Connection) -> Throttle:
        found = await asyncio.gather(*(session.get(TRAINJOBS, f"j{i}", NS) for i in range(6)))
        assert found == [None] * 6
        return connection.throttle

    throttle = with_session(emu, body, max_in_flight=2)
    assert emu.requests().count("get", "trainjobs") == 6
    assert wall.peak == 2
    assert throttle.stats.peak_in_flight == 2


def test_a_list_answered_429_is_sent_again(emu: Emulator) -> None:
    emu.create(trainjob("listed"))
    rule = emu.faults.add(
        FaultRule(verb="list", resource="trainjobs", status=429, retry_after=1, times=1)
    )

    async def body(session: Session, connection: Connection) -> Any:
        return await list_raw(session, TRAINJOBS, NS), connection.throttle

    listed, throttle = with_session(emu, body, clock=ManualClock(100.0))
    assert [o["metadata"]["name"] for o in listed["items"]] == ["listed"]
    assert rule.hits == 1
    assert emu.requests().count("list", "trainjobs") == 2
    assert (throttle.stats.retries, throttle.stats.waited) == (1, 1.0)


def test_an_open_watch_keeps_no_slot(emu: Emulator) -> None:
    async def follow(session: Session) -> None:
        events: AsyncIterator[Any] = watch_raw(
            session, TRAINJOBS, NS, label_selector="", resource_version="", timeout_seconds=60
        )
        async for _ in events:
            pass

    async def body(session: Session, connection: Connection) -> Throttle:
        watches = [asyncio.create_task(follow(session)) for _ in range(3)]
        try:
            await until(lambda: emu.requests().open_watch_total == 3)
            assert await session.get(TRAINJOBS, "absent", NS) is None
        finally:
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
        return connection.throttle

    throttle = with_session(emu, body, max_in_flight=2)
    assert throttle.stats.sent == 4
    assert throttle.stats.peak_in_flight <= 2


# --- the proxy, chosen once -------------------------------------------------------------------


class Relay:
    """A loopback HTTP forward proxy: each connection is piped to the emulator unchanged (an
    HTTP/1.1 server takes the absolute-form request line a client sends to its proxy)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.connections = 0
        self.lines: list[bytes] = []
        self.server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        first = await reader.readline()
        self.lines.append(first)
        upstream_writer.write(first)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while chunk := await src.read(65536):
                    dst.write(chunk)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


@pytest.mark.parametrize("bypassed", [False, True])
def test_the_proxy_of_the_environment_is_chosen_once_and_no_proxy_honoured(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch, bypassed: bool
) -> None:
    """As client-go: ``HTTP(S)_PROXY`` and ``NO_PROXY`` are read when the client is made (not
    in a thread at every request, with ``~/.netrc`` read each time), and honoured."""
    config = yaml.safe_load(Path(emu.kubeconfig).read_text())
    server = urlsplit(config["clusters"][0]["cluster"]["server"])
    assert server.scheme == "http" and server.hostname and server.port

    async def scenario() -> tuple[int, list[bytes], bool]:
        relay = Relay((server.hostname, server.port))
        async with relay as proxy:
            for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
                monkeypatch.setenv(name, proxy)
            monkeypatch.setenv("NO_PROXY", "127.0.0.1" if bypassed else "")
            monkeypatch.delenv("no_proxy", raising=False)
            connection = Connection(emu.kubeconfig)
            async with connection.session() as session:
                for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
                    monkeypatch.delenv(name)  # read once: later requests need it no more
                await session.create(TRAINJOBS, trainjob("via"), NS)
                assert await session.get(TRAINJOBS, "via", NS) is not None
                trusts = session.api.rest_client.pool_manager.trust_env
            await connection.aclose()
            return relay.connections, relay.lines, trusts

    connections, lines, trusts = asyncio.run(scenario())
    assert trusts is False
    assert stored(emu, "via") == ["via"]
    if bypassed:
        assert connections == 0
    else:
        assert connections >= 1
        assert lines[0].startswith(b"POST http://") and b"/trainjobs" in lines[0]


def test_a_plain_body_is_sent_as_it_is_and_models_are_still_converted() -> None:
    import datetime

    from kubernetes_asyncio import client

    from dispatch.adapters.kubeflow.api.throttle import ThrottledApiClient

    async def made() -> ThrottledApiClient:  # its session needs a running loop
        return ThrottledApiClient(client.Configuration(host="http://127.0.0.1:1"), Throttle())

    loop = asyncio.new_event_loop()
    api = loop.run_until_complete(made())
    plain = trainjob("a")
    assert api.sanitize_for_serialization(plain) is plain
    meta = client.V1ObjectMeta(name="a", labels={"x": "y"})
    when = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    mixed = {"metadata": meta, "at": [when], "n": 1}
    assert api.sanitize_for_serialization(mixed) == {
        "metadata": {"name": "a", "labels": {"x": "y"}},
        "at": ["2026-01-01T00:00:00+00:00"],
        "n": 1,
    }
    loop.run_until_complete(api.close())
    loop.close()

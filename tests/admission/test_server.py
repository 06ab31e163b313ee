"""The guard's HTTPS server over real TLS on loopback: decisions, health, bad requests,
certificate reload, the Event of a refused resume (written to the emulator), shutdown."""

from __future__ import annotations

import asyncio
import io
import json
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes_asyncio")

import aiohttp
from cryptography import x509

from dispatch.adapters.kubeflow.admission.certs import CertFiles, issue
from dispatch.adapters.kubeflow.admission.contract import (
    EVENT_RESUME_REFUSED,
    PATH_IDENTITY,
    PATH_RUNTIMES,
)
from dispatch.adapters.kubeflow.admission.server import MAX_BODY, JsonLog, ServeOptions, serve
from dispatch.adapters.kubeflow.api.client import Connection
from dispatch.testing.k8s import ClusterConfig, Emulator
from tests.admission.conftest import KUEUE_USER, request, review, trainjob, with_suspend


@dataclass
class Running:
    port: int
    out: io.StringIO
    ca: Path

    def lines(self, event: str | None = None) -> list[dict[str, Any]]:
        found = [json.loads(line) for line in self.out.getvalue().splitlines()]
        return [line for line in found if event is None or line["event"] == event]

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def client(self) -> aiohttp.ClientSession:
        context = ssl.create_default_context(cafile=str(self.ca))
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context))


@asynccontextmanager
async def running(options: ServeOptions, ca: Path) -> AsyncIterator[Running]:
    out, stopped = io.StringIO(), asyncio.Event()
    task = asyncio.create_task(serve(options, log=JsonLog(out), stopped=stopped, signals=False))
    here = Running(0, out, ca)
    for _ in range(200):
        starts = here.lines("start") if out.getvalue() else []
        if starts or task.done():
            break
        await asyncio.sleep(0.02)
    if task.done():
        task.result()
    here.port = here.lines("start")[0]["port"]
    try:
        yield here
    finally:
        stopped.set()
        await asyncio.wait_for(task, 20)


def options(pair: CertFiles, **more: Any) -> ServeOptions:
    return ServeOptions(pair.cert, pair.key, address="127.0.0.1", port=0, **more)


def refused_resume(dry_run: bool = False, namespace: str = "ml") -> dict[str, Any]:
    old = trainjob(suspend=True, ended="preempted")
    old["metadata"]["namespace"] = namespace
    return review(request(with_suspend(old, False), old, user=KUEUE_USER, dry_run=dry_run))


def test_decisions_over_https_on_every_path(pair: CertFiles) -> None:
    async def scenario() -> None:
        async with running(options(pair), pair.ca_cert) as server, server.client() as http:
            for path in (PATH_IDENTITY, PATH_RUNTIMES, "/validate"):
                async with http.post(server.url(path), json=refused_resume()) as answer:
                    assert answer.status == 200
                    body = await answer.json()
                assert body["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
                assert body["response"]["allowed"] is False
                assert body["response"]["status"]["code"] == 403
                assert "dispatch job train-abc, attempt 1" in body["response"]["status"]["message"]
            live = trainjob(suspend=True)
            allowed = review(request(with_suspend(live, False), live, user=KUEUE_USER))
            async with http.post(server.url(PATH_IDENTITY), json=allowed) as answer:
                assert (await answer.json())["response"]["allowed"] is True
        decisions = server.lines("decision")
        assert len(decisions) == 4
        first = decisions[0]
        assert {k: first[k] for k in ("uid", "operation", "resource", "namespace", "name", "user",
                                      "allowed", "rule")} == {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "operation": "UPDATE",
            "resource": "trainjobs", "namespace": "ml", "name": "train-abc-1",
            "user": KUEUE_USER, "allowed": False, "rule": "resume-after-end",
        }  # fmt: skip
        assert first["latency_ms"] >= 0 and "time" in first
        assert decisions[-1]["rule"] == "passed"
        assert [line["event"] for line in server.lines()][-1] == "stop"

    asyncio.run(scenario())


def test_health_readiness_and_bad_requests(pair: CertFiles) -> None:
    async def scenario() -> None:
        async with running(options(pair), pair.ca_cert) as server, server.client() as http:
            for path in ("/healthz", "/readyz"):
                async with http.get(server.url(path)) as answer:
                    assert answer.status == 200, path
            async with http.post(server.url(PATH_IDENTITY), data=b"{not json") as answer:
                assert answer.status == 400
                assert "not JSON" in (await answer.json())["error"]
            wrong = {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}
            async with http.post(server.url(PATH_IDENTITY), json=wrong) as answer:
                assert answer.status == 400
                assert "admissionReviewVersions" in (await answer.json())["error"]
            no_uid = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                      "request": {"operation": "UPDATE"}}  # fmt: skip
            async with http.post(server.url(PATH_IDENTITY), json=no_uid) as answer:
                assert answer.status == 400
            deep = b"[" * 100_000 + b"]" * 100_000
            async with http.post(server.url(PATH_IDENTITY), data=deep) as answer:
                assert answer.status == 400
            huge = b" " * (MAX_BODY + 1)
            async with http.post(server.url(PATH_IDENTITY), data=huge) as answer:
                assert answer.status == 413
            # still serving after all that
            async with http.post(server.url(PATH_IDENTITY), json=refused_resume()) as answer:
                assert answer.status == 200
        assert len(server.lines("request-refused")) == 5

    asyncio.run(scenario())


async def _serial(port: int) -> int:
    """The serial number of the certificate a new TLS connection is served."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
    return x509.load_der_x509_certificate(der).serial_number


def test_a_new_certificate_is_served_to_new_connections(pair: CertFiles) -> None:
    async def scenario() -> None:
        opts = options(pair, reload_interval=0.05)
        async with running(opts, pair.ca_cert) as server:
            assert await _serial(server.port) == pair.serial
            # a broken pair (the key of another certificate) is refused, the old one kept
            other = issue(["localhost"], pair.cert.parent.parent / "other")
            pair.key.write_bytes(other.key.read_bytes())
            await asyncio.sleep(0.5)
            assert await _serial(server.port) == pair.serial
            assert server.lines("certificate-refused")
            # a whole new pair (as cert-manager or `dispatch admission certs` writes it)
            fresh = issue(["localhost", "127.0.0.1"], pair.cert.parent)
            deadline = time.monotonic() + 10
            while await _serial(server.port) != fresh.serial and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert await _serial(server.port) == fresh.serial
            assert server.lines("certificate-reloaded")
            # and it answers over the new CA
            renewed = replace(server, ca=fresh.ca_cert)
            async with renewed.client() as http, http.get(server.url("/readyz")) as answer:
                assert answer.status == 200

    asyncio.run(scenario())


def test_a_start_without_a_usable_certificate_fails(pair: CertFiles, tmp_path: Path) -> None:
    broken = ServeOptions(pair.cert, tmp_path / "missing.key", address="127.0.0.1", port=0)
    with pytest.raises(ValueError, match="cannot load the certificate"):
        asyncio.run(serve(broken, log=JsonLog(io.StringIO()), signals=False))


def _events(emu: Emulator, namespace: str) -> list[dict[str, Any]]:
    cluster = emu.cluster
    rtype = cluster.rtype("v1", "Event")
    return emu.call(lambda: cluster.store.list(rtype, namespace).items)


def test_a_refused_resume_is_recorded_as_an_event(pair: CertFiles, tmp_path: Path) -> None:
    with Emulator(ClusterConfig(), kubeconfig=tmp_path / "kubeconfig") as emu:

        async def scenario() -> None:
            events = Connection(emu.kubeconfig)
            opts = options(pair, events=events)
            async with running(opts, pair.ca_cert) as server, server.client() as http:
                for dry_run in (True, False):
                    sent = refused_resume(dry_run=dry_run, namespace="default")
                    async with http.post(server.url(PATH_IDENTITY), json=sent) as answer:
                        assert (await answer.json())["response"]["allowed"] is False
                deadline = time.monotonic() + 10
                while not server.lines("event-written") and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            await events.aclose()
            assert len(server.lines("event-written")) == 1  # none for the dry run
            assert server.lines("stop")[0]["eventsWritten"] == 1

        asyncio.run(scenario())
        found = [e for e in _events(emu, "default") if e.get("reason") == EVENT_RESUME_REFUSED]
        assert len(found) == 1
        event = found[0]
        assert event["type"] == "Warning"
        assert event["involvedObject"] == {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "train-abc-1",
            "namespace": "default",
            "uid": "0f6c3a1e-1111-2222-3333-444455556666",
        }
        assert event["source"] == {"component": "dispatch-admission"}
        assert event["reportingComponent"] == "dispatch.dev/admission"
        assert event["count"] == 1 and event["firstTimestamp"] == event["lastTimestamp"]
        assert event["message"].startswith("TrainJob default/train-abc-1 (dispatch job train-abc")


def test_the_same_refusal_again_counts_on_one_event(pair: CertFiles, tmp_path: Path) -> None:
    """Kueue retries a refused resume with backoff: one Event, its count going up, as
    client-go's correlator aggregates; one deleted meanwhile (Event TTL) is created again."""
    with Emulator(ClusterConfig(), kubeconfig=tmp_path / "kubeconfig") as emu:

        async def refuse(times: int) -> None:
            events = Connection(emu.kubeconfig)
            opts = options(pair, events=events)
            async with running(opts, pair.ca_cert) as server, server.client() as http:
                for sent_so_far in range(1, times + 1):
                    sent = refused_resume(namespace="default")
                    async with http.post(server.url(PATH_IDENTITY), json=sent) as answer:
                        assert (await answer.json())["response"]["allowed"] is False
                    deadline = time.monotonic() + 10
                    while len(server.lines("event-written")) < sent_so_far:
                        assert time.monotonic() < deadline
                        await asyncio.sleep(0.02)
                    if sent_so_far == 2:  # the API server's Event TTL removes it
                        found = [e for e in _events(emu, "default")
                                 if e.get("reason") == EVENT_RESUME_REFUSED]  # fmt: skip
                        gone = (
                            emu.cluster.rtype("v1", "Event"),
                            "default",
                            found[0]["metadata"]["name"],
                        )
                        emu.call(lambda gone=gone: emu.cluster.store.delete(*gone))
            await events.aclose()

        asyncio.run(refuse(4))
        found = [e for e in _events(emu, "default") if e.get("reason") == EVENT_RESUME_REFUSED]
        assert [e["count"] for e in found] == [2]  # 1, 2, deleted, then 1 and 2 again
        assert found[0]["firstTimestamp"] <= found[0]["lastTimestamp"]


def test_a_failed_event_write_does_not_change_the_answer(pair: CertFiles, tmp_path: Path) -> None:
    # an API server that is not there: the Event fails, the answer is the same
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:9"}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
        "users": [{"name": "x", "user": {"token": "t"}}],
    }))  # fmt: skip

    async def scenario() -> None:
        events = Connection(kubeconfig, request_timeout=2.0)
        async with running(options(pair, events=events), pair.ca_cert) as server:
            async with server.client() as http:
                sent = refused_resume()
                async with http.post(server.url(PATH_IDENTITY), json=sent) as answer:
                    assert (await answer.json())["response"]["allowed"] is False
            deadline = time.monotonic() + 10
            while not server.lines("event-failed") and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        await events.aclose()
        assert server.lines("event-failed")
        assert server.lines("stop")[0]["eventsFailed"] == 1

    asyncio.run(scenario())

"""The exact bytes on the wire, read with the standard library (no client in between)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from dispatch.testing.k8s import Emulator
from dispatch.testing.k8s.server import metadata_only

from .conftest import trainjob

TJ = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"


def _call(
    emulator: Emulator,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        emulator.url + path, data=data, method=method, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _list(emulator: Emulator, path: str, accept: str) -> Any:
    req = urllib.request.Request(emulator.url + path, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def _watch_lines(emulator: Emulator, path: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(emulator.url + path, timeout=10) as resp:
        return [json.loads(line) for line in resp.read().splitlines()]


def test_send_initial_events_ends_with_annotated_bookmark(emulator: Emulator) -> None:
    _call(emulator, "POST", TJ, trainjob("a"))
    events = _watch_lines(
        emulator,
        TJ + "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
        "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
    )
    assert events[0]["type"] == "ADDED" and events[0]["object"]["metadata"]["name"] == "a"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_from_compacted_version_is_one_error_event(emulator: Emulator) -> None:
    _call(emulator, "POST", TJ, trainjob("a"))
    emulator.compact()
    events = _watch_lines(emulator, TJ + "?watch=true&resourceVersion=2")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith("too old resource version: 2 (")


def test_delete_answers_a_success_status(emulator: Emulator) -> None:
    _, created = _call(emulator, "POST", TJ, trainjob("a"))
    code, body = _call(emulator, "DELETE", TJ + "/a")
    assert code == 200
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": "a",
            "kind": "trainjobs",
            "uid": created["metadata"]["uid"],
            "group": "trainer.kubeflow.org",
        },
    }


def test_strategic_merge_patch_is_refused_for_custom_resources(emulator: Emulator) -> None:
    _call(emulator, "POST", TJ, trainjob("a"))
    code, body = _call(
        emulator,
        "PATCH",
        TJ + "/a",
        {"spec": {"suspend": True}},
        "application/strategic-merge-patch+json",
    )
    assert code == 415 and body["reason"] == "UnsupportedMediaType"


@pytest.mark.parametrize(
    ("path", "code"),
    [("/apis/nope/v1/things", 404), ("/api/v1/namespaces/default/pods/x/bogus", 404)],
)
def test_unknown_paths(emulator: Emulator, path: str, code: int) -> None:
    assert _call(emulator, "GET", path)[0] == code


def test_verbs_a_resource_does_not_serve_are_405(emulator: Emulator) -> None:
    code, body = _call(emulator, "GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert code == 405 and body["reason"] == "MethodNotAllowed"


METADATA = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


@pytest.mark.parametrize(
    ("accept", "partial"),
    [
        (METADATA, True),
        (METADATA.replace("g=meta.k8s.io;v=v1", "v=v1;g=meta.k8s.io") + ",application/json", True),
        ("application/json", False),
        ("application/json," + METADATA, False),  # the first acceptable range wins
        ("application/json;as=Table;g=meta.k8s.io;v=v1,application/json", False),
        ("", False),
    ],
)
def test_metadata_lists_are_served_when_asked_first(accept: str, partial: bool) -> None:
    assert metadata_only(accept) is partial


def test_a_metadata_list_pages_like_a_list_and_holds_metadata_alone(emulator: Emulator) -> None:
    for name in ("a", "b", "c"):
        _call(emulator, "POST", TJ, trainjob(name))
    first = _list(emulator, TJ + "?limit=2", METADATA)
    assert (first["kind"], first["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    assert all(set(i) == {"kind", "apiVersion", "metadata"} for i in first["items"])
    token = first["metadata"]["continue"]
    rest = _list(emulator, TJ + f"?limit=2&continue={token}", METADATA)
    assert [i["metadata"]["name"] for i in rest["items"]] == ["c"]
    whole = _list(emulator, TJ, "application/json")
    assert whole["kind"] == "TrainJobList" and "spec" in whole["items"][0]
    assert [i["metadata"] for i in first["items"] + rest["items"]] == [
        i["metadata"] for i in whole["items"]
    ]  # the same metadata, versions included


def test_clients_connecting_all_at_once_are_queued_not_dropped(emulator: Emulator) -> None:
    """While the server is too busy to accept, 400 connections wait in its accept queue.

    With aiohttp's default queue of 128, handshakes beyond it are dropped and retried a
    second or more later (here some of the 400 did not connect within 0.5 s); under a herd
    of 5,000 clients, 700 connects failed with a timeout (bench/README.md, tenth session).
    """
    import socket
    import threading
    import time

    busy = threading.Thread(target=lambda: emulator.call(lambda: time.sleep(1.5)))
    busy.start()  # the server's loop does nothing else for 1.5 s
    time.sleep(0.1)
    host, port = emulator.url.removeprefix("http://").split(":")
    queued, waiting = [], 0
    for _ in range(400):
        sock = socket.socket()
        sock.settimeout(0.5)  # a dropped handshake is retried only after a second
        try:
            sock.connect((host, int(port)))
            queued.append(sock)
        except TimeoutError:
            waiting += 1
            sock.close()
    busy.join()
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    for sock in queued:
        sock.settimeout(10)
        sock.sendall(request)
    answered = sum(1 for sock in queued if sock.recv(64).startswith(b"HTTP/1.1 200"))
    for sock in queued:
        sock.close()
    assert (len(queued), waiting, answered) == (400, 0, 400)

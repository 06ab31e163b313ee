"""API-server request semantics the emulator must share with kube-apiserver (issue 27):
``dryRun``, the ``Status`` body's field order, watches that end in 410, a watch's
``timeoutSeconds`` in real time, ``ListOptions`` validation, and server-side apply with
``managedFields``. Requests are made with the standard library, so the bytes are the server's.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch.testing.k8s import ClusterConfig, Emulator, fieldpath

from .conftest import trainjob

TJ = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def _request(
    emulator: Emulator,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        emulator.url + path, data=data, method=method, headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _call(
    emulator: Emulator,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    code, raw = _request(emulator, method, path, body, content_type)
    return code, json.loads(raw)


def _rv(emulator: Emulator) -> str:
    return str(_call(emulator, "GET", CM)[1]["metadata"]["resourceVersion"])


def _watch_lines(emulator: Emulator, path: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(emulator.url + path, timeout=20) as resp:
        return [json.loads(line) for line in resp.read().splitlines()]


def _configmap(name: str, **data: str) -> dict[str, Any]:
    cm: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    return cm | ({"data": data} if data else {})


def _entries(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


# ------------------------------------------------------------------ item 1: dryRun


def test_dry_run_create_answers_the_object_and_stores_nothing(emulator: Emulator) -> None:
    """``dryRun=All`` runs defaulting, admission and validation, answers what would be stored
    (uid and creationTimestamp set, no resourceVersion) and writes nothing: no TrainJob, so
    no JobSet, no pods, no new resourceVersion, no watch event."""
    before = _rv(emulator)
    code, created = _call(emulator, "POST", TJ + "?dryRun=All", trainjob("dry"))
    assert code == 201
    assert created["metadata"]["name"] == "dry" and created["metadata"]["uid"]
    assert "resourceVersion" not in created["metadata"]
    assert created["spec"]["suspend"] is False  # defaulted
    assert _call(emulator, "GET", TJ + "/dry")[0] == 404
    assert _rv(emulator) == before
    events = _watch_lines(emulator, f"{TJ}?watch=1&resourceVersion={before}&timeoutSeconds=1")
    assert events == []
    assert _call(emulator, "GET", JOBSETS)[1]["items"] == []
    assert _call(emulator, "GET", PODS)[1]["items"] == []
    # validation and conflicts still run
    code, invalid = _call(emulator, "POST", TJ + "?dryRun=All", trainjob("x" * 64))
    assert code == 422 and invalid["reason"] == "Invalid"
    _call(emulator, "POST", CM, _configmap("real", a="1"))
    code, exists = _call(emulator, "POST", CM + "?dryRun=All", _configmap("real"))
    assert code == 409 and exists["reason"] == "AlreadyExists"


def test_dry_run_update_patch_delete_change_nothing(emulator: Emulator) -> None:
    _, cm = _call(emulator, "POST", CM, _configmap("c", a="1"))
    rv = cm["metadata"]["resourceVersion"]
    cm["data"] = {"a": "2"}
    code, updated = _call(emulator, "PUT", CM + "/c?dryRun=All", cm)
    assert code == 200 and updated["data"] == {"a": "2"}
    assert updated["metadata"]["resourceVersion"] == rv
    code, patched = _call(emulator, "PATCH", CM + "/c?dryRun=All", {"data": {"b": "3"}}, MERGE)
    assert code == 200 and patched["data"] == {"a": "1", "b": "3"}
    code, status = _call(emulator, "DELETE", CM + "/c", {"dryRun": ["All"]})
    assert code == 200 and status["status"] == "Success"
    code, listed = _call(emulator, "DELETE", CM + "?dryRun=All")
    assert code == 200 and [i["metadata"]["name"] for i in listed["items"]] == ["c"]
    code, stored = _call(emulator, "GET", CM + "/c")
    assert code == 200 and stored["data"] == {"a": "1"}
    assert stored["metadata"]["resourceVersion"] == rv == _rv(emulator)
    # a dry-run delete of a pod the kubelet runs starts no graceful deletion either
    _call(emulator, "POST", PODS, {"metadata": {"name": "p"}, "spec": {"containers": []}})
    _call(emulator, "DELETE", PODS + "/p?dryRun=All")
    assert "deletionTimestamp" not in _call(emulator, "GET", PODS + "/p")[1]["metadata"]


def test_unknown_dry_run_value_is_invalid_options(emulator: Emulator) -> None:
    """``ValidateCreateOptions``/``ValidateDeleteOptions``: a 422 on the options kind, the
    value printed as Go's ``json.Marshal`` of the ``[]string``."""
    code, raw = _request(emulator, "POST", CM + "?dryRun=Bogus", _configmap("x"))
    assert code == 422
    assert raw.decode() == (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        '"CreateOptions.meta.k8s.io \\"\\" is invalid: dryRun: Unsupported value: '
        '[\\"Bogus\\"]: supported values: \\"All\\"","reason":"Invalid","details":'
        '{"group":"meta.k8s.io","kind":"CreateOptions","causes":[{"reason":'
        '"FieldValueNotSupported","message":"Unsupported value: [\\"Bogus\\"]: supported '
        'values: \\"All\\"","field":"dryRun"}]},"code":422}'
    )
    code, status = _call(emulator, "DELETE", CM + "/x", {"dryRun": ["All", "Later"]})
    assert code == 422
    assert status["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
        '["All","Later"]: supported values: "All"'
    )
    assert _call(emulator, "GET", CM + "/x")[0] == 404


# ------------------------------------------------------------------ item 10: Status order


def test_status_bodies_keep_the_go_struct_field_order(emulator: Emulator) -> None:
    code, raw = _request(emulator, "GET", TJ + "/nope")
    assert code == 404
    assert raw.decode() == (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        '"trainjobs.trainer.kubeflow.org \\"nope\\" not found","reason":"NotFound",'
        '"details":{"name":"nope","group":"trainer.kubeflow.org","kind":"trainjobs"},'
        '"code":404}'
    )
    _, created = _call(emulator, "POST", TJ, trainjob("a"))
    code, raw = _request(emulator, "DELETE", TJ + "/a")
    assert code == 200
    assert raw.decode() == (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":'
        '{"name":"a","group":"trainer.kubeflow.org","kind":"trainjobs","uid":"'
        + created["metadata"]["uid"]
        + '"}}'
    )


# ------------------------------------------------------------------ item 11: 410 watches


def test_expired_watch_answers_one_error_event_and_closes_its_count(emulator: Emulator) -> None:
    _call(emulator, "POST", CM, _configmap("a"))
    emulator.compact()
    events = _watch_lines(emulator, CM + "?watch=true&resourceVersion=2")
    assert [e["type"] for e in events] == ["ERROR"]
    assert list(events[0]["object"]) == [
        "kind", "apiVersion", "metadata", "status", "message", "reason", "code",
    ]  # fmt: skip
    assert (events[0]["object"]["code"], events[0]["object"]["reason"]) == (410, "Expired")
    deadline = time.monotonic() + 5
    while emulator.open_watches() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert emulator.open_watches() == 0
    assert emulator.requests().watches_started == 1


# ------------------------------------------------------------------ item 13b: watch timeout


@pytest.fixture
def fast_emulator(tmp_path: Path) -> Iterator[Emulator]:
    with Emulator(ClusterConfig(time_scale=60), kubeconfig=tmp_path / "kubeconfig") as emu:
        yield emu


def test_watch_timeout_seconds_are_real_seconds(fast_emulator: Emulator) -> None:
    """At 60 emulated seconds per real one, ``timeoutSeconds=1`` still lasts a real second."""
    started = time.monotonic()
    _watch_lines(fast_emulator, CM + "?watch=1&timeoutSeconds=1")
    assert 0.9 <= time.monotonic() - started < 5


# ------------------------------------------------------------------ item 14a: ListOptions


def _invalid_list(emulator: Emulator, query: str) -> str:
    code, status = _call(emulator, "GET", CM + "?" + query)
    assert code == 422 and status["details"]["kind"] == "ListOptions", status
    return str(status["message"])


def test_list_options_are_validated_as_kube_apiserver_does(emulator: Emulator) -> None:
    prefix = 'ListOptions.meta.k8s.io "" is invalid: '
    assert _invalid_list(emulator, "watch=1&sendInitialEvents=true") == prefix + (
        "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
        "resourceVersionMatch to NotOlderThan"
    )
    assert _invalid_list(
        emulator, "watch=1&sendInitialEvents=true&resourceVersionMatch=Exact"
    ) == prefix + (
        "[resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
        "resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "
        '"Exact": supported values: "NotOlderThan"]'
    )
    assert _invalid_list(emulator, "watch=1&resourceVersionMatch=NotOlderThan") == prefix + (
        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
        "unless sendInitialEvents is provided"
    )
    assert _invalid_list(emulator, "sendInitialEvents=true") == prefix + (
        "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
    )
    assert _invalid_list(emulator, "resourceVersion=1&resourceVersionMatch=Newest") == prefix + (
        'resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", '
        '"NotOlderThan", ""'
    )
    assert _invalid_list(emulator, "resourceVersionMatch=NotOlderThan") == prefix + (
        "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
        "resourceVersion is provided"
    )
    code, _ = _call(emulator, "GET", CM + "?resourceVersion=0&resourceVersionMatch=NotOlderThan")
    assert code == 200
    events = _watch_lines(
        emulator,
        CM + "?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&timeoutSeconds=1",
    )
    assert all(e["type"] == "BOOKMARK" for e in events)


# ------------------------------------------------------------------ item 12: server-side apply


def _apply(
    emulator: Emulator, name: str, manager: str, force: bool = False, **data: str
) -> tuple[int, Any]:
    query = f"?fieldManager={manager}" + ("&force=true" if force else "")
    return _call(emulator, "PATCH", f"{CM}/{name}{query}", _configmap(name, **data), APPLY)


def test_writes_record_managed_fields_by_manager(emulator: Emulator) -> None:
    """Create and update record ``Update`` entries: ``fieldManager``, else the user agent's
    prefix (urllib sends ``Python-urllib/3.x``), each with the fields it set."""
    _, cm = _call(emulator, "POST", CM + "?fieldManager=creator", _configmap("m", a="1"))
    (entry,) = cm["metadata"]["managedFields"]
    assert list(entry) == ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == (
        "creator",
        "Update",
        "v1",
    )
    assert entry["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}
    _, patched = _call(emulator, "PATCH", CM + "/m", {"data": {"b": "2"}}, MERGE)
    entries = _entries(patched)
    assert entries["Python-urllib", "Update"]["fieldsV1"] == {"f:data": {"f:b": {}}}
    assert entries["creator", "Update"]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}}}


def test_apply_conflicts_forces_and_removes_what_it_no_longer_applies(
    emulator: Emulator,
) -> None:
    code, first = _apply(emulator, "s", "a", x="1", y="1")
    assert code == 201
    assert _entries(first)["a", "Apply"]["fieldsV1"] == {"f:data": {"f:x": {}, "f:y": {}}}
    code, status = _apply(emulator, "s", "b", x="2")
    assert code == 409
    assert status["message"] == 'Apply failed with 1 conflict: conflict with "a": .data.x'
    assert status["details"] == {
        "causes": [
            {"reason": "FieldManagerConflict", "message": 'conflict with "a"', "field": ".data.x"}
        ]
    }
    # the same value is no conflict: the field is then shared
    code, shared = _apply(emulator, "s", "b", y="1")
    assert code == 200 and shared["data"] == {"x": "1", "y": "1"}
    # force takes the field over
    code, forced = _apply(emulator, "s", "b", force=True, x="2", y="1")
    assert code == 200 and forced["data"] == {"x": "2", "y": "1"}
    entries = _entries(forced)
    assert entries["a", "Apply"]["fieldsV1"] == {"f:data": {"f:y": {}}}
    assert entries["b", "Apply"]["fieldsV1"] == {"f:data": {"f:x": {}, "f:y": {}}}
    # what b no longer applies goes, unless another manager still owns it
    code, pruned = _apply(emulator, "s", "b")
    assert code == 200 and pruned["data"] == {"y": "1"}
    code, emptied = _apply(emulator, "s", "a")
    assert code == 200 and "data" not in emptied
    assert _entries(emptied) == {}


def test_apply_conflicts_with_an_update_manager_and_before_first_apply(
    emulator: Emulator,
) -> None:
    _call(emulator, "POST", CM + "?fieldManager=kubectl-client-side-apply", _configmap("u", x="1"))
    code, status = _apply(emulator, "u", "ssa", x="2")
    assert code == 409
    assert status["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.x'
    )
    # an object written without managed fields: its fields belong to before-first-apply
    emulator.create(_configmap("internal", x="1", z="1"))
    code, status = _apply(emulator, "internal", "ssa", x="2", z="2")
    assert code == 409
    assert status["message"] == (
        'Apply failed with 2 conflicts: conflicts with "before-first-apply" using v1:\n'
        "- .data.x\n- .data.z"
    )


def test_a_no_op_apply_writes_nothing(emulator: Emulator) -> None:
    _, first = _apply(emulator, "n", "a", x="1")
    _, again = _apply(emulator, "n", "a", x="1")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    code, status = _call(
        emulator,
        "PATCH",
        CM + "/n?fieldManager=a",
        {**_configmap("n"), "metadata": {"name": "n", "managedFields": []}},
        APPLY,
    )
    assert (code, status["message"]) == (400, "metadata.managedFields must be nil")
    code, status = _call(emulator, "PATCH", CM + "/n?force=true", {"data": {}}, MERGE)
    assert code == 422
    assert status["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for '
        "non-apply patch"
    )


def test_associative_lists_merge_and_are_owned_by_key() -> None:
    """Containers merge by name, ports by ``containerPort`` and ``protocol``; tolerations and
    args are atomic: one field each."""
    live = {
        "spec": {
            "containers": [{"name": "a", "image": "i", "args": ["x"]}],
            "tolerations": [{"key": "k"}],
        }
    }
    config = {
        "spec": {
            "containers": [{"name": "b", "image": "j", "ports": [{"containerPort": 80}]}],
            "tolerations": [{"key": "t"}],
        }
    }
    merged = fieldpath.merge(live, config)
    assert [c["name"] for c in merged["spec"]["containers"]] == ["a", "b"]
    assert merged["spec"]["tolerations"] == [{"key": "t"}]
    owned = fieldpath.to_fields_v1(fieldpath.field_set(config))
    assert owned == {
        "f:spec": {
            "f:containers": {
                'k:{"name":"b"}': {
                    ".": {},
                    "f:image": {},
                    "f:name": {},
                    "f:ports": {
                        'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}
                    },
                }
            },
            "f:tolerations": {},
        }
    }
    paths = fieldpath.from_fields_v1(owned)
    assert fieldpath.to_fields_v1(paths) == owned
    assert (
        fieldpath.path_text(("f:spec", "f:containers", 'k:{"name":"b"}', "f:image"))
        == '.spec.containers[name="b"].image'
    )

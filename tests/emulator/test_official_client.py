"""The official ``kubernetes`` client, unmodified, against the emulator."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from dispatch.testing.k8s import Emulator  # noqa: E402

from .conftest import pod, trainjob  # noqa: E402

TRAINER = ("trainer.kubeflow.org", "v1alpha1")


@pytest.fixture
def api(emulator: Emulator) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(str(emulator.kubeconfig))
    yield api_client
    api_client.close()


def _status(exc: ApiException) -> dict[str, object]:
    body: dict[str, object] = json.loads(exc.body)
    return body


def test_discovery_and_version(api: client.ApiClient) -> None:
    assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"batch", "jobset.x-k8s.io", "trainer.kubeflow.org", "kueue.x-k8s.io"} <= groups
    resources = client.CustomObjectsApi(api).get_api_resources(*TRAINER).resources
    by_name = {r.name: r for r in resources}
    assert by_name["trainjobs"].namespaced and by_name["trainjobs"].kind == "TrainJob"
    assert "trainjobs/status" in by_name
    assert not by_name["clustertrainingruntimes"].namespaced


def test_default_namespace_and_nodes_exist(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    assert [n.metadata.name for n in core.list_namespace().items] == ["default"]
    nodes = core.list_node().items
    assert [n.metadata.name for n in nodes] == ["node-1", "node-2"]
    assert nodes[0].status.conditions[0].type == "Ready"


def test_pod_crud_conflict_and_not_found(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_pod("default", pod("p1", {"app": "a"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", pod("p1"))
    assert exc.value.status == 409 and _status(exc.value)["reason"] == "AlreadyExists"
    created.metadata.labels["app"] = "b"
    updated = core.replace_namespaced_pod("p1", "default", created)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    created.metadata.labels["app"] = "c"  # stale resourceVersion
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_pod("p1", "default", created)
    status = _status(exc.value)
    assert exc.value.status == 409 and status["reason"] == "Conflict"
    assert "the object has been modified" in str(status["message"])
    core.delete_namespaced_pod("p1", "default")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("p1", "default")
    assert exc.value.status == 404
    assert _status(exc.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "p1" not found',
        "reason": "NotFound",
        "details": {"name": "p1", "kind": "pods"},
        "code": 404,
    }


def test_unknown_namespace_is_404(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api).create_namespaced_config_map(
            "nope", {"metadata": {"name": "c"}, "data": {}}
        )
    assert exc.value.status == 404
    assert _status(exc.value)["message"] == 'namespaces "nope" not found'


def test_generate_name_and_generation(api: client.ApiClient) -> None:
    batch = client.BatchV1Api(api)
    job = {
        "metadata": {"generateName": "job-"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}],
                }
            }
        },
    }
    created = batch.create_namespaced_job("default", job)
    name = created.metadata.name
    assert name.startswith("job-") and len(name) == len("job-") + 5
    assert created.metadata.generation == 1
    labelled = batch.patch_namespaced_job(name, "default", {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1  # metadata is not spec
    suspended = batch.patch_namespaced_job(name, "default", {"spec": {"suspend": True}})
    assert suspended.metadata.generation == 2
    status = batch.patch_namespaced_job_status(name, "default", {"status": {"active": 3}})
    assert status.metadata.generation == 2 and status.status.active == 3


def test_custom_objects_status_subresource(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    body = trainjob("tj1")
    body["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    created = custom.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", body)
    assert "status" not in created  # status is not set on create
    # a status write changes only the status
    with_status = custom.patch_namespaced_custom_object_status(
        *TRAINER,
        "default",
        "trainjobs",
        "tj1",
        {
            "status": {
                "conditions": [
                    {
                        "type": "Suspended",
                        "status": "True",
                        "reason": "Suspended",
                        "message": "m",
                        "lastTransitionTime": "2025-01-01T00:00:00Z",
                    }
                ]
            },
            "spec": {"suspend": True},
        },
    )
    assert with_status["status"]["conditions"][0]["type"] == "Suspended"
    assert (
        with_status["spec"]["suspend"] is False
    )  # the CRD default; the status write's True is ignored
    assert with_status["metadata"]["generation"] == 1
    # a main-resource write ignores status
    with_status["status"] = {}
    with_status["spec"]["suspend"] = True
    replaced = custom.replace_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", "tj1", with_status
    )
    assert replaced["spec"]["suspend"] is True and replaced["metadata"]["generation"] == 2
    assert replaced["status"]["conditions"][0]["type"] == "Suspended"


def test_patch_types(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", pod("p", containers=("a", "b")))
    # the official client sends a dict body as strategic merge patch for built-in types:
    # containers merge by name
    patched = core.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "b", "image": "x"}]}}
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [("a", "busybox"), ("b", "x")]
    # a list body is a JSON patch
    patched = core.patch_namespaced_pod(
        "p",
        "default",
        [
            {"op": "add", "path": "/metadata/labels/k", "value": "v"},
            {"op": "replace", "path": "/spec/containers/0/image", "value": "y"},
        ],
    )
    assert patched.metadata.labels == {"k": "v"} and patched.spec.containers[0].image == "y"
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", trainjob("tj"))
    merged = custom.patch_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", "tj", {"metadata": {"labels": {"a": "1"}}}
    )
    assert merged["metadata"]["labels"] == {"a": "1"}
    removed = custom.patch_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", "tj", {"metadata": {"labels": {"a": None}}}
    )
    assert removed["metadata"].get("labels") == {}


def test_trainjob_invalid_name_gives_422_with_causes(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", trainjob("1bad"))
    status = _status(exc.value)
    assert exc.value.status == 422 and status["reason"] == "Invalid"
    assert status["details"] == {
        "name": "1bad",
        "group": "trainer.kubeflow.org",
        "kind": "TrainJob",
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "object": metadata.name must match RFC 1035 DNS label format',
                "field": "<nil>",
            }
        ],
    }
    assert status["message"] == (
        'TrainJob.trainer.kubeflow.org "1bad" is invalid: <nil>: Invalid value: "object": '
        "metadata.name must match RFC 1035 DNS label format"
    )


def test_trainjob_schema_and_immutability(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    bad = trainjob("x" * 64, suspend="yes")
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", bad)
    causes = {(c["field"], c["reason"]) for c in _status(exc.value)["details"]["causes"]}
    assert ("spec.suspend", "FieldValueInvalid") in causes
    assert ("<nil>", "FieldValueInvalid") in causes  # > 63 characters
    custom.create_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", trainjob("ok", trainer={"numNodes": 2})
    )
    with pytest.raises(ApiException) as exc:
        custom.patch_namespaced_custom_object(
            *TRAINER, "default", "trainjobs", "ok", {"spec": {"trainer": {"numNodes": 3}}}
        )
    assert exc.value.status == 422
    assert _status(exc.value)["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": field is immutable',
            "field": "spec.trainer",
        }
    ]
    # suspend stays mutable
    custom.patch_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", "ok", {"spec": {"suspend": True}}
    )


def test_label_and_field_selectors(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    for name, labels in [("a", {"app": "x", "tier": "1"}), ("b", {"app": "y"}), ("c", {})]:
        core.create_namespaced_pod("default", pod(name, labels))
    core.patch_namespaced_pod_status("b", "default", {"status": {"phase": "Running"}})

    def names(**kw: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod("default", **kw).items]

    assert names(label_selector="app=x") == ["a"]
    assert names(label_selector="app==x") == ["a"]
    assert names(label_selector="app!=x") == ["b", "c"]
    assert names(label_selector="app in (x,y)") == ["a", "b"]
    assert names(label_selector="app notin (x)") == ["b", "c"]
    assert names(label_selector="app") == ["a", "b"]
    assert names(label_selector="!app") == ["c"]
    assert names(label_selector="app,tier=1") == ["a"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector="status.phase=Running") == ["b"]
    assert names(field_selector="status.phase!=Running") == ["a", "c"]
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod("default", field_selector="spec.bogus=1")
    assert exc.value.status == 400


def test_list_pagination(api: client.ApiClient) -> None:
    cm = client.CoreV1Api(api)
    for i in range(5):
        cm.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
    first = cm.list_namespaced_config_map("default", limit=2)
    assert [c.metadata.name for c in first.items] == ["c0", "c1"]
    assert first.metadata._continue and first.metadata.remaining_item_count == 3
    rest = cm.list_namespaced_config_map("default", limit=10, _continue=first.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["c2", "c3", "c4"]
    assert not rest.metadata._continue


def test_watch_from_resource_version_with_bookmarks(
    api: client.ApiClient, emulator: Emulator
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", {"metadata": {"name": "before"}})
    rv = core.list_namespaced_config_map("default").metadata.resource_version

    def writer() -> None:
        core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
        core.patch_namespaced_config_map("after", "default", {"data": {"k": "v"}})
        core.delete_namespaced_config_map("after", "default")

    threading.Timer(0.3, writer).start()
    seen: list[tuple[str, str]] = []
    bookmarks = 0
    w = watch.Watch()
    for event in w.stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=5,
    ):
        if event["type"] == "BOOKMARK":
            bookmarks += 1
            if len(seen) == 3:
                w.stop()
            continue
        seen.append((event["type"], event["object"].metadata.name))
    assert seen == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]
    assert bookmarks >= 1


def test_watch_too_old_resource_version_is_410(api: client.ApiClient, emulator: Emulator) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
    old = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "b"}})
    emulator.compact()
    with pytest.raises(ApiException) as exc:
        for _ in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=5
        ):
            pass
    assert exc.value.status == 410


def test_cascading_deletion(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    owner = custom.create_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", trainjob("own")
    )
    ref = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": "own",
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    core.create_namespaced_config_map(
        "default", {"metadata": {"name": "child", "ownerReferences": [ref]}}
    )
    # background (the default for custom resources): owner gone at once, then the dependent
    custom.delete_namespaced_custom_object(*TRAINER, "default", "trainjobs", "own")
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == []
    # foreground: the owner waits (finalizer) until blocking dependents are gone
    owner = custom.create_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", trainjob("own")
    )
    ref["uid"] = owner["metadata"]["uid"]
    core.create_namespaced_config_map(
        "default",
        {
            "metadata": {
                "name": "held",
                "finalizers": ["example.com/hold"],
                "ownerReferences": [ref],
            }
        },
    )
    custom.delete_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", "own", propagation_policy="Foreground"
    )
    pending = custom.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "own")
    assert pending["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert pending["metadata"]["deletionTimestamp"]
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as exc:
        custom.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "own")
    assert exc.value.status == 404


def test_batch_jobs_orphan_pods_by_default(api: client.ApiClient) -> None:
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    job = batch.create_namespaced_job(
        "default",
        {
            "metadata": {"name": "j"},
            "spec": {
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
                }
            },
        },
    )
    ref = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    core.create_namespaced_pod(
        "default", {**pod("j-0"), "metadata": {"name": "j-0", "ownerReferences": [ref]}}
    )
    batch.delete_namespaced_job("j", "default")  # batch/v1 Jobs orphan their pods by default
    left = core.read_namespaced_pod("j-0", "default")
    assert left.metadata.owner_references is None


def test_pod_log_and_follow(api: client.ApiClient, emulator: Emulator) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", pod("p"))
    emulator.append_log("default", "p", "node", "line 1\nline 2")
    assert core.read_namespaced_pod_log("p", "default") == "line 1\nline 2\n"
    assert core.read_namespaced_pod_log("p", "default", tail_lines=1) == "line 2\n"

    def later() -> None:
        emulator.append_log("default", "p", "node", "line 3")
        emulator.finish_log("default", "p", "node")

    threading.Timer(0.3, later).start()
    resp = core.read_namespaced_pod_log("p", "default", follow=True, _preload_content=False)
    lines = [line.decode() for line in resp.stream()]
    assert "".join(lines) == "line 1\nline 2\nline 3\n"


def test_self_subject_access_review(api: client.ApiClient, emulator: Emulator) -> None:
    authz = client.AuthorizationV1Api(api)

    def allowed(verb: str, resource: str) -> bool:
        review = authz.create_self_subject_access_review(
            {
                "spec": {
                    "resourceAttributes": {
                        "verb": verb,
                        "group": "trainer.kubeflow.org",
                        "resource": resource,
                        "namespace": "default",
                    }
                }
            }
        )
        return bool(review.status.allowed)

    assert allowed("create", "trainjobs")
    emulator.authorizer.deny("create", "trainjobs")
    assert not allowed("create", "trainjobs") and allowed("list", "trainjobs")
    with pytest.raises(ApiException) as exc:
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            *TRAINER, "default", "trainjobs", trainjob("t")
        )
    assert exc.value.status == 403

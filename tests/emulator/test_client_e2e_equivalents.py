"""The behaviours the official ``kubernetes`` client's own end-to-end tests check
(kubernetes-client/python: ``kubernetes/e2e_test`` and the dynamic client's tests), written
here for the APIs the emulator serves and run against ``dispatch emulator`` as a subprocess.
Their pass/fail on the emulator is recorded in docs/design/0009-emulator-fidelity.md; these
tests are ours, not their code."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config, watch  # noqa: E402
from kubernetes.dynamic import DynamicClient  # noqa: E402

from .emulator_process import EmulatorProcess, emulator_process  # noqa: E402

NS = "default"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorProcess]:
    with emulator_process(tmp_path_factory.mktemp("e2e"), "--time-scale", "20") as emu:
        yield emu


@pytest.fixture
def api(emulator: EmulatorProcess) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(str(emulator.kubeconfig))
    yield api_client
    api_client.close()


def _configmap(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"e2e-tests": "true"}},
        "data": data,
    }


def test_configmap_json_patch_replaces_data_and_merge_patch_adds(api: client.ApiClient) -> None:
    """test_client.py::test_configmap_apis."""
    core = client.CoreV1Api(api)
    name = _name("cm")
    created = core.create_namespaced_config_map(NS, _configmap(name, a="1", b="2"))
    assert created.metadata.name == name
    replaced = core.patch_namespaced_config_map(
        name, NS, [{"op": "replace", "path": "/data", "value": {"new": "json"}}]
    )
    assert replaced.data == {"new": "json"}
    merged = core.patch_namespaced_config_map(name, NS, {"data": {"new": "merge"}})
    assert merged.data == {"new": "merge"}
    core.delete_namespaced_config_map(name, NS, body={})
    assert core.list_namespaced_config_map(NS, label_selector="e2e-tests=true").items == []


def test_watch_from_a_list_sees_every_later_change(api: client.ApiClient) -> None:
    """test_watch.py::test_watch_configmaps: a watch from a list's resourceVersion sees the
    creation, the patch and both deletions of a delete-collection, then ends at its timeout."""
    core = client.CoreV1Api(api)
    first = _name("cm-a")
    core.create_namespaced_config_map(NS, _configmap(first, config="a"))
    rv = core.list_namespaced_config_map(NS, label_selector="e2e-tests=true").metadata
    second = _name("cm-b")
    core.create_namespaced_config_map(NS, _configmap(second, config="b"))
    core.patch_namespaced_config_map(second, NS, _configmap(second, config="{}"))
    core.delete_collection_namespaced_config_map(NS, label_selector="e2e-tests=true")
    seen = [
        (event["type"], event["object"].metadata.name)
        for event in watch.Watch().stream(
            core.list_namespaced_config_map,
            namespace=NS,
            resource_version=rv.resource_version,
            timeout_seconds=2,
            label_selector="e2e-tests=true",
        )
    ]
    assert seen[:2] == [("ADDED", second), ("MODIFIED", second)]
    assert sorted(seen[2:]) == [("DELETED", first), ("DELETED", second)]


def test_nodes_and_their_metadata_only_list(api: client.ApiClient) -> None:
    """test_client.py::test_node_apis and the dynamic client's partial-object-metadata test
    (header names are case-insensitive)."""
    core = client.CoreV1Api(api)
    for item in core.list_node().items:
        assert core.read_node(item.metadata.name).metadata.labels
    nodes = DynamicClient(api).resources.get(api_version="v1", kind="Node")
    for header in ("Accept", "aCcePt"):
        accept = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        listed = nodes.get(header_params={header: accept})
        assert (listed.kind, listed.apiVersion) == ("PartialObjectMetadataList", "meta.k8s.io/v1")


def test_job_round_trip_and_delete_answer(api: client.ApiClient) -> None:
    """test_batch.py::test_job_apis: the spec reads back as written; a delete with
    propagationPolicy answers the Job (still being deleted) or a Success Status naming it."""
    batch = client.BatchV1Api(api)
    name = _name("job")
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"name": name},
                "spec": {
                    "containers": [
                        {"name": name, "image": "busybox", "command": ["sh", "-c", "sleep 5"]}
                    ],
                    "restartPolicy": "Never",
                },
            }
        },
    }
    assert batch.create_namespaced_job(NS, manifest).metadata.name == name
    read = batch.read_namespaced_job(name, NS)
    container = read.spec.template.spec.containers[0]
    assert (container.name, container.image, container.command) == (
        name,
        "busybox",
        ["sh", "-c", "sleep 5"],
    )
    assert read.spec.template.spec.restart_policy == "Never"
    deleted = batch.delete_namespaced_job(name, NS, body={"propagationPolicy": "Background"})
    answer = deleted.to_dict() if hasattr(deleted, "to_dict") else deleted
    assert answer.get("kind") in ("Job", "Status", None)
    if answer.get("status") == "Success":
        assert answer["details"]["name"] == name
    else:
        assert answer["metadata"]["name"] == name


def test_pod_lifecycle_as_the_pod_test_sees_it(api: client.ApiClient) -> None:
    """test_client.py::test_pod_apis up to exec: a pod has a phase when created and leaves
    Pending, and is listed across namespaces. (That test first waits up to 30 s for the
    ``default`` ServiceAccount, which no controller here creates, and goes on without it.)"""
    core = client.CoreV1Api(api)
    name = _name("busybox")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "sleep", "image": "busybox", "args": ["sleep", "1"]}]},
    }
    created = core.create_namespaced_pod(NS, pod)
    assert created.metadata.name == name and created.status.phase == "Pending"
    for _ in watch.Watch().stream(
        core.list_namespaced_pod, NS, field_selector=f"metadata.name={name}", timeout_seconds=10
    ):
        if core.read_namespaced_pod(name, NS).status.phase != "Pending":
            break
    assert core.read_namespaced_pod(name, NS).status.phase != "Pending"
    assert name in {p.metadata.name for p in core.list_pod_for_all_namespaces().items}
    core.delete_namespaced_pod(name, NS, body={})


def test_service_patch_merges_ports_and_has_a_status(api: client.ApiClient) -> None:
    """test_client.py::test_service_apis: a strategic merge of ``ports`` adds the new port
    (merge key ``port``), and the Service has a status."""
    core = client.CoreV1Api(api)
    name = _name("frontend")
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"name": name}},
        "spec": {
            "ports": [{"name": "port", "port": 80, "protocol": "TCP", "targetPort": 80}],
            "selector": {"name": name},
        },
    }
    created = core.create_namespaced_service(NS, manifest)
    assert created.status is not None
    manifest["spec"]["ports"] = [
        {"name": "new", "port": 8080, "protocol": "TCP", "targetPort": 8080}
    ]
    patched = core.patch_namespaced_service(name, NS, manifest)
    assert sorted(p.port for p in patched.spec.ports) == [80, 8080]
    core.delete_namespaced_service(name, NS, body={})


def test_server_side_apply_records_the_manager(api: client.ApiClient) -> None:
    """The dynamic client's test_server_side_apply_api: apply creates, a second apply by the
    same manager changes the field, and ``managedFields`` names the manager."""
    pods = DynamicClient(api).resources.get(api_version="v1", kind="Pod")
    name = _name("pod")
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"name": name}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
    }
    applied = pods.server_side_apply(
        namespace=NS, body=manifest, field_manager="kubernetes-unittests"
    )
    assert applied.metadata.name == name
    manifest["metadata"]["labels"]["name"] = "changed"
    again = pods.server_side_apply(
        namespace=NS, body=manifest, field_manager="kubernetes-unittests"
    )
    assert again.metadata.labels["name"] == "changed"
    managers = {m["manager"] for m in again.metadata.managedFields}
    assert "kubernetes-unittests" in managers
    pods.delete(name=name, namespace=NS)


@pytest.mark.parametrize(
    ("path", "what"),
    [  # APIs the official tests use that the emulator does not serve: a real server's 404
        ("/api/v1/namespaces/default/replicationcontrollers", "ReplicationControllers"),
        ("/apis/apps/v1/namespaces/default/daemonsets", "DaemonSets"),
        ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "CRDs"),
        ("/apis/apiregistration.k8s.io/v1/apiservices", "APIServices"),
    ],
)
def test_apis_not_served_answer_404(emulator: EmulatorProcess, path: str, what: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(emulator.url + path, timeout=10)
    assert caught.value.code == 404, what
    status = json.loads(caught.value.read())
    assert (status["reason"], status["message"]) == (
        "NotFound",
        "the server could not find the requested resource",
    )


def test_kubeconfig_is_the_one_the_command_wrote(emulator: EmulatorProcess) -> None:
    assert Path(emulator.info["kubeconfig"]) == emulator.kubeconfig
    assert emulator.kubeconfig.exists()

"""Server-side printing (issue 27, item 13): ``meta.k8s.io`` Tables for ``kubectl get``, with
the built-in printers' columns, the CRDs' printer columns, and ages on the cluster's clock."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch.testing.k8s import ClusterConfig, Emulator
from dispatch.testing.k8s.kubeflow import install_default_runtimes, kubeflow_cluster_config
from dispatch.testing.k8s.meta import rfc3339
from dispatch.testing.k8s.printing import jsonpath, table, table_version
from dispatch.testing.k8s.printing.columns import human_duration
from dispatch.testing.k8s.resources import DEFAULT_RESOURCES

from .conftest import KUBECTL, kubectl, pod, trainjob

#: what kubectl get sends (k8s.io/kubectl/pkg/cmd/get/get.go, transformRequests)
KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
TRAINER = "trainer.kubeflow.org/v1alpha1"


def _rtype(group: str, version: str, plural: str) -> Any:
    return next(
        t for t in DEFAULT_RESOURCES if (t.group, t.version, t.plural) == (group, version, plural)
    )


def _get(emu: Emulator, path: str, accept: str = KUBECTL_ACCEPT) -> Any:
    request = urllib.request.Request(emu.url + path, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return json.loads(resp.read())


# ---------------------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (KUBECTL_ACCEPT, "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", "v1beta1"),
        ("application/json", None),
        ("*/*", None),
        ("", None),
        ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", None),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", None),
        ("application/json,application/json;as=Table;v=v1;g=meta.k8s.io", None),
    ],
)
def test_accept_negotiation(accept: str, version: str | None) -> None:
    assert table_version(accept) == version


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [  # apimachinery pkg/util/duration/duration_test.go (v0.33)
        (1, "1s"),
        (70, "70s"),
        (190, "3m10s"),
        (70 * 60, "70m"),
        (47 * 3600, "47h"),
        (49 * 3600, "2d1h"),
        ((8 * 24 + 2) * 3600, "8d"),
        (367 * 24 * 3600, "367d"),
        ((365 * 2 * 24 + 25) * 3600, "2y1d"),
        ((365 * 8 * 24 + 2) * 3600, "8y"),
        (-2, "<invalid>"),
        (-1.999, "0s"),
        (119.999, "119s"),
        (120, "2m"),
        (10 * 60 - 0.001, "9m59s"),
        (3 * 3600 - 0.001, "179m"),
        (3 * 3600 + 60, "3h1m"),
        (8 * 3600 + 59 * 60, "8h"),
        (8 * 24 * 3600 - 0.001, "7d23h"),
        (2 * 365 * 24 * 3600 - 0.001, "729d"),
    ],
)
def test_human_duration_as_apimachinery(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown


def test_jsonpath_of_printer_columns() -> None:
    obj = {
        "status": {
            "conditions": [
                {"type": "Created", "status": "True"},
                {"type": "Complete", "status": "True"},
            ]
        },
        "spec": {"suspend": False},
    }
    assert jsonpath(obj, ".status.conditions[-1:].type") == ["Complete"]
    assert jsonpath(obj, '.status.conditions[?(@.type=="Created")].status') == ["True"]
    assert jsonpath(obj, ".status.conditions[?(@.type=='Missing')].status") == []
    assert jsonpath(obj, ".spec.suspend") == [False]
    assert jsonpath({}, ".status.conditions[-1:].type") == []


def test_pod_row_as_print_pod() -> None:
    now = 1_700_000_000.0
    restarted = {
        "metadata": {"name": "p", "creationTimestamp": rfc3339(now - 600)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "node-1"},
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": "10.0.0.7"}],
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {
                    "name": "a",
                    "ready": True,
                    "restartCount": 2,
                    "state": {"running": {}},
                    "lastState": {"terminated": {"finishedAt": rfc3339(now - 90)}},
                },
                {"name": "b", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
            ],
        },
    }
    out = table(
        _rtype("", "v1", "pods"), [restarted], now, version="v1", include_object=None, list_meta={}
    )
    names = [c["name"] for c in out["columnDefinitions"]]
    assert names == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    assert [c["priority"] for c in out["columnDefinitions"]] == [0] * 5 + [1] * 4
    assert out["rows"][0]["cells"] == [
        "p",
        "1/2",
        "CrashLoopBackOff",
        "2 (90s ago)",
        "10m",
        "10.0.0.7",
        "node-1",
        "<none>",
        "<none>",
    ]
    assert out["rows"][0]["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": restarted["metadata"],
    }


def test_job_row_and_default_convertor() -> None:
    now = 1_700_000_000.0
    job = {
        "metadata": {"name": "j", "creationTimestamp": rfc3339(now - 100)},
        "spec": {
            "completions": 3,
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
        "status": {
            "succeeded": 3,
            "startTime": rfc3339(now - 90),
            "completionTime": rfc3339(now - 30),
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    out = table(
        _rtype("batch", "v1", "jobs"), [job], now, version="v1", include_object="None", list_meta={}
    )
    assert out["rows"][0]["cells"][:5] == ["j", "Complete", "3/3", "60s", "100s"]
    assert out["rows"][0]["object"] is None
    sar = _rtype("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
    default = table(sar, [job], now, version="v1", include_object=None, list_meta={})
    assert [c["name"] for c in default["columnDefinitions"]] == ["Name", "Created At"]
    assert default["rows"][0]["cells"] == ["j", rfc3339(now - 100)]


def test_crd_printer_columns_as_the_crds_declare_them() -> None:
    now = 1_700_000_000.0
    created = {"name": "w", "namespace": "default", "creationTimestamp": rfc3339(now - 5)}
    workload = {
        "metadata": created,
        "spec": {"queueName": "user-queue"},
        "status": {
            "admission": {"clusterQueue": "cluster-queue"},
            "conditions": [{"type": "Admitted", "status": "True"}],
        },
    }
    out = table(
        _rtype("kueue.x-k8s.io", "v1beta2", "workloads"),
        [workload],
        now,
        version="v1",
        include_object=None,
        list_meta={},
    )
    assert [c["name"] for c in out["columnDefinitions"]] == [
        "Name",
        "Queue",
        "Reserved in",
        "Admitted",
        "Finished",
        "Age",
    ]
    assert out["rows"][0]["cells"] == ["w", "user-queue", "cluster-queue", "True", None, "5s"]
    queue = {"metadata": created, "spec": {"cohortName": "all"}, "status": {"pendingWorkloads": 2}}
    cq = table(
        _rtype("kueue.x-k8s.io", "v1beta2", "clusterqueues"),
        [queue],
        now,
        version="v1",
        include_object=None,
        list_meta={},
    )
    assert cq["rows"][0]["cells"] == ["w", "all", None, 2, None]
    assert [c["priority"] for c in cq["columnDefinitions"]] == [0, 0, 1, 0, 1]
    runtimes = table(
        _rtype("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"),
        [{"metadata": created}],
        now,
        version="v1",
        include_object=None,
        list_meta={},
    )
    assert [c["name"] for c in runtimes["columnDefinitions"]] == ["Name", "Age"]


# ---------------------------------------------------------------------------- over HTTP


@pytest.fixture(scope="module")
def kubeflow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """Trainer, JobSet and the rest, 60 times faster than real time (one TrainJob done)."""
    config = kubeflow_cluster_config(time_scale=60.0, bookmark_interval=0.2)
    path = tmp_path_factory.mktemp("tables") / "kubeconfig"
    with Emulator(config, kubeconfig=path) as emu:
        emu.call(lambda: install_default_runtimes(emu.cluster))
        emu.create(trainjob("tj"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            conditions = emu.get(TRAINER, "TrainJob", "tj").get("status", {}).get("conditions", [])
            if any(c["type"] == "Complete" and c["status"] == "True" for c in conditions):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the TrainJob did not complete")
        yield emu


def test_list_and_get_answer_tables(kubeflow: Emulator) -> None:
    listed = _get(kubeflow, "/api/v1/namespaces/default/pods")
    assert listed["kind"] == "Table" and listed["apiVersion"] == "meta.k8s.io/v1"
    assert listed["metadata"]["resourceVersion"]
    assert [c["name"] for c in listed["columnDefinitions"]][:5] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
    ]
    row = listed["rows"][0]
    assert row["cells"][2] == "Completed" and row["object"]["kind"] == "PartialObjectMetadata"
    assert row["conditions"][0]["reason"] == "Succeeded"
    name = row["object"]["metadata"]["name"]
    one = _get(kubeflow, f"/api/v1/namespaces/default/pods/{name}?includeObject=Object")
    assert len(one["rows"]) == 1
    assert one["rows"][0]["object"]["kind"] == "Pod"
    assert one["rows"][0]["object"]["spec"]["nodeName"] in ("node-1", "node-2")
    old = _get(kubeflow, "/api/v1/nodes", "application/json;as=Table;v=v1beta1;g=meta.k8s.io")
    assert old["apiVersion"] == "meta.k8s.io/v1beta1"
    assert old["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    plain = _get(kubeflow, "/api/v1/nodes", "application/json")
    assert plain["kind"] == "NodeList"


def test_unknown_include_object_is_a_bad_request(kubeflow: Emulator) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        _get(kubeflow, "/api/v1/nodes?includeObject=All")
    assert caught.value.code == 400
    assert json.loads(caught.value.read())["message"] == 'unrecognized includeObject value: "All"'


def test_crd_columns_over_http(kubeflow: Emulator) -> None:
    trainjobs = _get(kubeflow, "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs")
    assert [c["name"] for c in trainjobs["columnDefinitions"]] == ["Name", "State", "Age"]
    assert trainjobs["rows"][0]["cells"][:2] == ["tj", "Complete"]
    jobsets = _get(kubeflow, "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/tj")
    assert jobsets["rows"][0]["cells"][:5] == ["tj", "Completed", "0", "True", "false"]


def test_ages_are_durations_on_the_cluster_clock(tmp_path: Path) -> None:
    """At time_scale 60 creationTimestamps run ahead of the wall clock; the server computes
    AGE against its own (emulated) clock, so it is a duration, never ``<invalid>``."""
    config = ClusterConfig(time_scale=60.0)
    with Emulator(config, kubeconfig=tmp_path / "kubeconfig") as emu:
        emu.create(pod("p"))
        time.sleep(0.5)  # 30 emulated seconds
        ages = [row["cells"][4] for row in _get(emu, "/api/v1/namespaces/default/pods")["rows"]]
        nodes = [row["cells"][3] for row in _get(emu, "/api/v1/nodes")["rows"]]
    for age in ages + nodes:
        assert age.endswith("s") and int(age[:-1]) >= 25, age


# ---------------------------------------------------------------------------- real kubectl


def _kubectl(emu: Emulator, home: Path, *args: str) -> str:
    done = kubectl(emu, home, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_get_prints_the_servers_columns(kubeflow: Emulator, tmp_path: Path) -> None:
    trainjobs = _kubectl(kubeflow, tmp_path, "get", "trainjobs").splitlines()
    assert trainjobs[0].split() == ["NAME", "STATE", "AGE"]
    assert trainjobs[1].split()[:2] == ["tj", "Complete"]
    pods = _kubectl(kubeflow, tmp_path, "get", "pods").splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    _, ready, status, restarts, age = pods[1].split()
    assert (ready, status, restarts) == ("0/1", "Completed", "0")
    assert age != "<invalid>" and age[-1] in "smhd"
    wide = _kubectl(kubeflow, tmp_path, "get", "pods", "-o", "wide").splitlines()
    assert wide[0].split()[5:] == ["IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    jobs = _kubectl(kubeflow, tmp_path, "get", "jobs").splitlines()
    assert jobs[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert jobs[1].split()[1:3] == ["Complete", "1/1"]
    jobsets = _kubectl(kubeflow, tmp_path, "get", "jobsets").splitlines()
    assert jobsets[0].split() == [
        "NAME",
        "TERMINALSTATE",
        "RESTARTS",
        "COMPLETED",
        "SUSPENDED",
        "AGE",
    ]
    nodes = _kubectl(kubeflow, tmp_path, "get", "nodes").splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[1:3] == ["Ready", "<none>"]


def test_a_watch_streams_tables_with_columns_once(kubeflow: Emulator) -> None:
    """``kubectl get -w``: each event's object is a one-row Table; the column definitions come
    with the first event only (the API server sets NoHeaders after it)."""
    request = urllib.request.Request(
        kubeflow.url + "/api/v1/nodes?watch=1&timeoutSeconds=1",
        headers={"Accept": KUBECTL_ACCEPT},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        events = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    first, second = (e["object"] for e in events)
    assert first["kind"] == second["kind"] == "Table"
    assert [c["name"] for c in first["columnDefinitions"]][:2] == ["Name", "Status"]
    assert second["columnDefinitions"] is None
    assert [e["object"]["rows"][0]["cells"][0] for e in events] == ["node-1", "node-2"]


def test_event_rows_read_either_representation() -> None:
    """core/v1 and events.k8s.io/v1 Events share one storage; both print as printEvent."""
    now = 1_700_000_000.0
    core = {
        "metadata": {"name": "p.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{node}"},
        "reason": "BackOff",
        "message": "Back-off restarting failed container\n",
        "type": "Warning",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": rfc3339(now - 300),
        "lastTimestamp": rfc3339(now - 30),
        "count": 4,
    }
    new = {
        "metadata": {"name": "p.2", "namespace": "default"},
        "regarding": {"kind": "Pod", "name": "p"},
        "reason": "Scheduled",
        "note": "Successfully assigned default/p to node-1",
        "type": "Normal",
        "eventTime": rfc3339(now - 5).replace("Z", ".000000Z"),
        "reportingController": "default-scheduler",
    }
    rows = table(
        _rtype("", "v1", "events"),
        [core, new],
        now,
        version="v1",
        include_object=None,
        list_meta={},
    )["rows"]
    assert rows[0]["cells"] == [
        "30s",
        "Warning",
        "BackOff",
        "pod/p",
        "spec.containers{node}",
        "kubelet, node-1",
        "Back-off restarting failed container",
        "5m",
        4,
        "p.1",
    ]
    assert rows[1]["cells"] == [
        "5s",
        "Normal",
        "Scheduled",
        "pod/p",
        "",
        "default-scheduler",
        "Successfully assigned default/p to node-1",
        "5s",
        1,
        "p.2",
    ]


def test_service_rows_as_print_service() -> None:
    now = 1_700_000_000.0
    headless = {
        "metadata": {"name": "tj", "creationTimestamp": rfc3339(now - 61)},
        "spec": {"type": "ClusterIP", "clusterIPs": ["None"], "selector": {"b": "2", "a": "1"}},
    }
    node_port = {
        "metadata": {"name": "web", "creationTimestamp": rfc3339(now - 1)},
        "spec": {
            "type": "NodePort",
            "clusterIPs": ["10.96.0.9"],
            "ports": [
                {"port": 80, "nodePort": 30080, "protocol": "TCP"},
                {"port": 53, "protocol": "UDP"},
            ],
        },
    }
    rows = table(
        _rtype("", "v1", "services"),
        [headless, node_port],
        now,
        version="v1",
        include_object=None,
        list_meta={},
    )["rows"]
    assert rows[0]["cells"] == ["tj", "ClusterIP", "None", "<none>", "<none>", "61s", "a=1,b=2"]
    assert rows[1]["cells"] == [
        "web",
        "NodePort",
        "10.96.0.9",
        "<none>",
        "80:30080/TCP,53/UDP",
        "1s",
        "<none>",
    ]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_get_watch_prints_the_same_columns(kubeflow: Emulator, tmp_path: Path) -> None:
    env = {"KUBECONFIG": str(kubeflow.kubeconfig), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    watching = subprocess.Popen(
        [str(KUBECTL), "get", "nodes", "--watch"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        time.sleep(2)
    finally:
        watching.terminate()
        out, _ = watching.communicate(timeout=10)
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [line.split()[:2] for line in lines[1:]] == [["node-1", "Ready"], ["node-2", "Ready"]]

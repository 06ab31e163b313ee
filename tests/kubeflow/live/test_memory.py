"""What the capture keeps per attempt: states shared, an ended attempt's records released, lists
read in pages; and that releasing changes no verdict (re-runs are still seen)."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from dispatch.adapters.kubeflow.api.client import Connection
from dispatch.adapters.kubeflow.api.kinds import CORE_EVENTS
from dispatch.adapters.kubeflow.api.listwatch import list_pages, list_raw
from dispatch.adapters.kubeflow.live.capture import Capture
from dispatch.adapters.kubeflow.live.laststate import (
    INTERN_UP_TO,
    MANAGED_FIELDS_KEPT,
    LastStates,
    compact,
    share,
    trim,
)
from dispatch.adapters.kubeflow.live.verdict import Verdicts
from dispatch.adapters.kubeflow.live.watching import judge
from dispatch.clock import ManualClock
from dispatch.model import Cause, State
from dispatch.testing.k8s import ClusterConfig, Emulator
from tests.kubeflow.live.test_pure import NS, T0, jobset, pod, trainjob

REF = (NS, "tj")


def test_share_keeps_each_unchanged_part_once_and_changes_no_value() -> None:
    old = {"metadata": {"labels": {"a": "1"}, "resourceVersion": "1"},
           "spec": {"containers": [{"name": "node", "env": [{"name": "X", "value": "1"}]}]},
           "status": {"phase": "Pending"}}  # fmt: skip
    new = copy.deepcopy(old)
    new["metadata"]["resourceVersion"] = "2"
    new["status"] = {"phase": "Running", "conditions": [{"type": "Ready"}]}
    expected = copy.deepcopy(new)
    shared = share(new, old)
    assert shared == expected and new == expected  # the same value; ``new`` is not changed
    assert shared["spec"] is old["spec"]  # unchanged parts are the old objects
    assert shared["metadata"] is not old["metadata"]
    assert shared["metadata"]["labels"] is old["metadata"]["labels"]
    assert old["metadata"]["resourceVersion"] == "1" and old["status"] == {"phase": "Pending"}
    assert share(copy.deepcopy(old), old) is old
    assert share({"n": 1}, {"n": True}) == {"n": 1}  # equal values of other types stay apart
    assert share({"n": 1}, {"n": True})["n"] is not True
    # nor deeper down, where a part is compared whole (``==`` takes 1, 1.0 and True for one)
    for new_part, old_part in (([1], [True]), ({"n": 1}, {"n": 1.0}), ([{"n": 0}], [{"n": False}])):
        kept = share({"spec": {"x": new_part}, "v": "2"}, {"spec": {"x": old_part}, "v": "1"})
        assert json.dumps(kept) == json.dumps({"spec": {"x": new_part}, "v": "2"})


def _key(obj: dict[str, Any], name: str) -> str:
    """The key object ``obj`` holds for ``name`` (equal, maybe not identical, to ``name``)."""
    return next(k for k in obj if k == name)


def test_compact_changes_no_value_and_shares_keys_and_short_strings_between_objects() -> None:
    long = "x" * (INTERN_UP_TO + 1)
    texts = [json.dumps(pod(f"p-{i}", i, str(i), phase="Running", message=long)) for i in (0, 1)]
    decoded = [json.loads(text) for text in texts]  # each decode makes its own strings
    assert next(iter(decoded[0])) is not next(iter(decoded[1]))
    first, second = (compact(json.loads(text)) for text in texts)
    assert [first, second] == decoded and first["status"]["message"] == long
    assert _key(first, "metadata") is _key(second, "metadata")
    assert first["status"]["phase"] is second["status"]["phase"]
    labels = [o["metadata"]["labels"] for o in (first, second)]
    assert (
        labels[0]["jobset.sigs.k8s.io/jobset-name"] is labels[1]["jobset.sigs.k8s.io/jobset-name"]
    )


def test_states_filed_from_the_streams_are_compacted() -> None:
    """Objects decoded apart (one per watch event) share their keys once filed."""
    capture = _capture()
    for i in (0, 1):
        obj = json.loads(json.dumps(pod(f"tj-node-0-{i}-abcde", i, str(10 + i), phase="Running")))
        capture.streams.update(("pods", NS), f"{NS}/tj-node-0-{i}-abcde", obj)
    capture.seen(trainjob())
    pods = [r.data for r in capture.records(REF) if r.kind == "pod"]
    assert len(pods) == 2
    assert _key(pods[0], "status") is _key(pods[1], "status")
    assert pods[0]["status"]["phase"] is pods[1]["status"]["phase"]


#: two writers' entries as a real API server stores them (kubectl's create, the kubelet's status)
MANAGED = [
    {"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
     "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
     "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"node"}': {".": {}, "f:image": {}}}}}},
    {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
     "time": "2026-01-01T00:00:09Z", "fieldsType": "FieldsV1", "subresource": "status",
     "fieldsV1": {"f:status": {"f:phase": {}, "f:conditions": {".": {}}}}},
]  # fmt: skip


def test_trim_keeps_who_wrote_an_object_and_when_but_not_the_fields_each_writer_owns() -> None:
    obj = pod("tj-node-0-0-abcde", 0, "10", phase="Running")
    obj["metadata"]["managedFields"] = copy.deepcopy(MANAGED)
    before = copy.deepcopy(obj)
    trimmed = trim(obj)
    assert obj == before  # the decoded object is not changed
    assert trimmed["metadata"]["managedFields"] == [
        {k: e[k] for k in MANAGED_FIELDS_KEPT if k in e} for e in MANAGED
    ]
    assert trimmed["metadata"]["managedFields"][1]["subresource"] == "status"
    assert {**trimmed, "metadata": {**trimmed["metadata"], "managedFields": None}} == {
        **obj,
        "metadata": {**obj["metadata"], "managedFields": None},
    }  # nothing else differs
    assert trim(trimmed) is trimmed  # nothing left to drop: the same object
    plain = pod("tj-node-0-1-abcde", 1, "11")
    assert trim(plain) is plain
    odd = {"metadata": {"managedFields": ["not an entry", {"manager": "m", "fieldsV1": {}}]}}
    assert trim(odd)["metadata"]["managedFields"] == ["not an entry", {"manager": "m"}]
    assert trim({"metadata": "not a mapping"}) == {"metadata": "not a mapping"}


def test_states_filed_from_the_streams_keep_no_field_ownership() -> None:
    """What a watch delivers is filed, and kept as the stream's last state, trimmed."""
    capture = _capture()
    obj = json.loads(json.dumps(pod("tj-node-0-0-abcde", 0, "10", phase="Running")))
    obj["metadata"]["managedFields"] = copy.deepcopy(MANAGED)
    capture.streams.update(("pods", NS), f"{NS}/tj-node-0-0-abcde", obj)
    capture.seen(trainjob())
    filed = next(r.data for r in capture.records(REF) if r.kind == "pod")
    kept = capture.streams.last.state(("pods", NS), f"{NS}/tj-node-0-0-abcde")
    assert kept is filed
    assert [e["manager"] for e in filed["metadata"]["managedFields"]] == [
        "kubectl-create",
        "kubelet",
    ]
    assert not any("fieldsV1" in e for e in filed["metadata"]["managedFields"])
    assert "fieldsV1" in obj["metadata"]["managedFields"][0]  # what was decoded is not changed


def test_a_new_object_shares_its_equal_parts_with_the_stream_s_last_state() -> None:
    """Pods made from one template hold their equal parts once, and each keeps its own
    values (decoded apart, as two watch events are)."""
    capture = _capture()
    stream, kept = ("pods", NS), []
    for i in (0, 1):
        obj = pod(f"tj-node-0-{i}-abcde", i, str(10 + i), phase="Running")
        obj["spec"]["containers"] = [
            {"name": "node", "resources": {"limits": {"cpu": "2"}}, "env": [{"name": f"R{i}"}]}
        ]
        decoded = json.loads(json.dumps(obj))
        capture.streams.update(stream, f"{NS}/tj-node-0-{i}-abcde", decoded)
        assert decoded == obj  # what was decoded is not changed
        kept.append(capture.streams.last.state(stream, f"{NS}/tj-node-0-{i}-abcde"))
        assert kept[-1] == obj  # the value is the object's own
    first, second = (k["spec"]["containers"][0] for k in kept)
    assert second["resources"] is first["resources"]
    assert second["env"] is not first["env"] and second["env"] == [{"name": "R1"}]
    assert capture.streams.last.like(stream) is kept[1]
    assert capture.streams.last.like(("pods", "elsewhere")) is None


def test_last_states_are_kept_until_every_trainjob_they_concern_is_released() -> None:
    states = LastStates()
    pod, node = {"metadata": {"resourceVersion": "5"}}, {"metadata": {"resourceVersion": "9"}}
    other = (NS, "other")
    states.keep("pods", "ns/p", pod, [REF])
    states.keep("nodes", "/n", node, [REF, other])
    states.keep("events", "ns/e", {"metadata": {"resourceVersion": "3"}}, [])  # nobody's yet
    states.release(REF)
    assert states.state("pods", "ns/p") is None and states.version("pods", "ns/p") == "5"
    assert states.state("nodes", "/n") is node  # the other TrainJob still needs it
    states.release(other)
    assert states.state("nodes", "/n") is None
    assert states.state("events", "ns/e") is not None
    states.keep("pods", "ns/p", {"metadata": {"resourceVersion": "6"}}, [REF])
    assert states.state("pods", "ns/p") is None  # a released TrainJob keeps no state
    assert states.keys("pods") == {"ns/p"}


def failed_pod(rv: str) -> dict[str, Any]:
    terminated = {"exitCode": 3, "reason": "Error", "startedAt": T0,
                  "finishedAt": "2026-01-01T00:00:10Z"}  # fmt: skip
    return pod("tj-node-0-1-abcde", 1, rv, phase="Failed",
               containerStatuses=[{"name": "node", "state": {"terminated": terminated}}])  # fmt: skip


def _capture() -> Capture:
    connection = Connection(Path("unused-kubeconfig"), None)
    return Capture(connection, "kf", ManualClock(100.0), kinds=())


def _failed() -> dict[str, Any]:
    return trainjob(conditions=[{"type": "Failed", "status": "True", "reason": "FailedJobs",
                                 "lastTransitionTime": "2026-01-01T00:00:11Z"}])  # fmt: skip


def test_an_ended_attempt_keeps_no_records_and_a_later_rerun_is_still_seen() -> None:
    capture, verdicts = _capture(), Verdicts(patience=600.0, settle=0.0)
    for obj in (_failed(), jobset("js1", "3"), failed_pod("7")):
        capture.seen(obj)
    assert len(capture.records(REF)) == 3
    outcome, gone = judge(capture, verdicts, REF, 110.0, None)
    assert (outcome.state, outcome.cause, gone) == (State.FAILED, Cause.APP_ERROR, False)
    assert capture.records(REF) == []  # final: released
    kept, deleted = capture.latest_trainjob(REF)
    assert kept is not None and not deleted and verdicts.must_retire("tj", kept) is None
    # only what retirement reads is kept of a released TrainJob (one per TrainJob ever followed)
    assert kept["status"]["conditions"] == [{"type": "Failed", "status": "True"}]
    assert set(kept["metadata"]) <= {"name", "namespace", "uid", "resourceVersion"}
    assert kept["metadata"]["name"] == "tj"
    capture.seen(failed_pod("7"))  # seen again (e.g. a GET): harmless
    capture.seen(jobset("js1", "3"))
    judge(capture, verdicts, REF, 111.0, None)
    assert verdicts.rerun("tj") is None
    capture.seen(jobset("js2", "20"))  # Trainer re-created the JobSet (A.7)
    again, _ = judge(capture, verdicts, REF, 112.0, None)
    assert again == outcome and capture.records(REF) == []
    proof = verdicts.rerun("tj")
    assert proof is not None and proof.data["jobSetUids"] == ["js2"]
    kept, _ = capture.latest_trainjob(REF)
    why = verdicts.must_retire("tj", kept)
    assert why is not None and "ran again" in why


def test_a_running_attempt_keeps_its_records() -> None:
    capture, verdicts = _capture(), Verdicts(patience=600.0, settle=0.0)
    capture.seen(trainjob())
    outcome, _ = judge(capture, verdicts, REF, 110.0, None)
    assert not outcome.is_terminal and len(capture.records(REF)) == 1


@pytest.mark.parametrize("count", [0, 3, 7])
def test_lists_are_read_in_pages_and_whole(count: int, tmp_path: Path) -> None:
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        for i in range(count):
            emu.create({"apiVersion": "v1", "kind": "Event",
                        "metadata": {"name": f"e-{i}", "namespace": NS},
                        "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS}})  # fmt: skip

        async def read() -> tuple[list[int], list[str], str]:
            connection = Connection(tmp_path / "kubeconfig", None)
            async with connection.session() as session:
                pages = [p async for p in list_pages(session, CORE_EVENTS, NS, limit=2)]
                whole = await list_raw(session, CORE_EVENTS, NS)
            await connection.aclose()
            names = [i["metadata"]["name"] for i in whole["items"] if i["kind"] == "Event"]
            return [len(p["items"]) for p in pages], names, whole["metadata"]["resourceVersion"]

        sizes, names, version = asyncio.run(read())
    assert sizes == [2] * (count // 2) + ([count % 2] if count % 2 or not count else [])
    assert sorted(names) == sorted(f"e-{i}" for i in range(count)) and version


def test_a_metadata_list_holds_each_object_s_name_and_version_alone(tmp_path: Path) -> None:
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        for i in range(5):
            emu.create({"apiVersion": "v1", "kind": "Event",
                        "metadata": {"name": f"e-{i}", "namespace": NS},
                        "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS},
                        "message": "x" * 200})  # fmt: skip

        async def read() -> tuple[list[list[dict[str, Any]]], str]:
            connection = Connection(tmp_path / "kubeconfig", None)
            async with connection.session() as session:
                pages = [
                    p
                    async for p in list_pages(session, CORE_EVENTS, NS, limit=2, metadata_only=True)
                ]
            await connection.aclose()
            return [p["items"] for p in pages], pages[0]["metadata"]["resourceVersion"]

        pages, version = asyncio.run(read())
    assert [len(items) for items in pages] == [2, 2, 1] and version.isdigit()
    items = [item for page in pages for item in page]
    assert sorted(i["metadata"]["name"] for i in items) == [f"e-{i}" for i in range(5)]
    assert all(set(i) == {"kind", "apiVersion", "metadata"} for i in items)  # no message
    assert {i["kind"] for i in items} == {"PartialObjectMetadata"}
    assert all(i["metadata"]["resourceVersion"].isdigit() for i in items)


def test_a_state_filed_again_keeps_one_copy_the_one_the_stream_shares() -> None:
    """The TrainJob a start created is filed from the creation's answer; when its stream
    delivers that same version, the record takes the stream's copy (which later states share
    parts with) and keeps its first time, so no second copy stays while the attempt runs."""
    capture = _capture()
    created = trainjob()
    capture.seen(created)
    [first] = capture.records(REF)
    delivered = json.loads(json.dumps(created))  # the same version, decoded apart
    capture.streams.update(("trainjobs", NS), f"{NS}/tj", delivered)
    [record] = capture.records(REF)
    assert record.key == first.key and record.observed_at == first.observed_at
    kept_by_stream = capture.streams.last.state(("trainjobs", NS), f"{NS}/tj")
    assert kept_by_stream is not None and record.data is kept_by_stream
    assert record.data == created and capture.latest_trainjob(REF)[0] is kept_by_stream

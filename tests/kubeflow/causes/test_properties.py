"""Arbitrary or garbled objects never crash the cause function (``unknown`` at worst), and the
outcome it gives is always a valid one."""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch.adapters.kubeflow.causes.decide import Inputs, diagnose
from dispatch.adapters.kubeflow.causes.dump import parse_dump
from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet, object_evidence
from dispatch.adapters.kubeflow.causes.workloads import workloads
from dispatch.model import Evidence, Outcome, State
from tests.kubeflow.causes.dumpgen import DUMPS

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: whole dumps are larger: fewer examples keep the suite quick on two cores
DUMPY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KINDS = ["TrainJob", "JobSet", "Job", "Pod", "Event", "Workload", "Node", "Other", 3, None]
FIELDS = [
    "status",
    "conditions",
    "containerStatuses",
    "state",
    "lastState",
    "terminated",
    "exitCode",
    "reason",
    "message",
    "lastTransitionTime",
    "finishedAt",
    "startedAt",
    "deletionTimestamp",
    "labels",
    "involvedObject",
    "regarding",
    "restarts",
    "restartCount",
    "nodeName",
    "type",
]
leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.sampled_from(
        [
            "True",
            "False",
            "Unknown",
            "OOMKilled",
            "Preempted",
            "2026-08-27T10:00:00Z",
            "",
            "Pod",
            "node",
        ]
    )
    | st.text(max_size=10)
)
value = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=25,
)
small_value = st.recursive(
    leaf,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(FIELDS), inner, max_size=2)
    ),
    max_leaves=6,
)
k8s_object = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(KINDS),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["a", "mnist-ddp-x7k2p-1", "b-0-abcde"]) | value}
        ),
    },
    optional={
        "status": value,
        "spec": value,
        "involvedObject": value,
        "reason": value,
        "message": value,
    },
)


def _valid(outcome: Outcome) -> None:
    assert isinstance(outcome.state, State)
    if outcome.state in (State.FAILED, State.CANCELLED):
        assert outcome.cause is not None
    json.dumps(outcome.to_json(), default=str)


@FAST
@given(st.lists(k8s_object | value, max_size=8), st.booleans(), st.floats(1, 10**6))
def test_arbitrary_objects_never_crash(objects: list[Any], allowed: bool, patience: float) -> None:
    evidence = EvidenceSet.from_objects(objects)
    inputs = Inputs(patience=patience, restarts_allowed=allowed)
    _valid(diagnose(evidence, inputs).outcome)
    for name in evidence.trainjob_names():
        _valid(diagnose(evidence, Inputs(trainjob=name)).outcome)


@FAST
@given(st.lists(st.tuples(k8s_object, st.floats(0, 2e9), st.booleans()), max_size=6))
def test_arbitrary_records_never_crash(records: list[tuple[dict[str, Any], float, bool]]) -> None:
    evidence = [object_evidence(obj, at, deleted=deleted) for obj, at, deleted in records]
    evidence.append(Evidence(kind="pod", key="x", observed_at=1.0, data={"no": "name"}))
    _valid(diagnose(EvidenceSet.from_evidence(evidence)).outcome)


DUMP_OBJECTS = {
    str(path.relative_to(DUMPS)): parse_dump(path.read_text())
    for path in sorted(DUMPS.rglob("*"))
    if path.suffix in (".yaml", ".json") and path.parent.name != "not-dumps"
}


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _paths(child, (*prefix, index))
    return found


@DUMPY
@given(st.sampled_from(sorted(DUMP_OBJECTS)), st.data())
def test_garbage_anywhere_in_a_real_dump_never_crashes(name: str, data: st.DataObject) -> None:
    objects = copy.deepcopy(DUMP_OBJECTS[name])
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(objects) - 1))
        paths = _paths(objects[index])
        if not paths:
            continue
        path = data.draw(st.sampled_from(paths))
        parent: Any = objects[index]
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = data.draw(small_value)
    evidence = EvidenceSet.from_objects(objects)
    for workload in workloads(evidence) or [None]:
        _valid(diagnose(evidence, Inputs(workload=workload)).outcome)


@FAST
@given(st.text(max_size=200))
def test_parse_dump_raises_only_value_error(text: str) -> None:
    try:
        objects = parse_dump(text)
    except ValueError:
        return
    assert all(isinstance(o, dict) for o in objects)
    yaml.safe_dump(objects)

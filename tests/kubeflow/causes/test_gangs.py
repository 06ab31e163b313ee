"""Gangs that never form (``causes.podgroups``), as a table: a TrainJob whose runtime has
``podGroupPolicy``, its PodGroup (scheduler-plugins or Volcano) and its pods, judged at a time.

Each case: the PodGroup's phase and conditions, whether its pods are bound, when it is
judged, and the state, cause and PodGroup proof expected.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from dispatch.adapters.kubeflow.causes.decide import Inputs, diagnose
from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet
from dispatch.model import Cause, State
from tests.kubeflow.causes.objects import (
    NAMESPACE,
    TRAINJOB,
    cond,
    container_status,
    epoch,
    pod,
    running,
    running_conditions,
    trainjob,
    ts,
    uid,
)

COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"
VOLCANO = "scheduling.volcano.sh/v1beta1"
GAP = "0/3 nodes are available: resource gap: map[cpu:4]."
VOLCANO_MESSAGE = (
    "1/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; "
    "Pending: 1 Unschedulable, 3 Schedulable"
)


def pod_group(
    api: str,
    phase: str | None,
    *,
    timeout: int | None = 5,
    conditions: list[dict[str, Any]] | None = None,
    running_pods: int = 0,
) -> dict[str, Any]:
    """The PodGroup Trainer makes for the TrainJob (created at 2s), with the status given."""
    spec: dict[str, Any] = {"minMember": 4, "minResources": {"cpu": "16"}}
    if api == COSCHEDULING and timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    status: dict[str, Any] = {"phase": phase} if phase else {}
    if running_pods:
        status["running"] = running_pods
    if conditions:
        status["conditions"] = conditions
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
             "name": TRAINJOB, "uid": uid(TRAINJOB, "0"), "controller": True,
             "blockOwnerDeletion": True}  # fmt: skip
    metadata = {
        "name": TRAINJOB,
        "namespace": NAMESPACE,
        "creationTimestamp": ts(2),
        "uid": uid(TRAINJOB, "podgroup"),
        "ownerReferences": [owner],
    }
    return {"apiVersion": api, "kind": "PodGroup", "metadata": metadata, "spec": spec,
            "status": status}  # fmt: skip


def member(index: int, api: str, *, bound: bool, message: str = GAP) -> dict[str, Any]:
    """A node pod of the gang: waiting (unschedulable since 4s) or running on a node."""
    if bound:
        found = pod(
            index,
            suffix=f"gang{index}",
            node=f"node-{index}",
            phase="Running",
            containers=[container_status(running(20))],
            conditions=running_conditions(10, 20),
        )
    else:
        found = pod(
            index,
            suffix=f"gang{index}",
            node=None,
            phase="Pending",
            containers=[],
            conditions=[cond("PodScheduled", "False", 4, "Unschedulable", message)],
        )
    found = copy.deepcopy(found)
    meta = found["metadata"]
    if api == COSCHEDULING:
        meta["labels"]["scheduling.x-k8s.io/pod-group"] = TRAINJOB
    else:
        meta.setdefault("annotations", {})["scheduling.k8s.io/group-name"] = TRAINJOB
        found["spec"]["schedulerName"] = "volcano"
    return found


@dataclass(frozen=True)
class Case:
    group: dict[str, Any]
    pods: tuple[dict[str, Any], ...]
    #: seconds after T0 at which the attempt is judged
    at: float
    state: State
    cause: Cause | None
    #: a proof key expected in the outcome's evidence
    proof: str | None = None
    says: tuple[str, ...] = field(default=())


GROUP_PHASE = f"PodGroup/{TRAINJOB}#status.phase"
GROUP_UNSCHEDULABLE = f"PodGroup/{TRAINJOB}#status.conditions[Unschedulable]"
WAITING = tuple(member(i, COSCHEDULING, bound=False) for i in range(4))
VOLCANO_WAITING = tuple(member(i, VOLCANO, bound=False, message=VOLCANO_MESSAGE) for i in range(4))
UNSCHEDULABLE = [cond("Unschedulable", "True", 4, "NotEnoughResources", VOLCANO_MESSAGE)]

CASES: dict[str, Case] = {
    "coscheduling gang waiting, within its scheduleTimeoutSeconds": Case(
        pod_group(COSCHEDULING, "Scheduling"), WAITING, 8, State.QUEUED, None
    ),
    "coscheduling gang past its scheduleTimeoutSeconds is no_capacity": Case(
        pod_group(COSCHEDULING, "Scheduling"),
        WAITING,
        30,
        State.QUEUED,
        Cause.NO_CAPACITY,
        GROUP_PHASE,
        ("never formed", "minMember", "resource gap", "patience 5s"),
    ),
    "coscheduling PodGroup without scheduleTimeoutSeconds waits 60s": Case(
        pod_group(COSCHEDULING, "Scheduling", timeout=None), WAITING, 50, State.QUEUED, None
    ),
    "coscheduling PodGroup with scheduleTimeoutSeconds 0 waits 60s, then no_capacity": Case(
        pod_group(COSCHEDULING, "Scheduling", timeout=0),
        WAITING,
        70,
        State.QUEUED,
        Cause.NO_CAPACITY,
        GROUP_PHASE,
        ("patience 1m",),
    ),
    "coscheduling Pending group with too few pods is no_capacity too": Case(
        pod_group(COSCHEDULING, "Pending"),
        WAITING[:3],
        30,
        State.QUEUED,
        Cause.NO_CAPACITY,
        GROUP_PHASE,
        ("phase Pending",),
    ),
    "coscheduling Scheduling group, no pod in the evidence, past its timeout": Case(
        pod_group(COSCHEDULING, "Scheduling"),
        (),
        30,
        State.QUEUED,
        Cause.NO_CAPACITY,
        GROUP_PHASE,
        ("never formed",),
    ),
    "coscheduling gang formed: its ranks run": Case(
        pod_group(COSCHEDULING, "Running", running_pods=4),
        tuple(member(i, COSCHEDULING, bound=True) for i in range(4)),
        300,
        State.RUNNING,
        None,
    ),
    "coscheduling Failed PodGroup (a member failed) is not a gang that never formed": Case(
        pod_group(COSCHEDULING, "Failed"),
        tuple(member(i, COSCHEDULING, bound=True) for i in range(4)),
        300,
        State.RUNNING,
        None,
    ),
    "volcano Unschedulable PodGroup within the patience": Case(
        pod_group(VOLCANO, "Inqueue", conditions=UNSCHEDULABLE),
        VOLCANO_WAITING,
        60,
        State.QUEUED,
        None,
    ),
    "volcano Unschedulable PodGroup past the patience is no_capacity": Case(
        pod_group(VOLCANO, "Inqueue", conditions=UNSCHEDULABLE),
        VOLCANO_WAITING,
        700,
        State.QUEUED,
        Cause.NO_CAPACITY,
        GROUP_UNSCHEDULABLE,
        ("Volcano", "NotEnoughResources", "tasks in gang unschedulable"),
    ),
    "volcano Pending (not enqueued) Unschedulable PodGroup is no_capacity": Case(
        pod_group(VOLCANO, "Pending", conditions=UNSCHEDULABLE),
        VOLCANO_WAITING,
        700,
        State.QUEUED,
        Cause.NO_CAPACITY,
        GROUP_UNSCHEDULABLE,
        ("Volcano",),
    ),
    "volcano Running PodGroup keeps its old Unschedulable condition: not a wait": Case(
        pod_group(VOLCANO, "Running", conditions=UNSCHEDULABLE, running_pods=4),
        tuple(member(i, VOLCANO, bound=True) for i in range(4)),
        700,
        State.RUNNING,
        None,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gang(name: str) -> None:
    case = CASES[name]
    objects = [trainjob(nodes=4), case.group, *case.pods]
    found = diagnose(
        EvidenceSet.from_objects(objects), Inputs(now=epoch(case.at), trainjob=TRAINJOB)
    ).outcome
    assert (found.state, found.cause) == (case.state, case.cause), found.summary
    keys = [e.key for e in found.evidence]
    if case.proof is not None:
        assert case.proof in keys
    for text in case.says:
        assert text in found.summary

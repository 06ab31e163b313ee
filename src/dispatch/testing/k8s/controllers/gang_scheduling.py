"""The scheduler's part of gang scheduling: a gang's pods are bound all together or none.

Called by :class:`~.scheduler.Scheduler` for a pod of a gang (:func:`.gangs.gang_of`). Once
``minMember`` pods of the group are bound the group has formed and further pods are placed
one by one. Before that:

scheduler-plugins' coscheduling (``pkg/coscheduling``), in the order its plugin checks:

1. fewer pods than ``minMember`` (PreFilter): ``pre-filter pod <p> cannot find enough sibling
   pods, current pods number: <n>, minMember of group: <m>``;
2. scheduling-gated siblings leave too few: ``pre-filter pod <p> cannot proceed due to gated
   pods in the same PodGroup``;
3. ``minResources`` plus ``minMember`` pods exceed what the nodes have left, counting the
   group's own pods as free (``CheckClusterResource``): ``resource gap: map[...]`` (the
   missing amounts, printed as quantities);
4. the pods are placed in name order; when one finds no node (Filter), the group is rejected
   (PostFilter): that pod's message is the nodes' reasons and ``PodGroup <ns>/<g> gets
   rejected due to Pod <p> is unschedulable even after PostFilter``, the siblings that had a
   node were waiting at Permit and are rejected with ``optimistic rejection in PostFilter``.

Each message is the scheduler's ``0/N nodes are available: <message>.`` on the pod's
``PodScheduled=False/Unschedulable`` condition and its ``FailedScheduling`` event. A group
without its PodGroup is not scheduled (Permit: ``PodGroup not found``).

Volcano (``pkg/scheduler``): a PodGroup is ``Pending`` until enqueued (the ``overcommit``
plugin: ``minResources`` within the nodes' allocatable times 1.2 less what is bound;
else a Normal ``Unschedulable`` event ``resource in cluster is overused: overused <r>``),
then ``Inqueue``; an enqueued group that cannot be placed whole gets the condition
``Unschedulable`` (reason ``NotEnoughResources``, message ``<k>/<n> tasks in gang
unschedulable: pod group is not ready, ...``), a Warning ``Unschedulable`` event, and its pods
the same message (component ``volcano``); placed whole, its pods are bound and it is
``Running``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from dispatch.adapters.kubeflow.planning.quantity import Quantity
from dispatch.testing.k8s.controllers.base import (
    Key,
    record_event,
    set_condition,
    write_status,
)
from dispatch.testing.k8s.controllers.gangs import (
    COSCHEDULING_API,
    INQUEUE,
    PENDING,
    RUNNING,
    VOLCANO_API,
    Gang,
    gang_of,
    members,
    min_member,
)
from dispatch.testing.k8s.controllers.placement import milli, pod_requests, take
from dispatch.testing.k8s.watch import Change

if TYPE_CHECKING:
    from dispatch.testing.k8s.controllers.scheduler import Scheduler

__all__ = ["COSCHEDULING_API", "VOLCANO_API", "gang_of", "schedule", "unbound_members"]

JsonObj = dict[str, Any]
Usage = dict[str, dict[str, int]]
VOLCANO = "volcano"
#: Volcano's overcommit plugin default ``overcommit-factor``
OVERCOMMIT = 1.2
#: what a node offers in ``CheckClusterResource`` units (cpu in millicores)
GAP_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "pods")


def unbound_members(sched: Scheduler, change: Change) -> list[Key]:
    """The pods of a changed PodGroup still waiting for a node."""
    api = f"{change.rtype.group}/{change.rtype.version}"
    gang = Gang(api, change.namespace or "default", change.name)
    pods = members(sched.cluster.store.objects(sched.rtype("v1", "Pod")), gang)
    return [
        (p["metadata"]["namespace"], p["metadata"]["name"])
        for p in pods
        if not (p.get("spec") or {}).get("nodeName")
    ]


def schedule(sched: Scheduler, gang: Gang) -> float | None:
    """Bind the gang's pods if they can all be placed, else say why each waits."""
    pods = members(sched.cluster.store.objects(sched.rtype("v1", "Pod")), gang)
    unbound = [p for p in pods if not p["spec"].get("nodeName")]
    waiting = [p for p in unbound if not p["spec"].get("schedulingGates")]
    group = sched.find(gang.api, "PodGroup", gang.namespace, gang.name)
    component = VOLCANO if gang.volcano else "default-scheduler"
    if group is None:
        for pod in waiting:
            sched.unschedulable(pod, "PodGroup not found", component)
        return None
    used = sched.usage()
    need = min_member(group)
    if len(pods) - len(unbound) >= need:  # formed: the rest one by one
        for pod in waiting:
            _place_one(sched, pod, used, component)
        return None
    if gang.volcano:
        _volcano(sched, group, pods, waiting, used)
    else:
        _coscheduling(sched, group, pods, waiting, used)
    return None


def _place_one(sched: Scheduler, pod: JsonObj, used: Usage, component: str) -> None:
    node, why = sched.choose(pod, used)
    if node is None:
        sched.unschedulable(pod, why, component)
        return
    take(used, node, pod_requests(pod))
    sched.bind(pod, node, component)


def _placement(
    sched: Scheduler, pods: list[JsonObj], used: Usage
) -> tuple[list[tuple[JsonObj, str]], JsonObj | None, str]:
    """Nodes for ``pods`` in order, each counting the ones before; stops at the first pod no
    node takes: (placed, that pod, the nodes' reasons)."""
    trial = copy.deepcopy(used)
    placed: list[tuple[JsonObj, str]] = []
    for pod in pods:
        node, _ = sched.choose(pod, trial)
        if node is None:
            reasons = sched.misfits(pod, trial)
            detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
            return placed, pod, detail
        take(trial, node, pod_requests(pod))
        placed.append((pod, node))
    return placed, None, ""


def _coscheduling(
    sched: Scheduler, group: JsonObj, pods: list[JsonObj], waiting: list[JsonObj], used: Usage
) -> None:
    nodes = len(sched.nodes())
    need = min_member(group)

    def refuse(pod: JsonObj, message: str) -> None:
        sched.unschedulable(pod, f"0/{nodes} nodes are available: {message}.")

    if len(pods) < need:
        for pod in waiting:
            name = pod["metadata"]["name"]
            refuse(pod, f"pre-filter pod {name} cannot find enough sibling pods, current pods "
                        f"number: {len(pods)}, minMember of group: {need}")  # fmt: skip
        return
    gated = sum(1 for p in pods if p["spec"].get("schedulingGates"))
    if len(pods) - gated < need:
        for pod in waiting:
            name = pod["metadata"]["name"]
            refuse(pod, f"pre-filter pod {name} cannot proceed due to gated pods in the same "
                        "PodGroup")  # fmt: skip
        return
    gap = _resource_gap(sched, group, pods, used)
    if gap:
        for pod in waiting:
            refuse(pod, f"resource gap: {gap}")
        return
    placed, stuck, detail = _placement(sched, waiting, used)
    if stuck is None or len(pods) - len(waiting) + len(placed) >= need:
        for pod, node in placed:
            sched.bind(pod, node)
        if stuck is not None:
            _place_one(sched, stuck, sched.usage(), "default-scheduler")
        return
    meta = group["metadata"]
    rejected = (
        f"PodGroup {meta.get('namespace')}/{meta['name']} gets rejected due to Pod "
        f"{stuck['metadata']['name']} is unschedulable even after PostFilter"
    )
    refuse(stuck, f"{detail}. {rejected}" if detail else rejected)
    for pod in waiting:
        if pod is not stuck:
            sched.unschedulable(pod, "optimistic rejection in PostFilter")


def _free(sched: Scheduler, pods: list[JsonObj], used: Usage) -> dict[str, int]:
    """What the nodes have left, the group's own bound pods counted as free."""
    mine: Usage = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        if node:
            row = mine.setdefault(node, {})
            for r, v in pod_requests(pod).items():
                row[r] = row.get(r, 0) + v
            row["pods"] = row.get("pods", 0) + 1
    free = dict.fromkeys(GAP_RESOURCES, 0)
    for node in sched.nodes():
        name = node["metadata"]["name"]
        alloc = (node.get("status") or {}).get("allocatable") or {}
        for r in GAP_RESOURCES:
            have = int(alloc.get("pods", 110)) if r == "pods" else milli(alloc.get(r, 0), r)
            taken = used.get(name, {}).get(r, 0) - mine.get(name, {}).get(r, 0)
            free[r] += have - taken
    return free


def _wanted(group: JsonObj) -> dict[str, int]:
    """``minResources`` and ``minMember`` pods, in the scheduler's units."""
    asked = (group.get("spec") or {}).get("minResources") or {}
    wanted = {r: milli(q, r) for r, q in asked.items() if r in GAP_RESOURCES}
    wanted["pods"] = min_member(group)
    return wanted


def _text(resource: str, amount: int) -> str:
    if resource == "cpu":
        return str(Quantity.parse(f"{amount}m"))
    return str(amount)


def _resource_gap(sched: Scheduler, group: JsonObj, pods: list[JsonObj], used: Usage) -> str:
    """``map[<resource>:<missing> ...]`` when the nodes cannot hold the group, else ''."""
    free = _free(sched, pods, used)
    missing = {r: v - free[r] for r, v in _wanted(group).items() if v - free[r] > 0}
    if not missing:
        return ""
    return "map[" + " ".join(f"{r}:{_text(r, v)}" for r, v in sorted(missing.items())) + "]"


def _volcano(
    sched: Scheduler, group: JsonObj, pods: list[JsonObj], waiting: list[JsonObj], used: Usage
) -> None:
    status = copy.deepcopy(group.get("status") or {})
    phase = status.get("phase") or PENDING
    rtype = sched.rtype(VOLCANO_API, "PodGroup")
    need = min_member(group)
    if phase == PENDING:
        overused = _overused(sched, group, used)
        if overused:
            why = (
                f"pod group is not ready, {len(pods)} Pending, {need} minAvailable; "
                f"Pending: {len(waiting)} Unschedulable"
            )
            if _gang_unschedulable(sched, group, status, pods, waiting, why):
                names = ", ".join(f"overused {r}" for r in overused)
                record_event(sched.cluster, group, "Normal", "Unschedulable",
                             f"resource in cluster is overused: {names}", VOLCANO)  # fmt: skip
            return
        status["phase"] = INQUEUE
        group = write_status(sched.cluster, rtype, group, status)
        status = copy.deepcopy(group.get("status") or {})
    placed, stuck, detail = _placement(sched, waiting, used)
    if stuck is None or len(pods) - len(waiting) + len(placed) >= need:
        for pod, node in placed:
            sched.bind(pod, node, VOLCANO)
        set_condition(status.setdefault("conditions", []), "Scheduled", "True",
                      "tasks in gang are ready to be scheduled", "", sched.now())  # fmt: skip
        status["phase"] = RUNNING
        write_status(sched.cluster, rtype, group, status)
        return
    counts = sorted([f"{len(placed)} Schedulable", f"{len(waiting) - len(placed)} Unschedulable"])
    why = (
        f"pod group is not ready, {len(pods)} Pending, {need} minAvailable; Pending: "
        f"{', '.join(counts)}. Origin reason is {stuck['metadata']['name']}: "
        f"0/{len(sched.nodes())} nodes are available: {detail}."
    )
    _gang_unschedulable(sched, group, status, pods, waiting, why)


def _overused(sched: Scheduler, group: JsonObj, used: Usage) -> list[str]:
    """The resources of ``minResources`` the cluster cannot enqueue (overcommit plugin)."""
    asked = (group.get("spec") or {}).get("minResources") or {}
    found = []
    for r, q in sorted(asked.items()):
        total = sum(
            milli(((n.get("status") or {}).get("allocatable") or {}).get(r, 0), r)
            for n in sched.nodes()
        )
        taken = sum(row.get(r, 0) for row in used.values())
        if milli(q, r) > total * OVERCOMMIT - taken:
            found.append(r)
    return found


def _gang_unschedulable(
    sched: Scheduler,
    group: JsonObj,
    status: JsonObj,
    pods: list[JsonObj],
    waiting: list[JsonObj],
    why: str,
) -> bool:
    """Volcano's gang plugin: the PodGroup's ``Unschedulable`` condition and event, and the
    same message on each waiting pod. Whether the condition's message changed."""
    message = f"{len(waiting)}/{len(pods)} tasks in gang unschedulable: {why}"
    conditions = status.setdefault("conditions", [])
    old = next((c for c in conditions if c.get("type") == "Unschedulable"), None)
    changed = set_condition(
        conditions, "Unschedulable", "True", "NotEnoughResources", message, sched.now()
    )
    status.setdefault("phase", PENDING)
    if changed:
        write_status(sched.cluster, sched.rtype(VOLCANO_API, "PodGroup"), group, status)
    news = old is None or old.get("message") != message
    if news:
        record_event(sched.cluster, group, "Warning", "Unschedulable", message, VOLCANO)
    for pod in waiting:
        sched.unschedulable(pod, why, VOLCANO)
    return news

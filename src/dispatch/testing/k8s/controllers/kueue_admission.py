"""One scheduling pass of a ClusterQueue, as Kueue v0.17's scheduler decides it: a pure
function from the queue and its workloads to decisions (admit, stay pending with a message,
preempt), which the controller (:mod:`.kueue`) carries out.

Ground truth, kubernetes-sigs/kueue v0.17:

* Order: priority, then creation (``BestEffortFIFO`` and ``StrictFIFO``). Under
  ``StrictFIFO`` the first workload that is not admitted blocks those behind it; under
  ``BestEffortFIFO`` it does not, except a workload waiting for its preemptions, which stays
  at the head of its queue (``pkg/scheduler/scheduler.go``, ``pkg/cache/queue``).
* Flavor assignment per pod set in order, each resource group taking the first flavor that
  fits, else the first where preemption could make room (``whenCanPreempt: TryNextFlavor``),
  with the messages of ``pkg/scheduler/flavorassigner/flavorassigner.go``:
  ``couldn't assign flavors to pod set <ps>: insufficient unused quota for <r> in flavor
  <f>, <n> more needed``, ``... insufficient quota for <r> in flavor <f>, previously
  considered podsets requests (<a>) + current podset request (<b>) > maximum capacity
  (<c>)`` and ``resource <r> unavailable in ClusterQueue``; a preemptor's message ends with
  ``. Pending the preemption of <n> workload(s)``.
* Preemption within the ClusterQueue only as ``spec.preemption.withinClusterQueue`` allows
  (``Never`` by default; ``LowerPriority``; ``LowerOrNewerEqualPriority``:
  ``pkg/scheduler/preemption/common/preemption_policy.go``). Candidates already evicted
  first, then lower priority, then the most recently admitted
  (``common/ordering.go``); the fewest are kept by removing candidates until the workload
  fits and adding back, in reverse, those it still fits without
  (``preemption.go`` ``classicalPreemptions``). The message is ``preemptionMessage``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dispatch.testing.k8s.controllers.kueue_model import (
    LOWER_OR_NEWER_EQUAL,
    LOWER_PRIORITY,
    STRICT_FIFO,
    FlavorResource,
    QueueSpec,
    quantity_text,
)

#: flavor-assignment modes, best last (``flavorassigner``: NoFit < Preempt < Fit)
NO_FIT, PREEMPT, FIT = 0, 1, 2
IN_CLUSTER_QUEUE = "InClusterQueue"
#: ``HumanReadablePreemptionReasons`` for the one reason modelled (no cohorts)
REASON_TEXT = {IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue"}


@dataclass(frozen=True)
class PodSetNeed:
    name: str
    count: int
    requests: Mapping[str, int]  # the whole pod set's, in the scheduler's units


@dataclass(frozen=True)
class Entry:
    """A Workload as the scheduler sees it."""

    namespace: str
    name: str
    uid: str
    job_uid: str
    priority: int
    created: str  # RFC 3339: the queue-order timestamp
    pod_sets: tuple[PodSetNeed, ...]
    usage: Mapping[FlavorResource, int] = field(default_factory=dict)  # when admitted
    reserved_at: str = ""  # QuotaReserved's lastTransitionTime, when admitted
    evicted: bool = False


@dataclass(frozen=True)
class Assignment:
    mode: int
    flavors: tuple[tuple[str, Mapping[str, str]], ...]  # pod set -> resource -> flavor
    usage: Mapping[FlavorResource, int]
    message: str


@dataclass(frozen=True)
class Admit:
    entry: Entry
    assignment: Assignment


@dataclass(frozen=True)
class Pend:
    entry: Entry
    reason: str
    message: str


@dataclass(frozen=True)
class Preempt:
    victim: Entry
    preemptor: Entry
    reason: str
    message: str


Decision = Admit | Pend | Preempt


def schedule(queue: QueueSpec, pending: list[Entry], admitted: list[Entry]) -> list[Decision]:
    """Decisions for ``pending`` (workloads of ``queue`` that passed the inadmissibility
    checks) given ``admitted`` (those holding its quota, evicted ones included)."""
    used = _sum(e.usage for e in admitted)
    out: list[Decision] = []
    for entry in sorted(pending, key=lambda e: (-e.priority, e.created, e.name)):
        found = assign(queue, entry, used)
        if found.mode == FIT:
            out.append(Admit(entry, found))
            used = _sum((used, found.usage))
            continue
        victims = preemption_targets(queue, entry, found, admitted, used) if found.mode else []
        if victims:
            message = preemption_message(entry, queue.name)
            out += [Preempt(v, entry, IN_CLUSTER_QUEUE, message) for v in victims if not v.evicted]
            text = f"{found.message}. Pending the preemption of {len(victims)} workload(s)"
            out.append(Pend(entry, "Pending", text))
            break  # it heads its queue until the victims release their quota
        out.append(Pend(entry, "Pending", found.message))
        if queue.strategy == STRICT_FIFO:
            break
    return out


def assign(queue: QueueSpec, entry: Entry, used: Mapping[FlavorResource, int]) -> Assignment:
    """Flavors for each pod set of ``entry`` against what ``used`` leaves of the quota."""
    assumed: dict[FlavorResource, int] = {}
    chosen: list[tuple[str, Mapping[str, str]]] = []
    messages: list[str] = []
    mode = FIT
    for ps in entry.pod_sets:
        ps_mode, flavors, reasons = _assign_pod_set(queue, ps, used, assumed)
        if ps_mode != FIT:
            messages.append(
                f"couldn't assign flavors to pod set {ps.name}: {', '.join(sorted(reasons))}"
            )
        mode = min(mode, ps_mode)
        if ps_mode == NO_FIT:
            break
        for r, f in flavors.items():
            assumed[(f, r)] = assumed.get((f, r), 0) + ps.requests[r]
        chosen.append((ps.name, flavors))
    return Assignment(mode, tuple(chosen), assumed, "; ".join(messages))


def _assign_pod_set(
    queue: QueueSpec,
    ps: PodSetNeed,
    used: Mapping[FlavorResource, int],
    assumed: Mapping[FlavorResource, int],
) -> tuple[int, dict[str, str], list[str]]:
    requested = {r: v for r, v in ps.requests.items() if v > 0}
    for r in sorted(requested):
        if queue.group_of(r) is None:
            return NO_FIT, {}, [f"resource {r} unavailable in ClusterQueue"]
    mode, flavors, reasons = FIT, {}, []
    for group in queue.groups:
        wanted = {r: requested[r] for r in group.covered if r in requested}
        if not wanted:
            continue
        best: tuple[int, str] | None = None
        tried: list[str] = []
        for flavor in group.flavors:
            f_mode = FIT
            for r, v in sorted(wanted.items()):
                nominal = flavor.nominal.get(r, 0)
                before = assumed.get((flavor.name, r), 0)
                if before + v > nominal:
                    tried.append(
                        f"insufficient quota for {r} in flavor {flavor.name}, previously considered "
                        f"podsets requests ({quantity_text(r, before)}) + current podset request "
                        f"({quantity_text(r, v)}) > maximum capacity ({quantity_text(r, nominal)})"
                    )
                    f_mode = NO_FIT
                    break
                available = nominal - used.get((flavor.name, r), 0)
                if before + v > available:
                    more = quantity_text(r, before + v - available)
                    tried.append(
                        f"insufficient unused quota for {r} in flavor {flavor.name}, {more} more needed"
                    )
                    f_mode = PREEMPT
            if f_mode == FIT:
                best, tried = (FIT, flavor.name), []
                break
            if f_mode == PREEMPT and best is None:
                best = (PREEMPT, flavor.name)
        reasons += tried
        if best is None:
            return NO_FIT, {}, reasons
        mode = min(mode, best[0])
        flavors.update(dict.fromkeys(wanted, best[1]))
    return mode, flavors, reasons


def preemption_targets(
    queue: QueueSpec,
    entry: Entry,
    found: Assignment,
    admitted: list[Entry],
    used: Mapping[FlavorResource, int],
) -> list[Entry]:
    """The fewest admitted workloads whose removal lets ``found`` fit, or none."""
    nominal = {
        (f.name, r): f.nominal.get(r, 0) for g in queue.groups for f in g.flavors for r in g.covered
    }
    short = {fr for fr, v in found.usage.items() if used.get(fr, 0) + v > nominal.get(fr, 0)}
    candidates = [
        a
        for a in admitted
        if any(a.usage.get(fr, 0) for fr in short) and _may_preempt(queue, entry, a)
    ]
    # stable sorts, last key first: evicted ones, lower priority, most recently admitted, uid
    candidates.sort(key=lambda a: a.uid)
    candidates.sort(key=lambda a: a.reserved_at, reverse=True)
    candidates.sort(key=lambda a: (not a.evicted, a.priority))
    left = dict(used)

    def fits() -> bool:
        return all(left.get(fr, 0) + v <= nominal.get(fr, 0) for fr, v in found.usage.items())

    def take(a: Entry, sign: int) -> None:
        for fr, v in a.usage.items():
            left[fr] = left.get(fr, 0) - sign * v

    chosen: list[Entry] = []
    for candidate in candidates:
        take(candidate, 1)
        chosen.append(candidate)
        if fits():
            break
    else:
        return []
    for candidate in reversed(chosen[:-1]):
        take(candidate, -1)
        if fits():
            chosen.remove(candidate)
        else:
            take(candidate, 1)
    return chosen


def _may_preempt(queue: QueueSpec, preemptor: Entry, candidate: Entry) -> bool:
    policy = queue.within_cluster_queue
    lower = preemptor.priority > candidate.priority
    if policy == LOWER_PRIORITY:
        return lower
    if policy == LOWER_OR_NEWER_EQUAL:
        newer = preemptor.priority == candidate.priority and preemptor.created < candidate.created
        return lower or newer
    return False  # Never


def preemption_message(preemptor: Entry, cluster_queue: str) -> str:
    """``preemptionMessage``: both paths are the ClusterQueue's (``/<cq>``: no cohort)."""
    path = f"/{cluster_queue}"
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid or 'UNKNOWN'}, "
        f"JobUID: {preemptor.job_uid or 'UNKNOWN'}) due to {REASON_TEXT[IN_CLUSTER_QUEUE]}; "
        f"preemptor path: {path}; preemptee path: {path}"
    )


def _sum(items: Iterable[Mapping[FlavorResource, int]]) -> dict[FlavorResource, int]:
    out: dict[FlavorResource, int] = {}
    for item in items:
        for k, v in item.items():
            out[k] = out.get(k, 0) + v
    return out

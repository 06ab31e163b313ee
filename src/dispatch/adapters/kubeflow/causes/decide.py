"""The cause function: an attempt's state and typed cause, derived from its recorded evidence.

``diagnose(evidence, inputs) -> Diagnosis`` is pure: the same evidence and inputs always give
the same outcome; it does no I/O, reads no clock (``inputs.now``, else the latest time in the
evidence) and never raises on malformed objects (at worst the cause is ``unknown``). The
supervisor (through ``observe``/``watch``) and ``dispatch diagnose`` both call it.

The rule (design note 0006):

1. Facts are read from every object seen (``pods``, ``events``,
   ``cluster``), each with the time it happened according to the objects.
2. **The first failure in time wins.** Facts within ``SKEW`` seconds of the earliest are
   ties, broken by ``WEIGHT``: a disruption or a lost node outranks the exit codes of peers
   that crashed because a rank vanished. Exits after a pod's deletion was requested are
   consequences and never facts.
3. A Kueue eviction ends the attempt (``preempted``) only when a rank had started before it;
   before that, the attempt is simply queued again.
4. Waiting (unschedulable pods, a Workload not admitted, an admitted Workload without pods,
   a gang whose PodGroup has not formed) becomes ``no_capacity`` / ``start_failure`` once it
   outlasts ``inputs.patience`` (a scheduler-plugins gang: its ``scheduleTimeoutSeconds``).
5. Work re-run inside the attempt (a container restart, a replacement pod, a JobSet restart
   or re-creation) is ``unplanned_recovery`` whatever failure it recovered from, unless the
   runtime allows rank restarts; the state stays ``running`` while something still runs, so
   the supervisor stops it.
6. A cancel (by dispatch: ``inputs``; the TrainJob deleted; suspended after ranks started,
   not by Kueue) wins over what happened after it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dispatch.adapters.kubeflow.causes.cluster import (
    read_job,
    read_jobset,
    read_nodes,
    read_root,
    read_trainjob,
    read_workload,
)
from dispatch.adapters.kubeflow.causes.events import read_events
from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet, Ref
from dispatch.adapters.kubeflow.causes.facts import Fact, Facts, Wait
from dispatch.adapters.kubeflow.causes.operator import read_operator_job
from dispatch.adapters.kubeflow.causes.podgroups import read_pod_groups
from dispatch.adapters.kubeflow.causes.pods import SKEW, read_pods
from dispatch.adapters.kubeflow.causes.workloads import (
    OPERATOR_KINDS,
    jobset_max_restarts,
    managed_by_dispatch,
    ranks,
    replacement_plans,
    scoped,
    with_master,
    workloads,
)
from dispatch.adapters.kubeflow.objects import dig, names_of
from dispatch.model import Cause, Evidence, Failure, Outcome, State
from dispatch.model.units import format_duration

#: how long an attempt may wait for placement or pods before it is ``no_capacity`` /
#: ``start_failure``, when the cluster configures nothing else (seconds)
DEFAULT_PATIENCE = 600.0
#: the most proving evidence items an outcome carries
MAX_EVIDENCE = 12
#: facts of the same cause this close to the first one (seconds) are shown as its support
SUPPORT_WINDOW = 60.0

#: tie-breaking among facts within SKEW of each other (higher wins): infrastructure first
WEIGHT: dict[Cause, int] = {
    Cause.NODE_LOST: 90,
    Cause.PREEMPTED: 80,
    Cause.TIMEOUT: 70,
    Cause.OUT_OF_MEMORY: 60,
    Cause.START_FAILURE: 50,
    Cause.NO_CAPACITY: 45,
    Cause.APP_ERROR: 40,
    Cause.UNPLANNED_RECOVERY: 30,
    Cause.CANCELLED: 20,
    Cause.UNKNOWN: 10,
}


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the evidence cannot say: the cluster's patience, the time, dispatch's own acts."""

    #: seconds an attempt may wait for placement (or an admitted one for pods)
    patience: float = DEFAULT_PATIENCE
    #: the time of the judgement; None means the latest time found in the evidence
    now: float | None = None
    #: the runtime allows rank restarts (``allowRankRestart``): restarts are not unplanned
    restarts_allowed: bool = False
    #: dispatch cancelled the attempt (who asked), and when (None: time not known)
    cancelled_by: str | None = None
    cancelled_at: float | None = None
    #: keep only the evidence of this TrainJob (a dump may hold other objects)
    trainjob: str | None = None
    #: keep only the evidence of this workload, of any kind (wins over ``trainjob``)
    workload: Ref | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The TrainJob judged and its outcome.

    ``changes_at``: the earliest time at which the same evidence may give another outcome (a
    wait reaching the patience), or None when only new evidence can change it."""

    trainjob: str | None
    outcome: Outcome
    changes_at: float | None = None
    #: the workload judged (for a TrainJob, ``trainjob`` is its name)
    workload: Ref | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``dispatch diagnose --output json`` object (spec section 4)."""
        first = self.outcome.first_failure
        return {
            "workload": self.workload.to_json() if self.workload else None,
            "trainJob": self.trainjob,
            "state": self.outcome.state.value,
            "cause": self.outcome.cause.value if self.outcome.cause else None,
            "summary": self.outcome.summary,
            "firstFailure": (
                {"rank": first.rank, "pod": first.where, "exitCode": first.exit_code}
                if first
                else None
            ),
            "evidence": [e.to_json() for e in self.outcome.evidence],
        }


def diagnose(evidence: EvidenceSet, inputs: Inputs | None = None) -> Diagnosis:
    """The attempt's outcome and the evidence that proves it (see the module docstring)."""
    inputs = inputs or Inputs()
    root = inputs.workload
    if root is None and inputs.trainjob is not None:
        root = Ref("TrainJob", "", inputs.trainjob)
    if root is not None:
        evidence = scoped(evidence, root)
    else:
        root = next(iter(workloads(evidence)), None)
    facts = gather(evidence, root)
    changes_at = _next_deadline(facts, inputs)
    trainjob = root.name if root is not None and root.kind == "TrainJob" else None
    own = evidence.get(root.kind, root.name, root.namespace or None) if root else None
    return Diagnosis(trainjob, decide(facts, inputs), changes_at, own.ref if own else root)


def derive_outcome(evidence: EvidenceSet, inputs: Inputs | None = None) -> Outcome:
    """``diagnose(...).outcome``."""
    return diagnose(evidence, inputs).outcome


def gather(evidence: EvidenceSet, root: Ref | None = None) -> Facts:
    """Every fact the evidence holds about the workload ``root`` (default: its top-level one)."""
    facts = Facts(from_dump=evidence.is_dump)
    facts.with_master = with_master(evidence)
    facts.ranks = ranks(evidence, facts.with_master)
    facts.dispatch_managed = managed_by_dispatch(evidence)
    facts.plans = {
        f"JobSet/{h.ref.name}": f"spec.failurePolicy.maxRestarts {n} of JobSet {h.ref.name}"
        for h in evidence.histories("JobSet")
        if (n := jobset_max_restarts(h.latest)) > 0
    }
    pods = evidence.histories("Pod")
    read_pods(pods, facts, replacement_plans(evidence))
    init = {p.ref.name: set(names_of(dig(p.latest, "spec", "initContainers"))) for p in pods}
    read_events(evidence.histories("Event"), facts, init)
    if root is None:
        root = next(iter(workloads(evidence)), None)
    own = evidence.get(root.kind, root.name, root.namespace or None) if root else None
    if own is not None:
        read_root(own, facts)
    for history in evidence.histories("TrainJob"):
        read_trainjob(history, facts)
    for history in evidence.histories("JobSet"):
        read_jobset(history, facts)
    for history in evidence.histories("Job"):
        read_job(history, facts, root=history is own)
    for kind in OPERATOR_KINDS:
        for history in evidence.histories(kind):
            read_operator_job(history, facts)
    for history in evidence.histories("Workload"):
        read_workload(history, facts)
    read_nodes(evidence, pods, facts)
    read_pod_groups(evidence.histories("PodGroup"), pods, facts)
    if facts.ran_proofs:
        facts.pods_seen = True
    return facts


def first_of(facts: list[Fact]) -> Fact | None:
    """The first fact in time; within ``SKEW`` of the earliest, the heaviest cause wins.

    Facts without a time come after every timed one.
    """
    timed = [f for f in facts if f.at is not None]
    if not timed:
        return min(facts, key=_rank_key, default=None)
    earliest = min(f.at for f in timed if f.at is not None)
    near = [f for f in timed if f.at is not None and f.at <= earliest + SKEW]
    return min(near, key=_rank_key)


def _rank_key(fact: Fact) -> tuple[int, float, bool, str]:
    """Heaviest cause, then earliest, then an object's own state before an event about it."""
    at = fact.at if fact.at is not None else float("inf")
    from_event = all(p.kind == "event" for p in fact.proofs)
    return (-WEIGHT.get(fact.cause, 0), at, from_event, fact.pod or "")


def decide(facts: Facts, inputs: Inputs) -> Outcome:
    """The decision over gathered facts (rules 2-7 of the module docstring)."""
    now = inputs.now if inputs.now is not None else facts.latest
    started = facts.first_start()
    planned, unplanned = _recoveries(facts, inputs)
    failures = list(facts.failures)
    failures += [
        replace(e, summary=f"{e.summary} (after ranks had started)")
        for e in facts.evictions
        if _after(e.at, started)
    ]
    failures += _overdue(facts, now, inputs.patience, started)
    recovered = [f for f in failures if _absorbed(f, planned)]
    first = first_of([f for f in failures if f not in recovered])
    recovery = first_of(unplanned)
    success = first_of(facts.successes)
    cancel = _cancel(facts, inputs, started, now)

    if cancel is not None and all(
        _before(cancel, other) for other in (first, recovery, success) if other is not None
    ):
        return _outcome(State.CANCELLED, Cause.CANCELLED, cancel.summary, cancel, [cancel])
    if recovery is not None and not (success is not None and _before(success, recovery)):
        state = State.RUNNING if facts.live_pods and not _final_ends(facts) else State.FAILED
        cause_of = first if first is not None and _before(first, recovery) else None
        summary = recovery.summary + (f", after: {cause_of.summary}" if cause_of else "")
        support = [f for f in facts.recoveries if f is not recovery and _supports(f, recovery)]
        shown = [recovery, *([cause_of] if cause_of else []), *support]
        return _outcome(state, Cause.UNPLANNED_RECOVERY, summary, cause_of or recovery, shown)
    if success is not None and (first is None or _before(success, first)):
        return _outcome(State.SUCCEEDED, None, success.summary, None, facts.successes)
    if first is not None:
        support = [f for f in failures if f is not first and _supports(f, first)]
        if first.exit_code is None:  # an event first; the pod's own status has the code
            code = next((f.exit_code for f in support if f.pod == first.pod), None)
            first = replace(first, exit_code=code)
        # waiting for capacity is what the objects show; ending the attempt is policy's call
        waiting = first.cause is Cause.NO_CAPACITY and started is None and not facts.ends
        state = State.QUEUED if waiting else State.FAILED
        return _outcome(state, first.cause, first.summary, first, [first, *support])
    if recovered:
        # every failure was followed by a re-run the workload's own spec asks for
        earliest = first_of(recovered) or recovered[0]
        # the other proofs of that failure too (an event and the pod's own condition, which
        # a clock may date a second apart)
        support = [f for f in recovered if f is not earliest and _supports(f, earliest)]
        shown = [earliest, *support, *planned[:3]]
        then = _then(planned, earliest)
        if _final_ends(facts):
            end = _the_end(facts)
            summary = f"{earliest.summary}; then {then}; {end.summary}"
            return _outcome(State.FAILED, earliest.cause, summary, earliest, [*shown, end])
        summary = f"running again after: {earliest.summary}; then {then}"
        return _outcome(State.RUNNING, None, summary, None, shown)
    if facts.ends:
        end = _the_end(facts)
        if facts.from_dump:
            missing = "" if facts.pods_in_evidence else " (no pods of it in the dump)"
            summary = f"{end.summary}; nothing in the dump says why{missing}"
        else:
            summary = f"{end.summary}; no recorded evidence says why"
        return _outcome(State.FAILED, Cause.UNKNOWN, summary, None, facts.ends)
    return _waiting(facts, started)


def _final_ends(facts: Facts) -> list[Fact]:
    """The ends that no re-run followed (a Job's failure that a JobSet restart answered is
    not the end of the workload)."""
    reruns = [r.at for r in facts.recoveries if r.at is not None]
    last = max(reruns, default=None)
    return [
        e
        for e in facts.ends
        if last is None or e.at is None or e.at >= last - SKEW or facts.is_root(e)
    ]


def _the_end(facts: Facts) -> Fact:
    """The end to report: the workload's own terminal condition first, else the earliest."""
    own = [e for e in facts.ends if facts.is_root(e)]
    return first_of(own) or first_of(facts.ends) or facts.ends[0]


def _recoveries(facts: Facts, inputs: Inputs) -> tuple[list[Fact], list[Fact]]:
    """(planned, unplanned) re-runs. Planned: those the workload's own spec asks for (pod
    ``restartPolicy``, Job ``backoffLimit``, JobSet ``maxRestarts``, ...) when dispatch did not
    make it; dispatch starts its attempts itself, so inside one every re-run is unplanned,
    unless the runtime allows rank restarts (``inputs.restarts_allowed``: none is a cause)."""
    if inputs.restarts_allowed:
        return [], []
    if facts.dispatch_managed:
        return [], list(facts.recoveries)
    planned = [r for r in facts.recoveries if r.planned]
    return planned, [r for r in facts.recoveries if not r.planned]


def _absorbed(failure: Fact, planned: list[Fact]) -> bool:
    """A rank's failure followed by a planned re-run of that rank (or of the whole workload)."""
    if failure.at is None or (failure.rank is None and failure.pod is None):
        return False
    for rerun in planned:
        if rerun.at is None or rerun.at < failure.at - SKEW:
            continue
        whole = rerun.rank is None and rerun.pod is None
        if (
            whole
            or rerun.pod == failure.pod
            or (rerun.rank is not None and rerun.rank == failure.rank)
        ):
            return True
    return False


def _then(planned: list[Fact], after: Fact | None = None) -> str:
    """What followed the failures: re-runs (of ``after``'s rank, when it has some), and the
    field of the spec that asked for them."""
    mine = [f for f in planned if after is not None and _absorbed(after, [f])]
    planned = mine or planned
    by_object: dict[str, str] = {}  # per object, the most precise text (with the value)
    for text in sorted({f.planned for f in planned}, key=len, reverse=True):
        by_object.setdefault(text.rpartition(" of ")[2], text)
    fields = list(by_object.values())
    more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
    return f"re-run as {fields[0]} asks{more}" if fields else "re-run"


def _waiting(facts: Facts, started: float | None) -> Outcome:
    """The state of an attempt that has not ended."""
    if started is not None:
        start = first_of(facts.starts)
        return _outcome(State.RUNNING, None, "a rank started", None, [start] if start else [])
    if facts.workload is None and not facts.pods_seen:
        return Outcome(State.PENDING, summary=f"no {facts.workload_kind} observed yet")
    if facts.suspended and not facts.kueue:
        return Outcome(State.HELD, summary=f"the {facts.workload_kind} is suspended (held)")
    evicted = first_of(facts.evictions)
    if evicted is not None:
        return _outcome(
            State.QUEUED,
            None,
            f"queued again before any rank started: {evicted.summary}",
            None,
            [evicted],
        )
    text = "waiting for Kueue to admit it" if facts.admitted_now is False else "no rank started yet"
    return Outcome(State.QUEUED, summary=text)


def _cancel(facts: Facts, inputs: Inputs, started: float | None, now: float | None) -> Fact | None:
    found = list(facts.cancels) + [
        s for s in facts.suspensions if _after(s.at, started, strict=True)
    ]
    if inputs.cancelled_by is not None:
        at = inputs.cancelled_at if inputs.cancelled_at is not None else now
        summary = f"cancelled by {inputs.cancelled_by}"
        record = Evidence(
            kind="cancel",
            key="cancel",
            observed_at=at or 0.0,
            summary=summary,
            data={"actor": inputs.cancelled_by},
        )
        found.append(Fact(Cause.CANCELLED, at, summary, (record,)))
    return min(found, key=lambda f: f.at if f.at is not None else float("inf"), default=None)


def _overdue(facts: Facts, now: float | None, patience: float, started: float | None) -> list[Fact]:
    """Waits that outlasted the patience, as failures dated when the patience ran out."""
    found: list[Fact] = []
    waits = list(facts.waits)
    if started is None and not facts.pods_seen:
        waits += _pod_waits(facts, now)
    for wait in waits:
        limit = patience if wait.patience is None else wait.patience
        end = now if wait.ongoing else wait.until
        if end is not None and now is not None:
            end = min(end, now)  # judged as of ``now``: what came later is not known yet
        if end is None or end - wait.since < limit:
            continue
        waited = format_duration(end - wait.since)
        summary = f"{wait.summary} (waited {waited}, patience {format_duration(limit)})"
        at = wait.since + limit
        found.append(Fact(wait.cause, at, summary, wait.proofs, wait.rank, wait.pod))
    return found


def _next_deadline(facts: Facts, inputs: Inputs) -> float | None:
    """When the first ongoing wait still under the patience reaches it (see ``_overdue``)."""
    now = inputs.now if inputs.now is not None else facts.latest
    waits = list(facts.waits)
    if facts.first_start() is None and not facts.pods_seen:
        waits += _pod_waits(facts, now)
    limits = [(w, inputs.patience if w.patience is None else w.patience) for w in waits]
    due = [
        w.since + limit
        for w, limit in limits
        if w.ongoing and (now is None or now - w.since < limit)
    ]
    return min(due, default=None)


def _pod_waits(facts: Facts, now: float | None) -> list[Wait]:
    """No pod was ever seen: waiting for Kueue (``no_capacity``) or, admitted, for pods
    (``start_failure``: e.g. a runtime patch naming a missing container, or a Kueue/Trainer
    version mismatch that leaves the TrainJob suspended)."""
    admitted = [f.at for f in facts.admissions if f.at is not None]
    proofs = tuple(p for f in facts.admissions for p in f.proofs)
    never = "no pod is in the dump" if facts.from_dump else "no pod was ever created"
    kind = facts.workload_kind
    if facts.admitted_now or (facts.admitted_now is None and admitted):
        if admitted:
            text = f"Kueue admitted the workload but {never}"
            # measured from the first admission: requeues in between created no pod either
            return [Wait(Cause.START_FAILURE, min(admitted), now, True, text, proofs)]
        return []
    created = facts.workload_created
    if facts.workload is None or created is None:
        return []
    if not facts.kueue and not facts.suspended:
        text = f"the {kind} exists but {never}"
        return [Wait(Cause.START_FAILURE, created, now, True, text, facts.workload_proof)]
    if facts.kueue and facts.admitted_now is None:
        text = f"the {kind} waits in its Kueue queue and no Workload admitted it"
        return [Wait(Cause.NO_CAPACITY, created, now, True, text, facts.workload_proof)]
    return []


def _after(at: float | None, started: float | None, *, strict: bool = False) -> bool:
    """An eviction/suspension at ``at`` came after a rank started (unknown time: if started)."""
    if started is None:
        return False
    if at is None:
        return True
    return at > started if strict else at >= started - SKEW


def _before(one: Fact, other: Fact) -> bool:
    if one.at is None:
        return False
    return other.at is None or one.at <= other.at


def _supports(fact: Fact, first: Fact) -> bool:
    """Another proof of the same thing: the same cause at the same pod, or close in time."""
    if fact.cause is not first.cause:
        return False
    if first.pod is not None and fact.pod == first.pod:
        return True
    if fact.at is None or first.at is None:
        return False
    return (fact.pod is None or first.pod is None) and abs(fact.at - first.at) <= SUPPORT_WINDOW


def _outcome(
    state: State, cause: Cause | None, summary: str, located: Fact | None, shown: list[Fact]
) -> Outcome:
    failure = None
    if located is not None and (located.pod is not None or located.rank is not None):
        failure = Failure(
            rank=located.rank,
            node=located.rank,
            exit_code=located.exit_code,
            at=located.at,
            where=located.pod,
            message=located.summary,
        )
    evidence: list[Evidence] = []
    keys: set[str] = set()
    for fact in shown:
        for item in fact.proofs:
            if item.key not in keys and len(evidence) < MAX_EVIDENCE:
                keys.add(item.key)
                evidence.append(item)
    return Outcome(state, cause, summary, failure, tuple(evidence))

"""From an attempt's evidence to the outcome dispatch reports, and the guards that follow.

``Verdicts`` wraps the pure cause function (``causes.diagnose``) with what a live watch adds:

* **Settling.** The streams of different kinds are not ordered with each other: a peer's exit
  code or the TrainJob's ``Failed`` can arrive before the Pod, Node or Workload change that
  explains it. A terminal outcome is therefore reported only once every stream has caught up
  with the position (resourceVersion) the capture had reached when that outcome first
  appeared, or fell quiet since (``caught_up``), or, as a fallback when streams cannot be compared or one stays
  down, once it has been the outcome for ``settle`` seconds; until then the attempt keeps its
  previous report.
* **A terminal attempt stays terminal.** The first terminal outcome reported is final for the
  adapter; later evidence is still recorded but never reopens it.
* **Retirement** (``must_retire``). dispatch alone starts executions, so a TrainJob whose attempt
  ended must never run again. It is deleted when its attempt ended but the TrainJob could run
  again: Kueue evicted it after a rank started (Kueue would resume the same TrainJob, running
  its ranks twice under one ``DISPATCH_ATTEMPT``), dispatch ended it (waited past patience,
  image pull failure, ...), or it ran again after it ended (platform reference A.7: Trainer
  re-creates the JobSet of a failed TrainJob whose JobSet disappeared) — that re-run is
  reported as ``unplanned_recovery`` evidence (a re-run is a JobSet uid other than those
  shown when the outcome became final, or, if none was shown then, the first shown after).
  The retiring code reads the TrainJob again first and judges it as it is then. A suspended TrainJob of an ended attempt is
  always retired (Kueue resumes what it suspended). A TrainJob that is ``Complete`` or
  ``Failed``, not suspended, and runs nothing new is left for post-mortems. So is one whose
  attempt ended with a rank's pod failing, on a runtime that lets no rank restart
  (``ends_by_itself``): its Job, JobSet and then the TrainJob fail without dispatch, however
  late Trainer writes ``Failed``; only if it has not failed ``end_grace`` seconds after the
  end is it retired. The decision comes from the outcome and the runtime, never from the
  order in which the TrainJob's ``Failed`` and the pod's exit arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dispatch.adapters.kubeflow.causes.decide import Diagnosis, Inputs, diagnose
from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet
from dispatch.adapters.kubeflow.live.refusals import (
    admitted_at,
    readmitted,
    refused_by_event,
    refused_by_inference,
)
from dispatch.adapters.kubeflow.objects import dig, text_of, true_condition
from dispatch.model import Cause, Evidence, Outcome, State

#: seconds a terminal outcome must hold before it is reported when the streams cannot say
#: they caught up with it
DEFAULT_SETTLE = 120.0
#: seconds an ended attempt's TrainJob is given to be marked Failed by Trainer on its own
DEFAULT_END_GRACE = 600.0


@dataclass(slots=True)
class Standing:
    """What the adapter concluded about one attempt so far."""

    final: Outcome | None = None
    terminal_since: float | None = None
    terminal_at: int | None = None  # the capture's position when it first appeared
    jobset_uids: frozenset[str] = frozenset()
    rerun: Evidence | None = None
    retired: bool = False
    #: the name now holds a TrainJob other than the attempt's (``identity``): never judged
    #: again, never retired
    replaced: bool = False
    #: the last judgement: (records judged, cancelled by) and its outcome; ``changes_at`` is
    #: when that outcome may change with time alone (``Diagnosis.changes_at``)
    judged: tuple[tuple[int, str | None], Outcome] | None = None
    changes_at: float | None = None
    #: records already searched for a re-run (after the final outcome)
    searched: int = 0
    #: after the final outcome: Kueue's readmission of the Workload (its name, when seen),
    #: the refused resumes recorded (their keys) and the guard records not yet taken
    readmission: tuple[str, float] | None = None
    refusals: set[str] = field(default_factory=set)
    guard_records: list[Evidence] = field(default_factory=list)


@dataclass
class Verdicts:
    """Outcomes per TrainJob name, with settling, finality and the retirement rule."""

    patience: float
    restarts_allowed: bool = False
    settle: float = DEFAULT_SETTLE
    #: seconds a TrainJob that should fail by itself (``ends_by_itself``) is given to do so
    #: before it is retired anyway (a runtime that is not what it was checked to be)
    end_grace: float = DEFAULT_END_GRACE
    standings: dict[str, Standing] = field(default_factory=dict)
    #: names whose terminal outcome settles, and the patience deadlines of waiting ones
    _settling: set[str] = field(default_factory=set)
    _deadlines: dict[str, float] = field(default_factory=dict)
    #: names with guard records not taken yet
    _guarded: set[str] = field(default_factory=set)

    def judge(
        self,
        name: str,
        records: Sequence[Evidence],
        now: float,
        *,
        cancelled_by: str | None = None,
        settled: bool = False,
        position: int | None = None,
        caught_up: Callable[[int, float], bool] | None = None,
    ) -> Outcome | None:
        """The outcome to report for TrainJob ``name`` given every record kept for it, or
        None while a terminal outcome settles (keep reporting what was reported before).

        ``settled``: report a terminal outcome at once (a one-shot ``observe`` has complete
        lists, so nothing explaining is still on its way). ``position``/``caught_up``: the
        capture's progress (see the module docstring)."""
        standing = self._standing(name)
        if standing.replaced and standing.final is not None:
            return standing.final
        if standing.final is not None:
            self._look_for_rerun(standing, name, records, now, everything=settled)
            return standing.final
        # Judgements over the capture's records (which only grow) are remembered: the same
        # records give the same outcome until ``changes_at``. One-shot lists are always judged.
        key = (len(records), cancelled_by)
        due = standing.changes_at is not None and now >= standing.changes_at
        if not settled and standing.judged is not None and standing.judged[0] == key and not due:
            outcome = standing.judged[1]
        else:
            diagnosis = self._diagnose(name, records, now, cancelled_by)
            outcome = diagnosis.outcome
            if not settled:
                standing.judged, standing.changes_at = (key, outcome), diagnosis.changes_at
                self._index(name, standing)
        if not outcome.is_terminal:
            standing.terminal_since = standing.terminal_at = None
            self._settling.discard(name)
            return outcome
        if standing.terminal_since is None:
            standing.terminal_since, standing.terminal_at = now, position
            self._settling.add(name)
        target = standing.terminal_at
        since = standing.terminal_since
        streams_done = target is not None and caught_up is not None and caught_up(target, since)
        if settled or streams_done or now - standing.terminal_since >= self.settle:
            standing.final = outcome
            self._settling.discard(name)
            self._deadlines.pop(name, None)
            standing.jobset_uids = _jobset_uids(EvidenceSet.from_evidence(records), name)
            standing.searched = 0 if settled else len(records)
            if not settled:
                self._look_at_end(standing, name, records, now)
            return outcome
        return None

    def would_end(
        self,
        name: str,
        records: Sequence[Evidence],
        now: float,
        cancelled_by: str | None = None,
    ) -> bool:
        """Whether these records would end the attempt now, if judged (nothing is remembered);
        False once the outcome is final, since then no judgement changes it."""
        standing = self.standings.get(name)
        if standing is not None and standing.final is not None:
            return False
        return self._diagnose(name, records, now, cancelled_by).outcome.is_terminal

    def _diagnose(
        self, name: str, records: Sequence[Evidence], now: float, cancelled_by: str | None
    ) -> Diagnosis:
        inputs = Inputs(
            patience=self.patience,
            now=now,
            restarts_allowed=self.restarts_allowed,
            cancelled_by=cancelled_by,
            trainjob=name,
        )
        diagnosis = diagnose(EvidenceSet.from_evidence(records), inputs)
        outcome = diagnosis.outcome
        if outcome.state is State.QUEUED and outcome.cause is not None:
            # the objects still wait (e.g. a quota it can never fit); the attempt has failed
            return replace(diagnosis, outcome=replace(outcome, state=State.FAILED))
        return diagnosis

    def _look_for_rerun(
        self,
        standing: Standing,
        name: str,
        records: Sequence[Evidence],
        now: float,
        *,
        everything: bool,
    ) -> None:
        """After the final outcome only a re-run matters: a JobSet not seen before, in the
        capture's records filed since the last look (``everything``: in all of a one-shot
        list)."""
        start = 0 if everything else standing.searched
        if len(records) <= start:
            return
        self._look_for_refusals(standing, name, records[start:])
        fresh = EvidenceSet.from_evidence(records[start:])
        if not everything:
            standing.searched = len(records)
        found = _jobset_uids(fresh, name)
        if not standing.jobset_uids:
            # no JobSet shown when the outcome became final (its stream lagged): the first
            # ones shown are the attempt's own, not a re-run
            standing.jobset_uids = found
            return
        new = found - standing.jobset_uids
        if new and standing.rerun is None:
            standing.rerun = _rerun_evidence(name, sorted(new), now)

    def _look_for_refusals(
        self, standing: Standing, name: str, records: Sequence[Evidence]
    ) -> None:
        """After the final outcome: the guard's refusal Events, and Kueue admitting the
        Workload again (``refusals``; judged by ``refusal_due``)."""
        since = standing.terminal_since
        for record in records:
            found = refused_by_event(record, name)
            if found is not None:
                self._add_refusal(name, standing, found)
            workload = readmitted(record)
            later = since is not None and record.observed_at > since
            if workload and standing.readmission is None and later:
                standing.readmission = (workload, record.observed_at)

    def _look_at_end(
        self, standing: Standing, name: str, records: Sequence[Evidence], now: float
    ) -> None:
        """When the outcome becomes final: the guard's refusal Events recorded before (the
        supervisor was down or behind when the guard refused), and the Workload's last state:
        admitted again already (its readmission counts from its ``Admitted`` time)."""
        last_workload = None
        for record in records:
            found = refused_by_event(record, name)
            if found is not None:
                self._add_refusal(name, standing, found)
            if record.kind == "workload":
                last_workload = record
        workload = readmitted(last_workload) if last_workload is not None else None
        if workload and last_workload is not None:
            at = admitted_at(last_workload)
            standing.readmission = (workload, now if at is None else min(at, now))

    def _add_refusal(self, name: str, standing: Standing, record: Evidence) -> None:
        if record.key in standing.refusals or len(standing.refusals) >= MAX_REFUSALS:
            return
        standing.refusals.add(record.key)
        standing.guard_records.append(record)
        self._guarded.add(name)

    def refusal_due(self, name: str, trainjob: Mapping[str, Any] | None, now: float) -> None:
        """Record a refused resume inferred from Kueue's readmission of an ended attempt's
        Workload (``refusals``), once, when no Event of the guard proved it."""
        standing = self.standings.get(name)
        if standing is None or standing.final is None or standing.readmission is None:
            return
        if standing.refusals:
            return
        workload, seen_at = standing.readmission
        found = refused_by_inference(name, trainjob, workload, seen_at, now)
        if found is not None:
            self._add_refusal(name, standing, found)

    def take_guard_records(self, name: str) -> list[Evidence]:
        """The guard records (refused resumes) found for ``name`` since the last call."""
        standing = self.standings.get(name)
        if standing is None or not standing.guard_records:
            return []
        taken, standing.guard_records = standing.guard_records, []
        self._guarded.discard(name)
        return taken

    def guarded_names(self) -> list[str]:
        """The names with guard records not taken yet."""
        return sorted(self._guarded)

    def _index(self, name: str, standing: Standing) -> None:
        if standing.changes_at is None:
            self._deadlines.pop(name, None)
        else:
            self._deadlines[name] = standing.changes_at

    def pending_names(self, now: float) -> set[str]:
        """Every name for which ``pending(name, now)`` holds, without looking at the others."""
        due = {name for name, at in self._deadlines.items() if now >= at}
        return self._settling | due

    def pending(self, name: str, now: float | None = None) -> bool:
        """The outcome may change without new evidence about this TrainJob: a terminal
        outcome waits to settle (on the streams' progress, or time), or a wait reaches the
        patience (at ``now``; None: at any time)."""
        if name in self._settling:
            return True
        at = self._deadlines.get(name)
        return at is not None and (now is None or now >= at)

    def must_retire(
        self, name: str, trainjob: Mapping[str, Any] | None, now: float | None = None
    ) -> str | None:
        """Why the TrainJob must be deleted now, or None (see the module docstring). ``now``:
        the time of asking (without it, a TrainJob left to fail by itself is never retired)."""
        standing = self.standings.get(name)
        if standing is None or standing.final is None or standing.retired or trainjob is None:
            return None
        if standing.replaced or dig(trainjob, "metadata", "deletionTimestamp"):
            return None
        if standing.rerun is not None:
            return f"it ran again after its attempt ended ({standing.rerun.summary})"
        if standing.final.state is State.SUCCEEDED:
            return None
        suspended = dig(trainjob, "spec", "suspend") is True  # Kueue resumes what it suspended
        finished = any(true_condition(trainjob, kind) for kind in ("Failed", "Complete"))
        if finished and not suspended:
            return None
        cause = standing.final.cause.value if standing.final.cause else "?"
        if not suspended and self.ends_by_itself(standing.final):
            # Trainer has not written Failed yet; a runtime dispatch accepts makes it fail
            since = standing.terminal_since
            if now is None or since is None or now - since < self.end_grace:
                return None
            return (
                f"its attempt ended ({cause}) but the TrainJob did not fail on its own within "
                f"{self.end_grace:g} s"
            )
        return f"its attempt ended ({cause}) but the TrainJob could still run"

    def awaits_end(self, name: str, trainjob: Mapping[str, Any] | None, now: float) -> bool:
        """The attempt ended, its TrainJob is left to fail by itself and has not yet, within
        ``end_grace``: keep watching it (``must_retire`` answers once the grace is over)."""
        standing = self.standings.get(name)
        if standing is None or standing.final is None or standing.retired or trainjob is None:
            return False
        if (
            standing.replaced
            or dig(trainjob, "spec", "suspend") is True
            or dig(trainjob, "metadata", "deletionTimestamp")
        ):
            return False
        if any(true_condition(trainjob, kind) for kind in ("Failed", "Complete")):
            return False
        since = standing.terminal_since
        return (
            self.ends_by_itself(standing.final)
            and since is not None
            and now - since < self.end_grace
        )

    def ends_by_itself(self, final: Outcome) -> bool:
        """Whether the TrainJob of an attempt that ended so fails without dispatch: a rank's
        pod failed (its exit, an OOM kill, a disruption) and the runtime lets no rank restart
        (what dispatch's runtime rules ask: Job ``backoffLimit: 0``, pods ``restartPolicy:
        Never``, JobSet ``maxRestarts: 0`` or a ``FailJobSet`` rule), so its Job fails, then
        its JobSet, then the TrainJob. Decided from the outcome and the runtime, never from
        which event arrived first. Waits dispatch ended (no pod yet, an image that never
        pulls) and re-runs do not end by themselves."""
        if self.restarts_allowed or final.first_failure is None:
            return False
        return final.cause in _POD_FAILURES

    def release(self, name: str) -> bool:
        """True once the outcome of ``name`` is final: the records judged so far are never read
        again (re-run detection reads only later ones), so the caller may drop them; records
        passed afterwards are then counted from the first one kept after."""
        standing = self.standings.get(name)
        if standing is None or standing.final is None:
            return False
        standing.searched, standing.judged = 0, None
        return True

    def replaced(self, name: str, outcome: Outcome) -> Outcome:
        """The name now holds another TrainJob (``identity``): the attempt's outcome is final
        (``outcome``, unless one was final before) and nothing under the name is retired."""
        standing = self._standing(name)
        standing.replaced = True
        if standing.final is None:
            standing.final = outcome
        self._settling.discard(name)
        self._deadlines.pop(name, None)
        return standing.final

    def retired(self, name: str) -> None:
        self._standing(name).retired = True

    def rerun(self, name: str) -> Evidence | None:
        standing = self.standings.get(name)
        return standing.rerun if standing else None

    def _standing(self, name: str) -> Standing:
        """The standing of ``name``, made when there is none (not made and thrown away on
        every judgement)."""
        standing = self.standings.get(name)
        if standing is None:
            standing = self.standings[name] = Standing()
        return standing

    def forget(self, name: str) -> None:
        self.standings.pop(name, None)
        self._settling.discard(name)
        self._deadlines.pop(name, None)


#: refused resumes recorded per attempt at most (Kueue retries with backoff, for ever)
MAX_REFUSALS = 5
#: causes of a rank's pod that failed (the first failure names the rank); a start failure is
#: not one: a pod whose image never pulls stays Pending, nothing fails it
_POD_FAILURES = frozenset({Cause.APP_ERROR, Cause.OUT_OF_MEMORY, Cause.PREEMPTED, Cause.NODE_LOST})


def _jobset_uids(evidence: EvidenceSet, name: str) -> frozenset[str]:
    history = evidence.get("JobSet", name)
    if history is None:
        return frozenset()
    found = {text_of(dig(o, "metadata", "uid")) for o in history.objects()}
    found.discard("")
    return frozenset(found)


def _rerun_evidence(name: str, uids: list[str], now: float) -> Evidence:
    return Evidence(
        kind="guard",
        key=f"guard/{name}/rerun/{','.join(uids)}",
        observed_at=now,
        summary=(
            f"TrainJob {name} ran again after its attempt ended (new JobSet {', '.join(uids)}): "
            f"{Cause.UNPLANNED_RECOVERY.value}; dispatch deletes it"
        ),
        data={"trainJob": name, "jobSetUids": uids, "cause": Cause.UNPLANNED_RECOVERY.value},
    )

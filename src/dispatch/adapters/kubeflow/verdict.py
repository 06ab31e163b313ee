"""From an attempt's evidence to the outcome dispatch reports, and the guards that follow.

``Verdicts`` wraps the pure cause function (``causes.diagnose``) with what a live watch adds:

* **Settling.** The streams of different kinds are not ordered with each other: a peer's exit
  code or the TrainJob's ``Failed`` can arrive before the Pod, Node or Workload change that
  explains it. A terminal outcome is therefore reported only once every stream has caught up
  with the position (resourceVersion) the capture had reached when that outcome first
  appeared (``caught_up``), or, as a fallback when streams cannot be compared or one stays
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
  ``Failed``, not suspended, and runs nothing new is left for post-mortems.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dispatch.adapters.kubeflow.causes import Inputs, diagnose
from dispatch.adapters.kubeflow.causes_evidence import EvidenceSet, text_of
from dispatch.adapters.kubeflow.shape import dig
from dispatch.model import Cause, Evidence, Outcome, State

#: seconds a terminal outcome must hold before it is reported when the streams cannot say
#: they caught up with it
DEFAULT_SETTLE = 120.0


def _condition_true(obj: Mapping[str, Any] | None, kind: str) -> bool:
    for cond in dig(obj, "status", "conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind and cond.get("status") == "True":
            return True
    return False


@dataclass
class Standing:
    """What the adapter concluded about one attempt so far."""

    final: Outcome | None = None
    terminal_since: float | None = None
    terminal_at: int | None = None  # the capture's position when it first appeared
    jobset_uids: frozenset[str] = frozenset()
    rerun: Evidence | None = None
    retired: bool = False


@dataclass
class Verdicts:
    """Outcomes per TrainJob name, with settling, finality and the retirement rule."""

    patience: float
    restarts_allowed: bool = False
    settle: float = DEFAULT_SETTLE
    standings: dict[str, Standing] = field(default_factory=dict)

    def judge(
        self,
        name: str,
        records: Sequence[Evidence],
        now: float,
        *,
        cancelled_by: str | None = None,
        settled: bool = False,
        position: int | None = None,
        caught_up: Callable[[int], bool] | None = None,
    ) -> Outcome | None:
        """The outcome to report for TrainJob ``name`` given every record kept for it, or
        None while a terminal outcome settles (keep reporting what was reported before).

        ``settled``: report a terminal outcome at once (a one-shot ``observe`` has complete
        lists, so nothing explaining is still on its way). ``position``/``caught_up``: the
        capture's progress (see the module docstring)."""
        standing = self.standings.setdefault(name, Standing())
        evidence = EvidenceSet.from_evidence(records)
        inputs = Inputs(
            patience=self.patience,
            now=now,
            restarts_allowed=self.restarts_allowed,
            cancelled_by=cancelled_by,
            trainjob=name,
        )
        outcome = diagnose(evidence, inputs).outcome
        uids = _jobset_uids(evidence, name)
        if standing.final is not None:
            if not standing.jobset_uids:
                # no JobSet shown when the outcome became final (its stream lagged): the first
                # ones shown are the attempt's own, not a re-run
                standing.jobset_uids = uids
            new = uids - standing.jobset_uids
            if new and standing.rerun is None:
                standing.rerun = _rerun_evidence(name, sorted(new), now)
            return standing.final
        if not outcome.is_terminal:
            standing.terminal_since = standing.terminal_at = None
            return outcome
        if standing.terminal_since is None:
            standing.terminal_since, standing.terminal_at = now, position
        target = standing.terminal_at
        streams_done = target is not None and caught_up is not None and caught_up(target)
        if settled or streams_done or now - standing.terminal_since >= self.settle:
            standing.final = outcome
            standing.jobset_uids = uids
            return outcome
        return None

    def pending(self, name: str) -> bool:
        """A terminal outcome waits to settle, or the attempt waits for placement (its
        outcome can change with time alone)."""
        standing = self.standings.get(name)
        return standing is not None and standing.final is None

    def must_retire(self, name: str, trainjob: Mapping[str, Any] | None) -> str | None:
        """Why the TrainJob must be deleted now, or None (see the module docstring)."""
        standing = self.standings.get(name)
        if standing is None or standing.final is None or standing.retired or trainjob is None:
            return None
        if dig(trainjob, "metadata", "deletionTimestamp"):
            return None
        if standing.rerun is not None:
            return f"it ran again after its attempt ended ({standing.rerun.summary})"
        if standing.final.state is State.SUCCEEDED:
            return None
        suspended = dig(trainjob, "spec", "suspend") is True  # Kueue resumes what it suspended
        finished = _condition_true(trainjob, "Failed") or _condition_true(trainjob, "Complete")
        if finished and not suspended:
            return None
        cause = standing.final.cause.value if standing.final.cause else "?"
        return f"its attempt ended ({cause}) but the TrainJob could still run"

    def retired(self, name: str) -> None:
        self.standings.setdefault(name, Standing()).retired = True

    def rerun(self, name: str) -> Evidence | None:
        standing = self.standings.get(name)
        return standing.rerun if standing else None

    def forget(self, name: str) -> None:
        self.standings.pop(name, None)


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

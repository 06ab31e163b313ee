"""A job's attempts on one time axis: phases, evidence as events, the decisions between them.

Pure: built from the job's status (``api.JobStatus``) and its history (``Records.log``), with
``now`` passed in. Positions are percentages of the job's span, so the page lays the lanes
out with plain CSS.

An attempt's phases: *queued* from its creation (dispatch claimed it and handed it over),
*admitted* from the first evidence saying a queue admitted it (Kueue), *running* from the
first history entry saying it ran, until it *ended*. A phase the records do not show is left
out, never guessed. The attempt's first failure (its first failing rank) is highlighted, and
so is the evidence about that rank.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from dispatch.api import AttemptStatus, JobStatus
from dispatch.model import Evidence, Failure
from dispatch.records import LogEntry, LogKind
from dispatch.ui.masking import mask_data

#: evidence that says a queue admitted the attempt (Kueue's QuotaReserved / Admitted)
_ADMITTED = re.compile(r"\badmitted\b", re.IGNORECASE)
_NOT_ADMITTED = re.compile(r"\bnot admitted\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Phase:
    name: str  # queued, admitted, running
    start: float
    end: float
    left: float  # percent of the job's span
    width: float


@dataclass(frozen=True, slots=True)
class Event:
    """One piece of evidence on the axis."""

    at: float
    left: float
    kind: str
    key: str
    summary: str
    data: dict[str, Any]
    first_failure: bool  # about the attempt's first failing rank


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the job's history: a decision (and its reason), a person's request, an
    attempt's change of state."""

    at: float
    kind: str  # decision, request, attempt, or the log kind as recorded
    title: str
    text: str
    attempt: int | None
    action: str | None = None  # a decision's action


@dataclass(frozen=True, slots=True)
class Lane:
    attempt: AttemptStatus
    phases: tuple[Phase, ...]
    events: tuple[Event, ...]
    first_failure: Failure | None
    #: the decisions that followed this attempt's end: hold, wait, start the next, finish
    after: tuple[Entry, ...] = ()

    @property
    def number(self) -> int:
        return self.attempt.number


@dataclass(frozen=True, slots=True)
class Timeline:
    start: float
    end: float
    lanes: tuple[Lane, ...]
    history: tuple[Entry, ...]

    @property
    def span(self) -> float:
        return self.end - self.start


def _at(value: float, start: float, span: float) -> float:
    return round(100.0 * (value - start) / span, 2) if span > 0 else 0.0


def _running_at(log: Sequence[LogEntry], attempt: int) -> float | None:
    for entry in log:
        data = entry.data
        if (entry.kind, data.get("attempt"), data.get("state")) == ("attempt", attempt, "running"):
            return entry.at
    return None


def _admitted_at(evidence: Sequence[Evidence]) -> float | None:
    times = [
        e.observed_at
        for e in evidence
        if _ADMITTED.search(e.summary) and not _NOT_ADMITTED.search(e.summary)
    ]
    return min(times, default=None)


def _about(item: Evidence, failure: Failure | None) -> bool:
    """The evidence is about the first failing rank (or is the failure itself)."""
    if failure is None:
        return False
    data = item.data if isinstance(item.data, dict) else {}
    if failure.rank is not None and data.get("rank") == failure.rank:
        return True
    return failure.at is not None and item.observed_at == failure.at


def _phases(
    attempt: AttemptStatus, log: Sequence[LogEntry], now: float, start: float, span: float
) -> tuple[Phase, ...]:
    end = attempt.ended_at if attempt.ended_at is not None else now
    marks = [("queued", attempt.created_at)]
    admitted = _admitted_at(attempt.evidence)
    running = _running_at(log, attempt.number)
    if admitted is not None and admitted <= end:
        marks.append(("admitted", max(admitted, attempt.created_at)))
    if running is not None and running <= end:
        marks.append(("running", max(running, marks[-1][1])))
    phases = []
    for (name, begin), following in zip(marks, [*marks[1:], ("end", end)], strict=True):
        finish = max(begin, following[1])
        width = round(100.0 * (finish - begin) / span, 2)
        phases.append(Phase(name, begin, finish, _at(begin, start, span), width))
    return tuple(phases)


def _history(log: Sequence[LogEntry]) -> tuple[Entry, ...]:
    entries = []
    for item in log:
        data = item.data
        attempt = data.get("attempt") if isinstance(data.get("attempt"), int) else None
        if item.kind == LogKind.DECISION:
            action = str(data.get("action", "?"))
            reason = str(data.get("reason", ""))
            entries.append(
                Entry(item.at, "decision", f"decision: {action}", reason, attempt, action)
            )
        elif item.kind == LogKind.CANCEL_REQUESTED:
            text = f"by {data.get('actor', '?')}: {data.get('reason', '')}"
            entries.append(Entry(item.at, "request", "cancel requested", text, attempt))
        elif item.kind == LogKind.RELEASE_REQUESTED:
            entries.append(Entry(item.at, "request", "release requested", "", attempt))
        elif item.kind == LogKind.HOLD_REQUESTED:
            text = f"by {data.get('actor', '?')}"
            entries.append(Entry(item.at, "request", "hold requested", text, attempt))
        elif item.kind == "attempt":
            state = data.get("state", "?")
            cause = f" ({data['cause']})" if data.get("cause") else ""
            title = f"attempt {attempt}: {state}{cause}"
            entries.append(Entry(item.at, "attempt", title, str(data.get("summary", "")), attempt))
        else:
            text = ", ".join(f"{k}={v}" for k, v in sorted(data.items()))
            entries.append(Entry(item.at, item.kind, item.kind, text, attempt))
    return tuple(entries)


def build(
    status: JobStatus, log: Sequence[LogEntry], now: float, secret_names: frozenset[str]
) -> Timeline:
    """The job's timeline; evidence data is masked (``masking.mask_data``)."""
    ends = [a.ended_at for a in status.attempts if a.ended_at is not None]
    open_ = any(a.ended_at is None for a in status.attempts) or not status.is_terminal
    start = status.created_at
    end = now if open_ else max([*ends, status.updated_at, start])
    span = max(end - start, 1e-6)
    lanes = []
    for attempt in status.attempts:
        failure = attempt.first_failure
        events = tuple(
            Event(
                at=e.observed_at,
                left=_at(min(max(e.observed_at, start), end), start, span),
                kind=e.kind,
                key=e.key,
                summary=e.summary,
                data=mask_data(dict(e.data), secret_names),
                first_failure=_about(e, failure),
            )
            for e in sorted(attempt.evidence, key=lambda e: e.observed_at)
        )
        lanes.append(Lane(attempt, _phases(attempt, log, now, start, span), events, failure))
    history = _history(log)
    lanes = [replace(lane, after=_after(lane.number, history)) for lane in lanes]
    return Timeline(start, end, tuple(lanes), history)


def _after(number: int, history: Sequence[Entry]) -> tuple[Entry, ...]:
    """The recovery decisions between attempt ``number`` and the next: a hold or the finish
    decided on its end, a wait for the next attempt's backoff, the next attempt's start."""
    return tuple(
        entry
        for entry in history
        if entry.kind == "decision"
        and (
            (entry.attempt == number and entry.action in ("hold", "finish"))
            or (entry.attempt == number + 1 and entry.action in ("wait", "start"))
        )
    )

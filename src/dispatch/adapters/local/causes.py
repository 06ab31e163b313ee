"""From the runner's facts to a typed outcome: a pure function over ``status.json`` data.

Rule: the first failure in time wins; processes dispatch stopped afterwards (``stoppedBy``)
are consequences, never causes. Candidates and the cause each one proves:

==========================================  ==================================================
fact                                         cause
==========================================  ==================================================
``cancel`` event                             ``cancelled`` (state ``cancelled``), naming who
``timeout`` event                            ``timeout``
``memory_limit`` event (RSS watchdog)        ``out_of_memory``
``start_failure`` event                      ``start_failure``
a process failed on a node with ``oom_kill`` ``out_of_memory`` (the kernel's cgroup OOM kill)
a process exited non-zero                    ``app_error`` (exit code, first failing rank)
a process died of a crash signal (SEGV …)    ``app_error`` with the signal
a process killed by KILL/TERM/INT/HUP that   ``node_lost`` when every started process of its
  dispatch did not send                        node died that way, else ``unknown``
the runner could not record (``fault.json``:  ``unknown``, the error as evidence (a full disk
  ``status.json`` unwritable) and stopped       is no fault of a node)
  the attempt
the runner died without recording the end    ``node_lost`` (its ranks died with it)
anything else                                ``unknown`` with the raw facts as evidence
==========================================  ==================================================
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dispatch.model import Cause, Evidence, Failure, Outcome, State
from dispatch.model.units import format_bytes

CRASH_SIGNALS = frozenset(
    int(s)
    for s in (
        signal.SIGSEGV,
        signal.SIGABRT,
        signal.SIGBUS,
        signal.SIGFPE,
        signal.SIGILL,
        signal.SIGSYS,
        signal.SIGTRAP,
        signal.SIGXCPU,
        signal.SIGXFSZ,
    )
)
KILL_SIGNALS = frozenset(
    int(s) for s in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
)

Record = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class _Candidate:
    at: float
    cause: Cause
    summary: str
    failure: Failure | None
    proof: tuple[str, ...]  # evidence keys


def _who(record: Record) -> str:
    if record.get("rank") is not None:
        return f"rank {record['rank']} (node {record['node']})"
    return f"node {record['node']} (torchrun, pid {record.get('pid')})"


def _signame(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def process_key(record: Record) -> str:
    return f"process-{record['index']}"


def event_key(index: int, event: Record) -> str:
    return f"event-{index}-{event['kind']}"


def evidence(
    status: Mapping[str, Any] | None,
    lost: Mapping[str, Any] | None,
    now: float,
    fault: Mapping[str, Any] | None = None,
) -> tuple[Evidence, ...]:
    """Every fact as evidence, with stable keys (the same fact always has the same key)."""
    found: list[Evidence] = []
    if fault is not None:
        at, error = float(fault.get("at") or now), str(fault.get("error"))
        found.append(Evidence("runner_error", "runner-fault", at, error, dict(fault)))
    if status is not None:
        memory = status.get("memory") or {}
        if memory.get("mode") not in (None, "none"):
            limit = format_bytes(memory.get("limitBytes"))
            note = f"memory limit {limit} per node by {memory['mode']}"
            found.append(Evidence("memory", "memory-enforcement", now, note, dict(memory)))
        for record in status.get("processes", ()):
            if record.get("endedAt") is None:
                continue
            if record.get("signal") is not None:
                how = f"was killed by {_signame(record['signal'])}"
            else:
                how = f"exited with code {record.get('exitCode')}"
            if record.get("stoppedBy"):
                how += f" (stopped by {record['stoppedBy']})"
            found.append(
                Evidence(
                    "process",
                    process_key(record),
                    record["endedAt"],
                    f"{_who(record)} {how}",
                    dict(record),
                )
            )
        for index, event in enumerate(status.get("events", ())):
            summary = str(event.get("error") or event.get("reason") or event["kind"])
            found.append(
                Evidence(
                    str(event["kind"]), event_key(index, event), event["at"], summary, dict(event)
                )
            )
    if lost is not None:
        summary = f"the attempt runner (pid {lost.get('runnerPid')}) died; its watchdog stopped {len(lost.get('killed', []))} leftover process(es)"
        found.append(
            Evidence("runner", "runner-lost", float(lost.get("at") or now), summary, dict(lost))
        )
    return tuple(found)


def _process_candidate(
    record: Record, records: Sequence[Record], events: Sequence[Record]
) -> _Candidate:
    node = record["node"]
    at = float(record["endedAt"])
    code, sig = record.get("exitCode"), record.get("signal")
    failure = Failure(
        rank=record.get("rank"),
        node=node,
        exit_code=code,
        signal=sig,
        at=at,
        where=f"pid {record.get('pid')}",
    )
    key = process_key(record)
    ooms = [
        (i, e) for i, e in enumerate(events) if e["kind"] == "oom_kill" and e.get("node") == node
    ]
    if ooms:
        index, event = ooms[0]
        return _Candidate(
            at,
            Cause.OUT_OF_MEMORY,
            f"node {node} went over its memory limit: the kernel killed a process of it; {_who(record)} ended first",
            _with(failure, "killed by the kernel's OOM killer (cgroup memory limit)"),
            (key, event_key(index, event)),
        )
    if sig is None:
        return _Candidate(
            at,
            Cause.APP_ERROR,
            f"{_who(record)} exited with code {code}",
            _with(failure, f"exit code {code}"),
            (key,),
        )
    name = _signame(sig)
    if sig in CRASH_SIGNALS:
        return _Candidate(
            at,
            Cause.APP_ERROR,
            f"{_who(record)} crashed with {name}",
            _with(failure, f"crashed with {name}"),
            (key,),
        )
    node_records = [r for r in records if r["node"] == node and r.get("pid")]
    node_killed = all(
        r.get("endedAt") is not None and r.get("signal") in KILL_SIGNALS and not r.get("stoppedBy")
        for r in node_records
    )
    if sig in KILL_SIGNALS and node_killed:
        keys = tuple(process_key(r) for r in node_records)
        return _Candidate(
            at,
            Cause.NODE_LOST,
            f"node {node} was killed from outside dispatch ({name} to all {len(node_records)} of its processes)",
            _with(failure, f"killed by {name}, not sent by dispatch"),
            keys,
        )
    return _Candidate(
        at,
        Cause.UNKNOWN,
        f"{_who(record)} was killed by {name}, not sent by dispatch",
        _with(failure, f"killed by {name}, not sent by dispatch"),
        (key,),
    )


def _with(failure: Failure, message: str) -> Failure:
    return Failure(
        failure.rank,
        failure.node,
        failure.exit_code,
        failure.signal,
        failure.at,
        failure.where,
        message,
    )


def _event_candidate(index: int, event: Record) -> _Candidate | None:
    kind, at, key = event["kind"], float(event["at"]), (event_key(index, event),)
    if kind == "cancel":
        actor, reason = event.get("actor") or "unknown", event.get("reason") or ""
        text = f"cancelled by {actor}" + (f": {reason}" if reason else "")
        return _Candidate(at, Cause.CANCELLED, text, None, key)
    if kind == "timeout":
        text = f"the time limit of {event.get('limit')} s passed"
        return _Candidate(at, Cause.TIMEOUT, text, Failure(at=at, message=text), key)
    if kind == "memory_limit":
        text = (
            f"node {event.get('node')} used {format_bytes(event.get('rssBytes'))} (RSS) over its "
            f"limit of {format_bytes(event.get('limitBytes'))}; the memory watchdog killed the node"
        )
        return _Candidate(
            at, Cause.OUT_OF_MEMORY, text, Failure(node=event.get("node"), at=at, message=text), key
        )
    if kind == "start_failure":
        text = str(event.get("error"))
        failure = Failure(rank=event.get("rank"), node=event.get("node"), at=at, message=text)
        return _Candidate(at, Cause.START_FAILURE, text, failure, key)
    if kind == "runner_error":
        text = f"the attempt runner failed: {event.get('error')}"
        return _Candidate(at, Cause.UNKNOWN, text, Failure(at=at, message=text), key)
    return None


def derive_outcome(
    status: Mapping[str, Any] | None,
    lost: Mapping[str, Any] | None,
    *,
    runner_alive: bool,
    now: float,
    fault: Mapping[str, Any] | None = None,
) -> Outcome:
    """The attempt's outcome from the runner's facts (``status``), the watchdog's report
    (``lost``), what the runner could not record (``fault``) and whether the runner still
    runs. ``now`` dates facts observed only now."""
    facts = evidence(status, lost, now, fault)
    by_key = {e.key: e for e in facts}
    ended = status is not None and status.get("phase") == "ended"
    if not ended and runner_alive and lost is None:
        started = status is not None and any(p.get("pid") for p in status.get("processes", ()))
        return Outcome(State.RUNNING if started else State.QUEUED)
    records = list((status or {}).get("processes", ()))
    events = list((status or {}).get("events", ()))
    candidates = [c for i, e in enumerate(events) if (c := _event_candidate(i, e))]
    candidates += [
        _process_candidate(r, records, events)
        for r in records
        if r.get("endedAt") is not None
        and not r.get("stoppedBy")
        and (r.get("signal") is not None or r.get("exitCode"))
    ]
    if not ended and fault is not None:  # it could not record the rest: say why, not a node
        text = (
            f"the attempt runner could not record the attempt and stopped it: {fault.get('error')}"
        )
        at = float(fault.get("at") or now)
        candidates = [c for c in candidates if c.at < at]
        candidates.append(
            _Candidate(at, Cause.UNKNOWN, text, Failure(at=at, message=text), ("runner-fault",))
        )
    elif not ended:  # the runner died first; what it recorded before may still explain more
        text = (
            "the attempt runner ended without recording the end of the attempt; "
            "its processes were stopped with it"
        )
        at = float(lost["at"]) if lost else now
        where = f"runner pid {(status or {}).get('runnerPid')}"
        proof = ("runner-lost",) if lost else ()
        candidates.append(
            _Candidate(at, Cause.NODE_LOST, text, Failure(at=at, where=where, message=text), proof)
        )
    if not candidates:
        if records and all(r.get("exitCode") == 0 for r in records):
            return Outcome(State.SUCCEEDED, summary=f"all {len(records)} process(es) exited 0")
        text = "the attempt ended without a failure dispatch can name"
        return Outcome(State.FAILED, Cause.UNKNOWN, text, None, facts)
    first = min(candidates, key=lambda c: c.at)
    stopped = sum(1 for r in records if r.get("stoppedBy"))
    summary = first.summary + (f"; {stopped} other process(es) stopped" if stopped else "")
    state = State.CANCELLED if first.cause is Cause.CANCELLED else State.FAILED
    proven = tuple(by_key[k] for k in first.proof if k in by_key)
    return Outcome(state, first.cause, summary, first.failure, proven)

"""What the supervisor writes to the records store besides intents and leases: decisions in
the log, observations and refusals as outcomes and evidence.

Every function writes through ``Records`` only, fenced by the lease the supervisor holds on
the job, and does no I/O of its own, so the loop (``supervise.loop``) keeps the order of
writes around adapter calls in one place.
"""

from __future__ import annotations

from dataclasses import replace

from dispatch.model import (
    Cause,
    Evidence,
    Observation,
    Outcome,
    PermanentError,
    State,
    Unsupported,
)
from dispatch.records import Lease, LogKind, Records
from dispatch.supervise.decide import Decision
from dispatch.supervise.view import last_decision


def log_decision(
    records: Records, fence: Lease, decision: Decision, *, attempt: int | None = None
) -> None:
    """Append a decision to the job's log, naming the supervisor that made it (the owner of
    ``fence``, the lease it holds on the job)."""
    data = decision.to_json()
    if data["attempt"] is None and attempt:
        data["attempt"] = attempt
    records.append_log(fence.job_id, LogKind.DECISION, {**data, "owner": fence.owner}, fence=fence)


def log_decision_once(
    records: Records, fence: Lease, decision: Decision, *, attempt: int | None = None
) -> None:
    """Log a quiet decision only when it differs from the last one logged."""
    last = last_decision(records.log(fence.job_id))
    if last is None or (last.get("action"), last.get("reason")) != (
        decision.kind.value,
        decision.reason,
    ):
        log_decision(records, fence, decision, attempt=attempt)


def record_refusal(
    records: Records, fence: Lease, attempt: int, exc: PermanentError, at: float
) -> None:
    """The attempt ends ``start_failure``, with one evidence record per reason refused."""
    reasons = exc.reasons if isinstance(exc, Unsupported) else ()
    facts = [
        Evidence(
            kind="refusal",
            key=f"refusal/{r.rule}",
            observed_at=at,
            summary=r.message,
            data={"rule": r.rule},
        )
        for r in reasons
    ] or [Evidence(kind="refusal", key="refusal", observed_at=at, summary=str(exc))]
    records.add_evidence(fence.job_id, attempt, facts, fence=fence)
    outcome = Outcome(state=State.FAILED, cause=Cause.START_FAILURE, summary=str(exc))
    records.record_outcome(fence.job_id, attempt, outcome, fence=fence)


def record_observation(
    records: Records, fence: Lease, attempt: int, observation: Observation
) -> bool:
    """Store an observation's evidence, and its outcome when the attempt's state or cause
    changed (then True). An attempt the scheduler no longer knows, with no terminal outcome,
    ends ``unknown``."""
    outcome = replace(observation.outcome, evidence=())
    if observation.gone and not outcome.is_terminal:
        outcome = Outcome(
            state=State.FAILED,
            cause=Cause.UNKNOWN,
            summary=f"the scheduler has no trace of attempt {attempt} any more",
        )
    evidence = (*observation.outcome.evidence, *observation.evidence)
    job_id = fence.job_id
    before = next(a for a in records.attempts(job_id) if a.attempt == attempt).outcome
    changed = before is None or (before.state, before.cause) != (outcome.state, outcome.cause)
    if not changed:  # evidence alone: one write, none when there is none
        records.add_evidence(job_id, attempt, evidence, fence=fence)
        return False
    with records.together(fence):  # the evidence and the outcome it proves land as one
        records.add_evidence(job_id, attempt, evidence, fence=fence)
        records.record_outcome(job_id, attempt, outcome, fence=fence)
        records.append_log(
            job_id,
            "attempt",
            {
                "attempt": attempt,
                "state": outcome.state.value,
                "cause": outcome.cause.value if outcome.cause else None,
                "summary": outcome.summary,
            },
            fence=fence,
        )
        if not outcome.is_terminal:
            summary = f"attempt {attempt}: {outcome.summary}" if outcome.summary else ""
            records.set_job_status(job_id, outcome.state, None, summary, if_open=True, fence=fence)
    return True

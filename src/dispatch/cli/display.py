"""How statuses and plans read for people (``--output json`` prints ``to_json()`` instead)."""

from __future__ import annotations

import datetime as dt

import click

from dispatch.api import JobStatus
from dispatch.cli.common import emit_json
from dispatch.model import Plan, State

_COLORS = {
    State.SUCCEEDED: "green",
    State.FAILED: "red",
    State.CANCELLED: "yellow",
    State.RUNNING: "cyan",
    State.QUEUED: "blue",
    State.HELD: "magenta",
}


def state_text(state: State) -> str:
    return click.style(state.value, fg=_COLORS.get(state), bold=state.is_terminal)


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def status_lines(status: JobStatus, *, evidence_limit: int = 8) -> list[str]:
    cause = f"  cause {click.style(status.cause.value, bold=True)}" if status.cause else ""
    lines = [
        f"job       {status.id} ({status.name}) on {status.cluster}",
        f"state     {state_text(status.state)}{cause}",
    ]
    if status.summary:
        lines.append(f"summary   {status.summary}")
    failure = status.first_failure
    if failure is not None:
        parts = [
            f"rank {failure.rank}" if failure.rank is not None else None,
            f"node {failure.node}" if failure.node is not None else None,
            f"exit code {failure.exit_code}" if failure.exit_code is not None else None,
            f"signal {failure.signal}" if failure.signal is not None else None,
            failure.where,
        ]
        lines.append("first     " + ", ".join(p for p in parts if p))
    for attempt in status.attempts:
        cause_text = f" ({attempt.cause.value})" if attempt.cause else ""
        detail = f": {attempt.summary}" if attempt.summary else ""
        lines.append(f"attempt {attempt.number} {state_text(attempt.state)}{cause_text}{detail}")
    if status.decision:
        lines.append(f"decision  {status.decision.get('action')}: {status.decision.get('reason')}")
    evidence = status.evidence
    if evidence:
        lines.append(f"evidence  ({len(evidence)})")
        for item in evidence[:evidence_limit]:
            lines.append(f"  - [{item.kind}] {item.summary or item.key}")
        if len(evidence) > evidence_limit:
            lines.append(f"  … {len(evidence) - evidence_limit} more (--output json shows all)")
    if status.attempts:
        lines.append(f"logs      dispatch logs {status.id}")
    return lines


def show_status(status: JobStatus, output: str) -> None:
    """The job's status: one JSON object (``--output json``) or the text lines."""
    if output == "json":
        emit_json(status.to_json())
        return
    for line in status_lines(status):
        click.echo(line)


def plan_lines(plan: Plan) -> list[str]:
    verdict = (
        click.style("accepted", fg="green")
        if plan.accepted
        else click.style("refused", fg="red", bold=True)
    )
    lines = [
        f"plan      attempt {plan.identity.attempt} of {plan.identity.job_id} on "
        f"{plan.identity.cluster} ({plan.adapter}): {verdict}"
    ]
    for reason in plan.capabilities.refusals:
        lines.append(f"  refused [{reason.rule}] {reason.message}")
    for answer in plan.capabilities.answers:
        mark = "yes" if answer.supported else "no"
        lines.append(f"  {answer.name}: {mark}" + (f" — {answer.reason}" if answer.reason else ""))
    if plan.capabilities.weakened_identity:
        lines.append(f"  weakened identity: {plan.capabilities.weakened_identity}")
    for artifact in plan.artifacts:
        who = "Trainer would create" if artifact.kind == "JobSet" else "would create"
        lines.append(f"  {who} {artifact.kind} {artifact.name}")
    for note in plan.notes:
        lines.append(f"  note: {note}")
    return lines

"""How statuses and plans read for people (``--output json`` prints ``to_json()`` instead)."""

from __future__ import annotations

import datetime as dt
import re
import shlex
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

import click

from dispatch.api import JobStatus
from dispatch.cli.common import emit_json
from dispatch.model import Artifact, Plan, State

#: distinct guard records shown under an attempt in ``dispatch status`` (JSON has them all)
GUARDS_SHOWN = 3
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
    people = [
        f"submitted by {status.submitted_by}" if status.submitted_by else "",
        f"cancel asked by {status.cancel_requested_by}" if status.cancel_requested_by else "",
    ]
    if any(people):
        lines.append("who       " + "; ".join(p for p in people if p))
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
        # what a guard did about the attempt (a refused resume, a replaced TrainJob, a re-run)
        guarded = list(dict.fromkeys(e.summary for e in attempt.evidence if e.kind == "guard"))
        for text in guarded[:GUARDS_SHOWN]:
            lines.append(f"          guard: {text}")
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
        for label, text in artifact_facts(artifact):
            lead = f"      {label:<13}"
            if label == "argv":  # kept whole, to be copied
                lines.append(lead + text)
                continue
            lines += textwrap.wrap(
                text,
                width=100,
                initial_indent=lead,
                subsequent_indent=" " * len(lead),
                break_long_words=False,
                break_on_hyphens=False,
            )
    if any(
        label.endswith(("env", "Env")) for a in plan.artifacts for label, _ in artifact_facts(a)
    ):
        lines.append(
            "  variables are named, not shown (-o json shows env's values, never secretEnv's)"
        )
    for note in plan.notes:
        lines.append(f"  note: {note}")
    return lines


#: a batch script's lines that set the environment, its working directory, and its command
_EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=", re.MULTILINE)
_CHDIR = re.compile(r"^#SBATCH --chdir=(.*)$", re.MULTILINE)
_EXEC = re.compile(r"^exec (.*)$", re.MULTILINE)


def artifact_facts(artifact: Artifact) -> list[tuple[str, str]]:
    """What an artifact runs, as text: its command line, working directory and the *names* of
    the variables it sets (never their values, which may be secret: ``-o json`` shows the
    artifact whole). Empty for an artifact that runs nothing (a runtime copy, a JobSet)."""
    content = artifact.content
    if isinstance(content, str):
        return _script_facts(content) if artifact.kind == "sbatch-script" else []
    if artifact.kind == "TrainJob":
        trainer = _mapping(_mapping(content.get("spec")).get("trainer"))
        argv = [*(trainer.get("command") or ()), *(trainer.get("args") or ())]
        facts = [("argv", shlex.join(map(str, argv)) or "the runtime's command")]
        facts.append(("cwd", "the image's working directory"))
        return facts + _env_facts("env", trainer.get("env"))
    argv = content.get("argv", content.get("command"))
    facts = []
    if isinstance(argv, list | tuple):
        facts.append(("argv", shlex.join(map(str, argv))))
    if content.get("stdin"):
        facts.append(("stdin", f"the {content['stdin']}"))
    if content.get("cwd"):
        facts.append(("cwd", str(content["cwd"])))
    facts += _env_facts("env", content.get("env"))
    facts += _env_facts("inheritedEnv", content.get("inheritedEnv"))
    facts += _env_facts("secretEnv", content.get("secretEnv"), "values never shown")
    return facts


def _script_facts(script: str) -> list[tuple[str, str]]:
    """A batch script's command (its ``exec`` line), ``--chdir`` and exported names."""
    command, chdir = _EXEC.search(script), _CHDIR.search(script)
    facts = [("argv", command.group(1))] if command else []
    facts.append(("cwd", chdir.group(1).strip('"') if chdir else "sbatch's (no workingDir)"))
    return facts + _env_facts("env", _EXPORT.findall(script))


def _env_facts(label: str, variables: Any, why: str = "") -> list[tuple[str, str]]:
    """One line naming the variables of a mapping, a list of names, or a Kubernetes env list."""
    names = list(_names(variables))
    if not names:
        return []
    return [(label, ", ".join(names) + (f" ({why})" if why else ""))]


def _names(variables: Any) -> Iterable[str]:
    if isinstance(variables, Mapping):
        return (str(name) for name in variables)
    if isinstance(variables, list | tuple):
        return (
            str(item.get("name")) if isinstance(item, Mapping) else str(item) for item in variables
        )
    return ()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}

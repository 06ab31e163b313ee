"""Pure parsers of Slurm's command output into ``SlurmJob`` records. No I/O.

Each ``parse_*_output(text)`` takes exactly what the command printed (recorded samples live in
``tests/slurm/recorded``) and raises ``SlurmOutputError`` for text it cannot read. JSON shapes
differ between Slurm versions (data_parser v0.0.38 in 22.05, v0.0.40+ from 23.11): the formats
read are ``formats.JSON_FORMATS``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from dispatch.adapters.slurm.formats import JSON_FORMATS, format_name, unknown_format_message
from dispatch.adapters.slurm.native import (
    BASE_STATE_NAMES,
    ExitStatus,
    SlurmJob,
    SlurmStep,
    Source,
)


class SlurmOutputError(ValueError):
    """A command printed something its parser cannot read (a different version, an error)."""


# --- sbatch ------------------------------------------------------------------------------


def parse_sbatch_output(text: str) -> str:
    """The job id printed by ``sbatch --parsable`` (``"123"`` or ``"123;cluster"``)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    job_id = first.split(";", 1)[0].strip()
    if not job_id.isdigit():
        raise SlurmOutputError(f"sbatch printed no job id: {text.strip()[:200]!r}")
    return job_id


# --- squeue ------------------------------------------------------------------------------

#: ``squeue -h -t all --name=… -o`` format used to find a job by its name (any version).
SQUEUE_NAME_FORMAT = "%i|%j|%T|%r"


def parse_squeue_names_output(text: str) -> list[SlurmJob]:
    """Jobs listed by ``squeue -h -o "%i|%j|%T|%r"``: id, name, state and reason only."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.strip().split("|")
        if len(parts) != 4 or not parts[0].isdigit():
            raise SlurmOutputError(f"unexpected squeue line: {line[:200]!r}")
        job_id, name, state, reason = parts
        jobs.append(
            SlurmJob(job_id=job_id, name=name, states=(state,), source=Source.SQUEUE, reason=reason)
        )
    return jobs


def parse_squeue_json_output(text: str) -> list[SlurmJob]:
    """Jobs in ``squeue --json`` (or ``scontrol show job --json``) output, in one of
    ``JSON_FORMATS``; another format (named in ``meta``) is a ``SlurmOutputError``.

    v0.0.38 prints ``job_state`` as a word, exit codes as raw wait statuses (768 = exit 3)
    and times as integers; v0.0.40+ prints ``job_state`` as a list (base state and flags),
    exit codes as ``{status, return_code, signal}`` and numbers as ``{set, infinite, number}``.
    """
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SlurmOutputError(f"squeue --json printed invalid JSON: {exc}") from None
    if not isinstance(document, Mapping) or not isinstance(document.get("jobs"), list):
        raise SlurmOutputError("squeue --json printed no 'jobs' list")
    found = format_name(_json_plugin(document))
    if found and found not in JSON_FORMATS:
        raise SlurmOutputError(unknown_format_message(found))
    return [_squeue_job(raw) for raw in document["jobs"] if isinstance(raw, Mapping)]


def squeue_json_version(text: str) -> str:
    """The data_parser version named in ``meta`` (e.g. ``v0.0.38``), or ``""``."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return ""
    return format_name(_json_plugin(document)) if isinstance(document, Mapping) else ""


def _json_plugin(document: Mapping[str, Any]) -> str:
    """``meta.plugin.data_parser`` (23.02+) or ``meta.plugin.type`` (22.05)."""
    meta = document.get("meta")
    plugin = meta.get("plugin") if isinstance(meta, Mapping) else None
    if not isinstance(plugin, Mapping):
        return ""
    return str(plugin.get("data_parser") or plugin.get("type") or "")


def _squeue_job(raw: Mapping[str, Any]) -> SlurmJob:
    keep = (
        "job_id",
        "name",
        "job_state",
        "state_reason",
        "exit_code",
        "derived_exit_code",
        "nodes",
        "batch_host",
        "comment",
        "partition",
        "time_limit",
    )
    return SlurmJob(
        job_id=str(raw.get("job_id")),
        name=str(raw.get("name") or ""),
        states=_states(raw.get("job_state")),
        source=Source.SQUEUE,
        reason=str(raw.get("state_reason") or ""),
        exit=_exit(raw.get("exit_code")),
        derived_exit=_exit(raw.get("derived_exit_code")),
        nodes=str(raw.get("nodes") or ""),
        batch_host=str(raw.get("batch_host") or ""),
        comment=str(raw.get("comment") or ""),
        submit_time=_epoch(raw.get("submit_time")),
        start_time=_epoch(raw.get("start_time")),
        end_time=_epoch(raw.get("end_time")),
        raw={k: raw[k] for k in keep if k in raw},
    )


def _states(value: Any) -> tuple[str, ...]:
    """Base state first, then flags, whatever order the tool printed them in."""
    names = [value] if isinstance(value, str) else [str(v) for v in value or ()]
    base = [n for n in names if n in BASE_STATE_NAMES]
    return tuple(base + [n for n in names if n not in BASE_STATE_NAMES]) or ("UNKNOWN",)


def _number(value: Any) -> int | None:
    """An integer, or v0.0.40+'s ``{set, infinite, number}`` (None when unset or infinite)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Mapping):
        if value.get("infinite") or not value.get("set", True):
            return None
        number = value.get("number")
        return number if isinstance(number, int) and not isinstance(number, bool) else None
    return None


def _exit(value: Any) -> ExitStatus | None:
    if isinstance(value, Mapping):  # v0.0.40+: {status: [...], return_code: {...}, signal: {...}}
        code = _number(value.get("return_code")) or 0
        signal = _number((value.get("signal") or {}).get("id")) or 0
        return ExitStatus(code, signal)
    number = _number(value)
    return ExitStatus.from_wait_status(number) if number is not None else None


def _epoch(value: Any) -> str:
    number = _number(value)
    if not number:
        return ""
    return datetime.fromtimestamp(number, UTC).isoformat().replace("+00:00", "Z")


# --- scontrol show job, jobcomp/filetxt ----------------------------------------------------

_KEY_VALUE = re.compile(r"(?:^|\s)([A-Za-z][\w:/.]*)=(.*?)(?=\s+[A-Za-z][\w:/.]*=|\s*$)")


def parse_key_values(line: str) -> dict[str, str]:
    """``Key=value Key2=value with spaces`` -> a dict (scontrol -o, jobcomp lines)."""
    return {m.group(1): m.group(2).strip() for m in _KEY_VALUE.finditer(line.strip())}


def parse_scontrol_jobs_output(text: str) -> list[SlurmJob]:
    """Jobs in ``scontrol -o show job`` output (one job per line)."""
    return [
        _key_value_job(fields, Source.SCONTROL)
        for fields in (parse_key_values(line) for line in text.splitlines() if line.strip())
        if "JobId" in fields
    ]


def parse_jobcomp_output(text: str) -> list[SlurmJob]:
    """Jobs in a ``jobcomp/filetxt`` file (one finished job per line; the last line of a
    job id wins). Its ExitCode is 0:0 for CANCELLED and TIMEOUT jobs."""
    jobs: dict[str, SlurmJob] = {}
    for line in text.splitlines():
        fields = parse_key_values(line)
        if "JobId" in fields and "JobState" in fields:
            job = _key_value_job(fields, Source.JOBCOMP)
            jobs[job.job_id] = job
    return list(jobs.values())


def _key_value_job(fields: Mapping[str, str], source: Source) -> SlurmJob:
    keep = (
        "JobId",
        "JobName",
        "Name",
        "JobState",
        "Reason",
        "ExitCode",
        "DerivedExitCode",
        "NodeList",
        "BatchHost",
        "Comment",
        "Partition",
        "TimeLimit",
    )
    state = fields.get("JobState", "UNKNOWN")
    return SlurmJob(
        job_id=fields["JobId"],
        name=fields.get("JobName") or fields.get("Name", ""),
        states=(state.split()[0],),
        source=source,
        reason=fields.get("Reason", ""),
        exit=ExitStatus.from_text(fields.get("ExitCode")),
        derived_exit=ExitStatus.from_text(fields.get("DerivedExitCode")),
        nodes=_not_null(fields.get("NodeList", "")),
        batch_host=_not_null(fields.get("BatchHost", "")),
        comment=_not_null(fields.get("Comment", "")),
        submit_time=_not_null(fields.get("SubmitTime", "")),
        start_time=_not_null(fields.get("StartTime", "")),
        end_time=_not_null(fields.get("EndTime", "")),
        raw={k: fields[k] for k in keep if k in fields},
    )


def _not_null(value: str) -> str:
    return "" if value in ("(null)", "Unknown", "None", "N/A", "None assigned") else value


# --- sacct ---------------------------------------------------------------------------------

#: The fields dispatch asks ``sacct --parsable2 --noheader -o`` for, in this order.
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Reason",
    "NodeList",
    "Submit",
    "Start",
    "End",
    "Comment",
)


def parse_sacct_output(text: str) -> list[SlurmJob]:
    """Jobs with their steps from ``sacct -P -n -o <SACCT_FIELDS>`` (any version since 17.x).

    Step lines (``123.batch``, ``123.0``) are attached to their job; ``CANCELLED by 1000``
    gives ``cancelled_by``.
    """
    jobs: dict[str, dict[str, str]] = {}
    steps: dict[str, list[SlurmStep]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.split("|")
        if len(values) < len(SACCT_FIELDS):
            raise SlurmOutputError(f"unexpected sacct line: {line[:200]!r}")
        row = dict(zip(SACCT_FIELDS, values, strict=False))
        job_id, _, step_id = row["JobID"].partition(".")
        if step_id:
            steps.setdefault(job_id, []).append(
                SlurmStep(
                    step_id=row["JobID"],
                    state=row["State"].split()[0] if row["State"] else "UNKNOWN",
                    exit=ExitStatus.from_text(row["ExitCode"]),
                    nodes=row["NodeList"],
                )
            )
        else:
            jobs[job_id] = row
    return [_sacct_job(row, tuple(steps.get(job_id, ()))) for job_id, row in jobs.items()]


def _sacct_job(row: Mapping[str, str], steps: tuple[SlurmStep, ...]) -> SlurmJob:
    state_words = row["State"].split()
    by = state_words[2] if len(state_words) >= 3 and state_words[1] == "by" else ""
    return SlurmJob(
        job_id=row["JobID"],
        name=row["JobName"],
        states=(state_words[0] if state_words else "UNKNOWN",),
        source=Source.SACCT,
        reason=row["Reason"],
        exit=ExitStatus.from_text(row["ExitCode"]),
        derived_exit=ExitStatus.from_text(row["DerivedExitCode"]),
        nodes=_not_null(row["NodeList"]),
        comment=row["Comment"],
        cancelled_by=by,
        submit_time=_not_null(row["Submit"]),
        start_time=_not_null(row["Start"]),
        end_time=_not_null(row["End"]),
        steps=steps,
        raw=dict(row),
    )

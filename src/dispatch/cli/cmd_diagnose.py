"""`dispatch diagnose FILE`: the typed cause of a TrainJob, from a dump of its objects.

Contract (spec/kubeflow-adapter.md, section 4): FILE is a ``kind: List`` or a multi-document
YAML/JSON stream, as ``kubectl get ... -o yaml`` writes it (TrainJob, JobSet, Jobs, Pods,
Events, Workload, Nodes). With ``--output json`` it prints one object ``{"trainJob", "state",
"cause", "summary", "firstFailure": {"rank", "pod", "exitCode"} | null, "evidence": [...]}``.
Exit 0 when diagnosed (whatever the cause), 2 when the input is unreadable or holds no
TrainJob (or several, and ``--trainjob`` names none of them).

The cause function is the one the supervisor uses (``adapters/kubeflow/causes/decide.py``). A dump
has no "now": waits are measured up to the latest time the dump mentions, unless ``--now``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli.common import EXIT_OK, EXIT_USAGE, emit_json, fail, output_option
from dispatch.model.units import parse_duration

if TYPE_CHECKING:
    from dispatch.adapters.kubeflow.causes.decide import Diagnosis


def _print_text(diagnosis: Diagnosis) -> None:
    outcome = diagnosis.outcome
    cause = f" ({outcome.cause.value})" if outcome.cause else ""
    click.echo(f"TrainJob {diagnosis.trainjob}: {outcome.state.value}{cause}")
    click.echo(f"  {outcome.summary}")
    first = outcome.first_failure
    if first is not None:
        code = f", exit code {first.exit_code}" if first.exit_code is not None else ""
        click.echo(f"  first failure: rank {first.rank}, pod {first.where}{code}")
    if outcome.evidence:
        click.echo("  evidence:")
        for item in outcome.evidence:
            at = item.data.get("at") if isinstance(item.data, dict) else None
            click.echo(f"    - {at or '-'} {item.key}: {item.summary}")


@click.command("diagnose")
@click.argument("dump_file", metavar="FILE")
@click.option("--trainjob", help="The TrainJob to diagnose when the dump holds several.")
@click.option(
    "--patience",
    default="10m",
    show_default=True,
    help="How long a job may wait for placement (or for pods once admitted).",
)
@click.option(
    "--now", "now_text", help="Judge as of this RFC 3339 time (default: the dump's latest)."
)
@output_option
def command(
    dump_file: str, trainjob: str | None, patience: str, now_text: str | None, output: str
) -> None:
    """Derive the typed cause of a TrainJob from a dump of its objects.

    Exit 0 when diagnosed (any cause), 2 when the input is unreadable or holds no TrainJob.
    """
    # adapters are imported when used, never by `dispatch --help` (see adapters/registry.py)
    from dispatch.adapters.kubeflow.causes.decide import Inputs, diagnose
    from dispatch.adapters.kubeflow.causes.dump import parse_dump
    from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet
    from dispatch.adapters.kubeflow.objects import parse_time

    try:
        seconds = parse_duration(patience)
    except ValueError as exc:
        fail(f"--patience: {exc}", code=EXIT_USAGE, output=output)
    now = parse_time(now_text) if now_text else None
    if now_text and now is None:
        fail(f"--now: {now_text!r} is not an RFC 3339 time", code=EXIT_USAGE, output=output)
    try:
        text = Path(dump_file).read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"cannot read {dump_file}: {exc.strerror or exc}", code=EXIT_USAGE, output=output)
    except UnicodeDecodeError:
        fail(f"{dump_file} is not UTF-8 text", code=EXIT_USAGE, output=output)
    try:
        objects = parse_dump(text)
    except ValueError as exc:
        fail(f"{dump_file}: {exc}", code=EXIT_USAGE, output=output)
    evidence = EvidenceSet.from_objects(objects)
    names = evidence.trainjob_names()
    chosen = _choose(dump_file, names, trainjob, output)
    diagnosis = diagnose(evidence, Inputs(patience=seconds, now=now, trainjob=chosen))
    if output == "json":
        emit_json(diagnosis.to_json())
    else:
        _print_text(diagnosis)
    sys.exit(EXIT_OK)


def _choose(dump_file: str, names: list[str], wanted: str | None, output: str) -> str:
    extra: dict[str, Any] = {"trainJobs": names}
    if wanted is not None:
        if wanted not in names:
            fail(
                f"{dump_file} holds no TrainJob named {wanted!r}",
                code=EXIT_USAGE,
                output=output,
                **extra,
            )
        return wanted
    if not names:
        fail(f"{dump_file} holds no TrainJob", code=EXIT_USAGE, output=output, **extra)
    if len(names) > 1:
        fail(
            f"{dump_file} holds {len(names)} TrainJobs ({', '.join(names)}); name one with "
            "--trainjob",
            code=EXIT_USAGE,
            output=output,
            **extra,
        )
    return names[0]

"""`dispatch diagnose`: the typed cause of a training workload, from a dump or a live cluster.

Forms:

* ``dispatch diagnose FILE`` (``-`` reads standard input): FILE is what ``kubectl get ... -o
  yaml`` (or ``-o json``) writes: a ``kind: List`` or several documents. It may hold a
  TrainJob, a JobSet, a training-operator v1 job (PyTorchJob, TFJob, MPIJob, XGBoostJob,
  PaddleJob, JAXJob) or a batch Job, with their Jobs, Pods, Events, Kueue Workload and Nodes.
  ``--kind``/``--name`` (or ``--trainjob``) pick one workload when it holds several.
* ``dispatch diagnose KIND/NAME --cluster C [--namespace NS] [--follow]``: the same, read
  from the cluster (read-only); ``--follow`` reads again until the workload ends.
* ``dispatch diagnose --collect KIND/NAME [--namespace NS]``: the ``kubectl`` commands that
  write a full dump of it; with ``--cluster`` it reads the objects and writes that dump.

With ``--output json`` it prints one object ``{"workload": {"kind", "namespace", "name"},
"trainJob", "state", "cause", "summary", "firstFailure": {"rank", "pod", "exitCode"} | null,
"evidence": [...]}``. Exit 0 when diagnosed (whatever the cause), 1 when the workload is not
on the cluster, 2 when the input is not a dump (with what to run instead), holds no workload,
or holds several and none is named; 3 when the cluster cannot be read.

The cause function is the one the supervisor uses (``adapters/kubeflow/causes/decide.py``). A
dump has no "now": waits are measured up to the latest time it mentions, unless ``--now``.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    Settings,
    emit_json,
    fail,
    output_option,
    report_errors,
)
from dispatch.model.units import parse_duration

if TYPE_CHECKING:
    from dispatch.adapters.kubeflow.causes.decide import Diagnosis
    from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet, Ref


def _print_text(diagnosis: Diagnosis) -> None:
    outcome = diagnosis.outcome
    cause = f" ({outcome.cause.value})" if outcome.cause else ""
    ref = diagnosis.workload
    what = f"{ref.kind} {ref.name}" if ref else "workload"
    click.echo(f"{what}: {outcome.state.value}{cause}")
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
@click.argument("target", metavar="FILE|KIND/NAME", required=False)
@click.option("--kind", help="The workload's kind, when the dump holds several workloads.")
@click.option("--name", help="The workload's name, when the dump holds several workloads.")
@click.option("--trainjob", help="Same as --kind TrainJob --name NAME.")
@click.option("--cluster", help="Read KIND/NAME from this configured Kubeflow cluster.")
@click.option("--namespace", "-n", help="The workload's namespace (default: the cluster's).")
@click.option("--follow", is_flag=True, help="With --cluster: keep reading until it ends.")
@click.option(
    "--interval",
    default="5s",
    show_default=True,
    help="With --follow: how often to read the cluster.",
)
@click.option(
    "--collect",
    "collect_target",
    metavar="KIND/NAME",
    help="Print the kubectl commands that write a full dump (with --cluster: write the dump).",
)
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
@click.pass_obj
@report_errors
def command(
    settings: Settings,
    target: str | None,
    kind: str | None,
    name: str | None,
    trainjob: str | None,
    cluster: str | None,
    namespace: str | None,
    follow: bool,
    interval: str,
    collect_target: str | None,
    patience: str,
    now_text: str | None,
    output: str,
) -> None:
    """Derive the typed cause of a training workload (TrainJob, JobSet, PyTorchJob and the
    other training-operator jobs, batch Job) from a dump of its objects or from a cluster.

    Exit 0 when diagnosed (any cause), 1 when the workload is not on the cluster, 2 when the
    input is not a usable dump or names no single workload, 3 when the cluster cannot be read.
    """
    # adapters are imported when used, never by `dispatch --help` (see adapters/registry.py)
    from dispatch.adapters.kubeflow.objects import parse_time

    seconds = _duration("--patience", patience, output)
    now = parse_time(now_text) if now_text else None
    if now_text and now is None:
        fail(f"--now: {now_text!r} is not an RFC 3339 time", code=EXIT_USAGE, output=output)
    if collect_target is not None:
        _collect(settings, collect_target, cluster, namespace, output)
        return
    if target is None:
        fail(
            "name a dump FILE (or - for standard input), or KIND/NAME with --cluster",
            code=EXIT_USAGE,
            output=output,
        )
    if cluster is not None:
        every = _duration("--interval", interval, output)
        _live(settings, target, cluster, namespace, follow, every, seconds, output)
        return
    if follow:
        fail("--follow needs --cluster (a dump does not change)", code=EXIT_USAGE, output=output)
    _from_dump(target, kind, name, trainjob, seconds, now, output)


def _duration(option: str, text: str, output: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        fail(f"{option}: {exc}", code=EXIT_USAGE, output=output)


# --- a dump ---------------------------------------------------------------------------------


def _from_dump(
    path: str,
    kind: str | None,
    name: str | None,
    trainjob: str | None,
    patience: float,
    now: float | None,
    output: str,
) -> None:
    from dispatch.adapters.kubeflow.causes.decide import Inputs, diagnose
    from dispatch.adapters.kubeflow.causes.dump import parse_dump
    from dispatch.adapters.kubeflow.causes.evidence import EvidenceSet

    text = _read(path, output)
    described = describe_text(text)
    if described is not None:
        fail(_describe_message(path, *described), code=EXIT_USAGE, output=output)
    try:
        objects = parse_dump(text)
    except ValueError as exc:
        hint = (
            " (the file may be cut short: collect it again, see `dispatch diagnose --collect`)"
            if text.strip()
            else ""
        )
        fail(f"{path}: {exc}{hint}", code=EXIT_USAGE, output=output)
    evidence = EvidenceSet.from_objects(objects)
    if trainjob is not None:
        kind, name = kind or "TrainJob", name or trainjob
    chosen = _choose(path, evidence, kind, name, output)
    diagnosis = diagnose(evidence, Inputs(patience=patience, now=now, workload=chosen))
    _emit(diagnosis, output)
    sys.exit(EXIT_OK)


def _read(path: str, output: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}", code=EXIT_USAGE, output=output)
    except UnicodeDecodeError:
        fail(f"{path} is not UTF-8 text", code=EXIT_USAGE, output=output)


def _emit(diagnosis: Diagnosis, output: str) -> None:
    if output == "json":
        emit_json(diagnosis.to_json())
    else:
        _print_text(diagnosis)


def _choose(
    path: str, evidence: EvidenceSet, kind: str | None, name: str | None, output: str
) -> Ref:
    from dispatch.adapters.kubeflow.api.collect import parse_target
    from dispatch.adapters.kubeflow.causes.workloads import (
        WORKLOAD_KINDS,
        implied_workloads,
        workloads,
    )

    found = workloads(evidence) or implied_workloads(evidence)
    listed = [{"kind": r.kind, "name": r.name, "namespace": r.namespace} for r in found]
    if kind is not None:
        try:
            kind = parse_target(f"{kind}/x")[0]
        except ValueError as exc:
            fail(f"--kind: {exc}", code=EXIT_USAGE, output=output)
    if kind is not None or name is not None:
        kinds = [kind] if kind is not None else list(WORKLOAD_KINDS)
        every = [
            h.ref
            for k in kinds
            for h in evidence.histories(k)
            if name is None or h.ref.name == name
        ] or [r for r in found if kind in (None, r.kind) and name in (None, r.name)]
        if kind is None and len(every) > 1:
            every = [r for r in every if r in found] or every  # the outermost of that name
        if len(every) == 1:
            return every[0]
        wanted = " ".join(p for p in (kind, name) if p)
        if not every:
            fail(f"{path} holds no {wanted}", code=EXIT_USAGE, output=output, workloads=listed)
        found = every
    if not found:
        counts = Counter(h.ref.kind for h in evidence.histories())
        held = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing"
        fail(
            f"{path} holds no training workload (TrainJob, JobSet, PyTorchJob, TFJob, MPIJob, "
            f"XGBoostJob, PaddleJob, JAXJob or Job), nor pods of one; it holds: {held}",
            code=EXIT_USAGE,
            output=output,
            workloads=listed,
        )
    if len(found) > 1:
        names = ", ".join(f"{r.kind}/{r.name}" for r in found)
        fail(
            f"{path} holds {len(found)} workloads ({names}); name one with --kind and --name",
            code=EXIT_USAGE,
            output=output,
            workloads=listed,
        )
    return found[0]


# --- input that is not a dump ---------------------------------------------------------------

_FIELD = re.compile(r"^(?P<key>[A-Z][A-Za-z ]*):[ \t]*(?P<value>.*)$")


def describe_text(text: str) -> tuple[str, str, str] | None:
    """(kind, name, namespace) when ``text`` is ``kubectl describe`` output, else None.

    ``describe`` prints ``Name:``, ``Namespace:`` and (for custom resources) ``Kind:`` as
    aligned ``Key:  value`` lines, never ``apiVersion:``/``kind:`` keys as YAML does. A pod's
    describe names its workload in ``Controlled By:  Kind/name``."""
    lines = [line for line in text.splitlines()[:400] if line.strip()]
    if not lines or not lines[0].startswith("Name:"):
        return None
    fields: dict[str, str] = {}
    for line in lines:
        match = _FIELD.match(line)
        if match and match.group("key") not in fields:
            fields[match.group("key")] = match.group("value").strip()
    if "Namespace" not in fields and "Kind" not in fields:
        return None
    kind = fields.get("Kind", "")
    name = fields.get("Name", "")
    controller = fields.get("Controlled By", "")
    if not kind and "/" in controller:
        kind, _, name = controller.partition("/")
    elif not kind:
        kind = "Pod" if "Containers" in fields or "Node" in fields else ""
    return kind, name, fields.get("Namespace", "")


def _describe_message(path: str, kind: str, name: str, namespace: str) -> str:
    from dispatch.adapters.kubeflow.api.collect import kubectl_commands, parse_target

    what = f"{kind}/{name}" if kind and name else "a workload"
    head = (
        f"{path}: this is `kubectl describe` output of {what}, not a dump: describe leaves "
        "out the fields the cause is read from (container states, conditions, owners). "
    )
    try:
        workload, workload_name = parse_target(f"{kind}/{name}")
    except ValueError:
        return head + (
            "Collect a dump of the workload instead: "
            "`dispatch diagnose --collect KIND/NAME --namespace NS` prints the commands"
        )
    lines = kubectl_commands(workload, workload_name, namespace or "default")
    return (
        head
        + f"Run `kubectl get {kind.lower()} {name} -o yaml` and the rest of a full dump:\n"
        + "\n".join(lines)
        + f"\nthen: dispatch diagnose {workload_name}-dump.yaml"
    )


# --- a live cluster -------------------------------------------------------------------------


def _kubeflow_connection(settings: Settings, cluster: str, namespace: str | None) -> Any:
    from dispatch.adapters.kubeflow.api.client import Connection
    from dispatch.adapters.kubeflow.api.credentials import default_namespace, locate
    from dispatch.adapters.kubeflow.planning.settings import parse_settings
    from dispatch.model import ConfigError

    config = settings.config.cluster(cluster)
    if config.adapter != "kubeflow":
        raise ConfigError(
            f"cluster {cluster} uses the {config.adapter} adapter; diagnose reads Kubeflow clusters"
        )
    parsed = parse_settings(config)
    source = locate(parsed.kubeconfig, parsed.context)
    ns = namespace or parsed.namespace or default_namespace(source, parsed.context) or "default"
    return Connection(source, parsed.context), ns


def _live(
    settings: Settings,
    target: str,
    cluster: str,
    namespace: str | None,
    follow: bool,
    interval: float,
    patience: float,
    output: str,
) -> None:
    import asyncio

    from dispatch.adapters.kubeflow.api.collect import parse_target
    from dispatch.adapters.kubeflow.live.follow import Following, diagnose_live

    try:
        kind, name = parse_target(target)
    except ValueError as exc:
        fail(str(exc), code=EXIT_USAGE, output=output)
    connection, ns = _kubeflow_connection(settings, cluster, namespace)
    following = Following(kind, name, ns)

    def progress(diagnosis: Diagnosis) -> None:
        if follow and output == "text" and not diagnosis.outcome.is_terminal:
            outcome = diagnosis.outcome
            cause = f" ({outcome.cause.value})" if outcome.cause else ""
            click.echo(f"{kind} {name}: {outcome.state.value}{cause}: {outcome.summary}")

    async def run() -> Diagnosis:
        try:
            async with connection.session() as session:
                return await diagnose_live(
                    session,
                    following,
                    patience=patience,
                    follow=follow,
                    interval=interval,
                    on_change=progress,
                )
        finally:
            await connection.aclose()

    _emit(asyncio.run(run()), output)
    sys.exit(EXIT_OK)


def _collect(
    settings: Settings, target: str, cluster: str | None, namespace: str | None, output: str
) -> None:
    from dispatch.adapters.kubeflow.api.collect import collect, kubectl_commands, parse_target

    try:
        kind, name = parse_target(target)
    except ValueError as exc:
        fail(f"--collect: {exc}", code=EXIT_USAGE, output=output)
    if cluster is None:
        lines = kubectl_commands(kind, name, namespace or "default")
        if output == "json":
            emit_json({"kind": kind, "name": name, "commands": lines})
        else:
            click.echo("\n".join(lines))
        return
    import asyncio

    import yaml

    connection, ns = _kubeflow_connection(settings, cluster, namespace)

    async def run() -> list[dict[str, Any]]:
        try:
            async with connection.session() as session:
                return await collect(session, kind, name, ns)
        finally:
            await connection.aclose()

    objects = asyncio.run(run())
    if output == "json":
        emit_json({"apiVersion": "v1", "kind": "List", "items": objects})
    else:
        click.echo(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}), nl=False)

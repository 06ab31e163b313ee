"""`dispatch check-runtime FILE`: check a Kubeflow Trainer runtime against dispatch's rules.

Contract (spec/kubeflow-adapter.md, section 4): with ``--output json`` one object
``{"runtime": {"kind", "name"}, "accepted", "reasons": [{"rule", "message"}],
"weakenedIdentity", "capabilities": {"ProcsPerNode": {"supported", "reason"}}}``.
Exit 0 when accepted, 1 when refused, 2 on bad usage or unreadable input. With ``--cluster``
the named Kubeflow cluster's settings apply (allow-list, allowRankRestart, publishing);
``not-found`` cannot apply to a file.

Live form: ``dispatch check-runtime --cluster NAME RUNTIME`` where RUNTIME is not a file but a
runtime's name (a ClusterTrainingRuntime) or ``TrainingRuntime/NAME`` (in the cluster's
namespace): the runtime is read from the cluster and ``not-found`` applies. Same JSON and exit
codes; 3 when the cluster cannot be asked (unreachable, forbidden).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dispatch.cli.common import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Settings,
    emit_json,
    fail,
    output_option,
)
from dispatch.config import load_config
from dispatch.model import ConfigError, DispatchError, yaml12
from dispatch.model.shown import clip, show

if TYPE_CHECKING:
    from dispatch.adapters.kubeflow.planning.rules import RuntimeVerdict
    from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings

RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
_LIVE_NAME = re.compile(
    r"^(?:(ClusterTrainingRuntime|TrainingRuntime)/)?([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$"
)
_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def live_runtime(argument: str, cluster: str | None) -> tuple[str, str] | None:
    """``(kind, name)`` when ``argument`` names a runtime on ``cluster`` rather than a file."""
    if cluster is None or Path(argument).exists() or argument.endswith(_FILE_SUFFIXES):
        return None
    match = _LIVE_NAME.match(argument)
    if match is None:
        return None
    return match[1] or "ClusterTrainingRuntime", match[2]


def check_live(config_path: Path | None, cluster: str, kind: str, name: str) -> RuntimeVerdict:
    """The runtime rules for the runtime as the cluster has it now."""
    from dispatch.adapters.kubeflow.adapter import KubeflowAdapter
    from dispatch.api import Environment

    adapter = Environment.load(config_path=config_path).adapter(cluster)
    if not isinstance(adapter, KubeflowAdapter):
        raise ConfigError(
            f"cluster {cluster!r} uses the {adapter.kind!r} adapter; runtime rules apply "
            "to kubeflow clusters only"
        )
    return asyncio.run(adapter.check_runtime(kind, name))


def read_runtime(path: str) -> Mapping[str, Any]:
    """The one runtime object in a YAML or JSON file; ``ValueError`` says why it is unusable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    try:
        documents = [doc for doc in yaml12.load_all(text) if doc is not None]
    except yaml12.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML or JSON: {clip(str(exc))}") from None
    except RecursionError:
        raise ValueError(f"{path} is nested too deeply to read") from None
    if len(documents) != 1:
        raise ValueError(f"{path} holds {len(documents)} documents; give exactly one runtime")
    document = documents[0]
    runtime: Mapping[str, Any] = document if isinstance(document, Mapping) else {}
    kind = runtime.get("kind")
    if kind not in RUNTIME_KINDS:
        raise ValueError(
            f"{path} is not a Trainer runtime: its kind is {show(kind)}, expected one of "
            f"{', '.join(RUNTIME_KINDS)}"
        )
    metadata = runtime.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{path}: the runtime has no metadata.name")
    return runtime


def cluster_settings(config_path: Path | None, cluster: str | None) -> KubeflowSettings:
    """The named Kubeflow cluster's settings; the defaults when no cluster is named."""
    from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings, parse_settings

    if cluster is None:
        return KubeflowSettings()
    configured = load_config(config_path).cluster(cluster)
    if configured.adapter != "kubeflow":
        raise ConfigError(
            f"cluster {cluster!r} uses the {configured.adapter!r} adapter; runtime rules apply "
            "to kubeflow clusters only"
        )
    return parse_settings(configured)


def _print_text(verdict: RuntimeVerdict) -> None:
    title = f"{verdict.kind} {verdict.name}"
    if verdict.accepted:
        click.echo(f"{title}: accepted")
    else:
        count = len(verdict.reasons)
        click.echo(f"{title}: refused ({count} reason{'s' if count != 1 else ''})")
        for reason in verdict.reasons:
            click.echo(f"  - [{reason.rule}] {reason.message}")
    answer = verdict.procs_per_node
    click.echo(f"  {answer.name}: {'yes' if answer.supported else 'no'} ({answer.reason})")
    if verdict.weakened_identity:
        click.echo(f"  weakened identity: {verdict.weakened_identity}")


@click.command("check-runtime")
@click.argument("runtime_file", metavar="FILE|RUNTIME")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Clusters configuration file (overrides the global --config).",
)
@click.option("--cluster", help="The configured Kubeflow cluster whose settings apply.")
@output_option
@click.pass_obj
def command(
    settings: Settings | None,
    runtime_file: str,
    config_path: Path | None,
    cluster: str | None,
    output: str,
) -> None:
    """Check a Kubeflow Trainer runtime file against dispatch's runtime rules.

    With --cluster, RUNTIME may instead name a runtime on that cluster (NAME for a
    ClusterTrainingRuntime, TrainingRuntime/NAME in the cluster's namespace).
    Exit 0 when the runtime is accepted, 1 when refused, 2 on bad usage or unreadable input,
    3 when the cluster cannot be asked.
    """
    # adapters are imported when used, never by `dispatch --help` (see adapters/registry.py)
    from dispatch.adapters.kubeflow.planning.rules import check_runtime

    chosen = config_path or (settings.config_path if settings else None)
    try:
        cluster_config = cluster_settings(chosen, cluster)
    except ConfigError as exc:
        fail(str(exc), code=EXIT_USAGE, output=output)
    live = live_runtime(runtime_file, cluster)
    if live is not None and cluster is not None:
        try:
            verdict = check_live(chosen, cluster, *live)
        except ConfigError as exc:
            fail(str(exc), code=EXIT_USAGE, output=output)
        except DispatchError as exc:
            fail(str(exc), code=EXIT_ERROR, output=output)
    else:
        try:
            runtime = read_runtime(runtime_file)
        except ValueError as exc:
            fail(str(exc), code=EXIT_USAGE, output=output)
        verdict = check_runtime(runtime, cluster_config)
    if output == "json":
        emit_json(verdict.to_json())
    else:
        _print_text(verdict)
    sys.exit(EXIT_OK if verdict.accepted else EXIT_FAILED)

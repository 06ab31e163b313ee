"""`dispatch admission`: the cluster-side guard (issue 29).

* ``serve``: the validating admission webhook server (``adapters/kubeflow/admission/server``);
  runs until SIGTERM. Exit 0 after a clean stop, 2 on bad usage (a certificate that cannot be
  loaded, a malformed selector, an unknown cluster), 3 when the address cannot be bound.
* ``certs``: a CA and a serving certificate for the guard's Service, and the ``caBundle`` to
  put in the webhook configuration. Exit 0; 2 on bad usage.
* ``manifests``: the objects that install the guard (``cmd_admission_manifests``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dispatch.cli.cmd_admission_manifests import command as manifests_command
from dispatch.cli.cmd_admission_manifests import parse_labels
from dispatch.cli.common import EXIT_ERROR, EXIT_USAGE, Settings, emit_json, fail, output_option
from dispatch.model import ConfigError

if TYPE_CHECKING:
    from dispatch.adapters.kubeflow.admission.contract import GuardConfig
    from dispatch.adapters.kubeflow.admission.server import ServeOptions
    from dispatch.adapters.kubeflow.api.client import Connection
    from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings

#: the contract's defaults, spelled here so ``dispatch --help`` imports no adapter (a test
#: checks they are the same)
DEFAULT_IDENTITIES = ("system:serviceaccount:dispatch:dispatch-supervisor",)
DEFAULT_SELECTOR = ("dispatch.dev/checked",)


@click.group("admission")
def command() -> None:
    """The cluster-side guard: a validating admission webhook that refuses resuming an ended
    TrainJob, changes to dispatch's objects by anyone else, and runtimes breaking dispatch's
    runtime rules."""


@command.command("serve")
@click.option(
    "--cert-file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The serving certificate (PEM); reloaded when it changes.",
)
@click.option(
    "--key-file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Its private key (PEM); reloaded when it changes.",
)
@click.option("--address", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8443,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: any free port, printed in the start line).",
)
@click.option(
    "--identity",
    "identities",
    multiple=True,
    default=DEFAULT_IDENTITIES,
    show_default=True,
    help="A user whose writes are dispatch's (repeatable).",
)
@click.option(
    "--group",
    "groups",
    multiple=True,
    help="A group whose members' writes are dispatch's (repeatable).",
)
@click.option(
    "--runtime-selector",
    "selector",
    multiple=True,
    default=DEFAULT_SELECTOR,
    show_default=True,
    metavar="KEY[=VALUE]",
    help="Label a runtime must carry to be checked (repeatable; all must match).",
)
@click.option(
    "--cluster",
    help="The configured Kubeflow cluster whose runtime settings apply "
    "(allowRankRestart, publish, runtimes) and whose kubeconfig writes Events.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Clusters configuration file (overrides the global --config).",
)
@click.option(
    "--allow-rank-restart/--no-allow-rank-restart",
    default=None,
    help="Override the cluster's allowRankRestart.",
)
@click.option(
    "--publish-init-container",
    metavar="NAME",
    help="Publish identity through this init container (as publish.via initContainer).",
)
@click.option(
    "--kubeconfig",
    help="Kubeconfig for writing Events (default: the cluster's, "
    "else $KUBECONFIG or ~/.kube/config, else the pod's service account).",
)
@click.option("--context", help="Kubeconfig context for writing Events.")
@click.option("--no-events", is_flag=True, help="Record no Event on refused resumes.")
@click.option(
    "--reload-interval",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.05, 3600),
    help="Seconds between looks at the TLS files.",
)
@click.pass_obj
def serve(
    settings: Settings | None,
    cert_file: Path,
    key_file: Path,
    address: str,
    port: int,
    identities: tuple[str, ...],
    groups: tuple[str, ...],
    selector: tuple[str, ...],
    cluster: str | None,
    config_path: Path | None,
    allow_rank_restart: bool | None,
    publish_init_container: str | None,
    kubeconfig: str | None,
    context: str | None,
    no_events: bool,
    reload_interval: float,
) -> None:
    """Serve the guard over HTTPS until SIGTERM (one JSON log line per decision on stderr)."""
    from dispatch.adapters.kubeflow.admission.server import ServeOptions

    chosen = config_path or (settings.config_path if settings else None)
    try:
        runtime_selector = parse_labels(selector, require_value=False)
        kubeflow = _settings(chosen, cluster, allow_rank_restart, publish_init_container)
    except (ValueError, ConfigError) as exc:
        fail(str(exc), code=EXIT_USAGE)
    guard = _guard_config(identities, groups, runtime_selector, kubeflow)
    options = ServeOptions(
        cert_file=cert_file,
        key_file=key_file,
        config=guard,
        address=address,
        port=port,
        reload_interval=reload_interval,
    )
    if not no_events:
        options = dataclasses.replace(
            options,
            events=_events_connection(
                kubeconfig or kubeflow.kubeconfig, context or kubeflow.context
            ),
        )
    try:
        asyncio.run(_serve(options))
    except ConfigError as exc:
        fail(str(exc), code=EXIT_USAGE)
    except ValueError as exc:
        fail(str(exc), code=EXIT_USAGE)
    except OSError as exc:
        fail(f"cannot listen on {address}:{port}: {exc.strerror or exc}", code=EXIT_ERROR)


async def _serve(options: ServeOptions) -> None:
    """Check the Event credentials load (a bad kubeconfig is bad usage), then serve."""
    from dispatch.adapters.kubeflow.admission.server import serve

    if options.events is not None:
        await options.events.configuration()
    await serve(options)


def _settings(
    config_path: Path | None,
    cluster: str | None,
    allow_rank_restart: bool | None,
    init_container: str | None,
) -> KubeflowSettings:
    """The runtime rules' settings: the cluster's, with the flags' overrides."""
    from dispatch.adapters.kubeflow.planning.settings import PublishVia
    from dispatch.cli.cmd_check_runtime import cluster_settings

    found = cluster_settings(config_path, cluster)
    if allow_rank_restart is not None:
        found = dataclasses.replace(found, allow_rank_restart=allow_rank_restart)
    if init_container is not None:
        found = dataclasses.replace(
            found, publish_via=PublishVia.INIT_CONTAINER, init_container=init_container
        )
    return found


def _guard_config(
    identities: tuple[str, ...],
    groups: tuple[str, ...],
    selector: dict[str, str | None],
    kubeflow: KubeflowSettings,
) -> GuardConfig:
    from dispatch.adapters.kubeflow.admission.contract import GuardConfig

    return GuardConfig(
        identities=frozenset(identities),
        groups=frozenset(groups),
        runtime_selector=selector,
        settings=kubeflow,
    )


def _events_connection(kubeconfig: str | None, context: str | None) -> Connection:
    from dispatch.adapters.kubeflow.api.client import Connection
    from dispatch.adapters.kubeflow.api.credentials import locate

    return Connection(locate(kubeconfig, context), context)


@command.command("certs")
@click.option("--service", required=True, help="The guard's Service name.")
@click.option("--namespace", required=True, help="The Service's namespace.")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for ca.crt, ca.key, tls.crt, tls.key (made if missing).",
)
@click.option(
    "--dns-name",
    "extra",
    multiple=True,
    help="Another name (or IP address) the certificate is valid for (repeatable).",
)
@click.option(
    "--days",
    default=365,
    show_default=True,
    type=click.IntRange(1, 3650),
    help="Days the certificates are valid.",
)
@output_option
def certs(
    service: str, namespace: str, out: Path, extra: tuple[str, ...], days: int, output: str
) -> None:
    """Make a CA and a serving certificate for the guard's Service; print the caBundle."""
    from dispatch.adapters.kubeflow.admission.certs import issue, service_names

    names = [*service_names(service, namespace), *extra]
    try:
        files = issue(names, out, days=days)
    except (OSError, ValueError) as exc:
        fail(f"cannot write the certificates into {out}: {exc}", code=EXIT_USAGE, output=output)
    shown = {
        "caCert": str(files.ca_cert),
        "caKey": str(files.ca_key),
        "cert": str(files.cert),
        "key": str(files.key),
        "dnsNames": names,
        "days": days,
        "caBundle": files.ca_bundle,
    }
    if output == "json":
        emit_json(shown)
        return
    for label, key in (("CA certificate", "caCert"), ("CA key", "caKey"),
                       ("serving certificate", "cert"), ("serving key", "key")):  # fmt: skip
        click.echo(f"{label}: {shown[key]}")
    click.echo(f"valid for: {', '.join(names)} ({days} days)")
    click.echo(f"caBundle: {files.ca_bundle}")


command.add_command(manifests_command)

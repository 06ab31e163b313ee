"""`dispatch admission manifests`: print the objects that install the cluster-side guard.

Objects to stdout (``kubectl apply -f -`` reads them), what they do to stderr. With ``--output
yaml`` (the default) a multi-document YAML stream; with ``--output json`` one ``v1`` ``List``.
By default: the webhook server (ServiceAccount, ClusterRole and binding, Service, Deployment,
PodDisruptionBudget) and its ValidatingWebhookConfiguration; with ``--policy`` instead the
ValidatingAdmissionPolicies and bindings that enforce rules 1 and 2 without a server.
Exit 0; 2 on bad usage (an unreadable ``--ca-file``, a malformed selector).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import click
import yaml

from dispatch.cli.common import EXIT_USAGE, fail


def parse_labels(values: tuple[str, ...], *, require_value: bool) -> dict[str, str | None]:
    """``KEY=VALUE`` (or ``KEY`` alone, "exists", unless ``require_value``) into a selector;
    ``ValueError`` names the malformed one."""
    selector: dict[str, str | None] = {}
    for value in values:
        key, equals, wanted = value.partition("=")
        key = key.strip()
        if not key or (require_value and not equals):
            form = "KEY=VALUE" if require_value else "KEY or KEY=VALUE"
            raise ValueError(f"selector {value!r}: expected {form}")
        selector[key] = wanted if equals else None
    return selector


def read_ca_bundle(path: Path) -> str:
    """The PEM file's content, base64-encoded as ``caBundle`` wants; ``ValueError`` says why
    it is unusable."""
    try:
        pem = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise ValueError(f"{path} holds no PEM certificate")
    return base64.b64encode(pem).decode("ascii")


def render(objects: list[dict[str, Any]], output: str) -> str:
    """The objects as a YAML stream or as a JSON ``List``."""
    if output == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2)
    return yaml.safe_dump_all(objects, sort_keys=False, width=100)


@click.command("manifests")
@click.option("--namespace", default="dispatch", show_default=True, help="Where the server runs.")
@click.option(
    "--name", default="dispatch-admission", show_default=True, help="Every object's name."
)
@click.option("--image", help="The server's image [default: dispatch:<this version>].")
@click.option(
    "--identity",
    "identities",
    multiple=True,
    metavar="USER",
    help="A user whose writes are dispatch's, besides the supervisor's service account "
    "(repeatable).",
)
@click.option(
    "--group",
    "groups",
    multiple=True,
    metavar="GROUP",
    help="A group whose members' writes are dispatch's (repeatable).",
)
@click.option(
    "--runtime-selector",
    "runtime_selector",
    multiple=True,
    metavar="KEY[=VALUE]",
    help="A label the checked runtimes carry (repeatable) [default: dispatch.dev/checked].",
)
@click.option(
    "--ca-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The PEM CA that signed the server's certificate: sets caBundle.",
)
@click.option(
    "--failure-policy",
    type=click.Choice(["Fail", "Ignore"]),
    default="Fail",
    show_default=True,
    help="What the API server does when the guard cannot answer.",
)
@click.option(
    "--timeout",
    type=click.IntRange(1, 30),
    default=5,
    show_default=True,
    help="Seconds the API server waits for the server.",
)
@click.option(
    "--namespace-selector",
    "namespace_selector",
    multiple=True,
    metavar="KEY=VALUE",
    help="Guard only namespaces with this label (repeatable) [default: every namespace].",
)
@click.option(
    "--allow-rank-restart/--no-allow-rank-restart",
    default=None,
    help="The runtime rules' allowRankRestart the server applies [default: the server's].",
)
@click.option(
    "--publish-init-container",
    metavar="NAME",
    help="The server's runtime rules publish identity through this init container.",
)
@click.option(
    "--policy",
    is_flag=True,
    help="Print the ValidatingAdmissionPolicies (no server; no runtime rules) instead.",
)
@click.option(
    "--output",
    "-o",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="A YAML stream, or one JSON List.",
)
def command(
    namespace: str,
    name: str,
    image: str | None,
    identities: tuple[str, ...],
    groups: tuple[str, ...],
    runtime_selector: tuple[str, ...],
    ca_file: Path | None,
    failure_policy: str,
    timeout: int,
    namespace_selector: tuple[str, ...],
    allow_rank_restart: bool | None,
    publish_init_container: str | None,
    policy: bool,
    output: str,
) -> None:
    """Print the guard's objects for `kubectl apply -f -` (notes go to stderr)."""
    from dispatch.adapters.kubeflow.admission.manifests import (
        ManifestOptions,
        notes,
        webhook_objects,
    )
    from dispatch.adapters.kubeflow.admission.policy import policy_objects

    errors = "json" if output == "json" else "text"
    try:
        extra: dict[str, Any] = {}
        if runtime_selector:
            extra["runtime_selector"] = parse_labels(runtime_selector, require_value=False)
        if namespace_selector:
            extra["namespace_selector"] = parse_labels(namespace_selector, require_value=True)
        options = ManifestOptions(
            namespace=namespace,
            name=name,
            image=image,
            identities=identities,
            groups=groups,
            ca_bundle=read_ca_bundle(ca_file) if ca_file is not None else None,
            failure_policy=failure_policy,
            timeout_seconds=timeout,
            allow_rank_restart=allow_rank_restart,
            publish_init_container=publish_init_container,
            **extra,
        )
    except ValueError as exc:
        fail(str(exc), code=EXIT_USAGE, output=errors)
    objects = policy_objects(options) if policy else webhook_objects(options)
    click.echo(render(objects, output), nl=output == "json")
    shown = POLICY_NOTES.format(name=options.name) if policy else notes(options)
    click.echo(shown, err=True, nl=False)


POLICY_NOTES = """\
# dispatch admission manifests --policy: what the objects do
#
# - {name}-ended: refuses resuming (spec.suspend true -> false) a TrainJob labelled
#   dispatch.dev/job that carries dispatch.dev/ended, whoever asks (Kueue included).
# - {name}-owned: refuses changes to a dispatch TrainJob's spec (but spec.suspend and Kueue's
#   runtimePatches entry), to a runtime copy's spec, and to dispatch.dev/* labels and
#   annotations, by anyone but dispatch's identities (matchConditions exempt them).
# - failurePolicy Fail: an expression that cannot be evaluated refuses.
# - Kubernetes >= 1.30 (admissionregistration.k8s.io/v1). Unlike the webhook, the policies
#   do not check runtimes (rule 3), record no Event on a refused resume, and let through
#   changes to TrainJob fields Trainer adds after v2.3: regenerate them when Trainer's API
#   grows.
"""

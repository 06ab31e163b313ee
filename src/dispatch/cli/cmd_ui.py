"""`dispatch ui`: a live web view of jobs, attempts, causes and evidence."""

from __future__ import annotations

import sys

import click

from dispatch import ui
from dispatch.api import Environment
from dispatch.cli.common import EXIT_USAGE, Settings, fail, report_errors


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8642, show_default=True, help="Port (0: any free).")
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Allow cancel, release and hold from the pages, each with the token printed at start.",
)
@click.option("--actor", help="Who the actions are recorded as (default: your login name).")
@click.pass_obj
@report_errors
def command(
    settings: Settings, host: str, port: int, allow_actions: bool, actor: str | None
) -> None:
    """Serve a live web view over the records (the same store the other verbs use): jobs
    with their state and cause, each job's attempts, evidence and decisions on a timeline,
    its logs as they are written, and an overview of ends by cause. Read-only unless
    --allow-actions. Listens on the loopback address unless --host says otherwise. Needs
    the ui extra."""
    missing = ui.missing_modules()
    if missing:
        click.echo(
            f"dispatch ui needs {', '.join(missing)}, which are not installed: {ui.INSTALL}",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    from dispatch.ui.guard import is_loopback
    from dispatch.ui.server import serve

    if not is_loopback(host):
        click.secho(
            f"warning: listening on {host}: whoever reaches it can read every job's spec, "
            "evidence and logs (secret values are masked)",
            fg="yellow",
            err=True,
        )
    env = Environment.load(config_path=settings.config_path)
    try:
        serve(env, host=host, port=port, allow_actions=allow_actions, actor=actor, say=click.echo)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", code=EXIT_USAGE)

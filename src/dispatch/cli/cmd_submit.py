"""`dispatch submit JOB.yaml`: submit a job and return at once (``--hold``: held until released)."""

from __future__ import annotations

import asyncio

import click

from dispatch.cli.common import Settings, emit_json, output_option, report_errors
from dispatch.cli.session import client
from dispatch.model import load_spec


@click.command("submit")
@click.argument("spec_file", metavar="JOB.yaml")
@click.option(
    "--hold",
    is_flag=True,
    help="Record the job held: nothing starts until `dispatch release JOB`.",
)
@output_option
@click.pass_obj
@report_errors
def command(settings: Settings, spec_file: str, hold: bool, output: str) -> None:
    """Submit a job and return at once; a background supervisor drives it to its end, even
    after this terminal is closed (on a cluster with `supervision: remote`, the team's
    supervisors do, and none starts here). Follow it with `dispatch status` and
    `dispatch logs -f`.

    With --hold the job is recorded `held` and nothing is created on the cluster until
    `dispatch release JOB` (its first attempt then starts); `dispatch cancel JOB` ends it
    cancelled without any attempt."""
    spec = load_spec(spec_file)
    api = client(settings)
    try:
        status = asyncio.run(api.submit(spec, spec_file=spec_file, hold=hold))
    finally:
        api.close()
    if output == "json":
        emit_json(status.to_json())
        return
    click.echo(status.id)
    if hold:
        click.echo(status.summary, err=True)  # "held at submission by ...; release with ..."
        return
    remote = not settings.config.cluster(status.cluster).supervised_here
    by = " (supervised remotely: this machine may go away)" if remote else ""
    click.echo(
        click.style(
            f"submitted to {status.cluster}{by}; follow with: dispatch status {status.id}  |  "
            f"dispatch logs -f {status.id}",
            dim=True,
        ),
        err=True,
    )

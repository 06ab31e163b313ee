"""`dispatch release JOB`: let a held job start its next attempt."""

from __future__ import annotations

import asyncio

import click

from dispatch.cli import display
from dispatch.cli.common import Settings, output_option, report_errors
from dispatch.cli.session import client


@click.command("release")
@click.argument("job")
@output_option
@click.pass_obj
@report_errors
def command(settings: Settings, job: str, output: str) -> None:
    """Release a held job (held by its recovery policy, or submitted with --hold): its next
    attempt starts (attempt 1 for a job held at submission)."""
    api = client(settings)
    try:
        status = asyncio.run(api.release(job))
    finally:
        api.close()
    display.show_status(status, output)
    if output == "json":
        return
    click.echo(
        click.style(
            f"released: a supervisor starts attempt {len(status.attempts) + 1} next; "
            f"follow with: dispatch status {status.id}",
            dim=True,
        ),
        err=True,
    )

"""`dispatch list`: jobs, newest first."""

from __future__ import annotations

import asyncio

import click

from dispatch.cli import display
from dispatch.cli.common import Settings, emit_json, output_option, report_errors
from dispatch.cli.session import client


@click.command("list")
@click.option("--open", "open_only", is_flag=True, help="Only jobs that have not ended.")
@click.option("--limit", type=int, default=20, show_default=True, help="How many jobs at most.")
@output_option
@click.pass_obj
@report_errors
def command(settings: Settings, open_only: bool, limit: int, output: str) -> None:
    """List jobs, newest first, with their state and cause."""
    api = client(settings, background=False)
    try:
        jobs = asyncio.run(api.list(include_ended=not open_only, limit=limit))
        skipped = dict(api.records.unreadable)
    finally:
        api.close()
    for job_id, why in sorted(skipped.items()):
        click.secho(f"warning: skipped job {job_id}: its record cannot be read ({why})", err=True)
    if output == "json":
        emit_json([j.to_json() for j in jobs])
        return
    if not jobs:
        click.echo("no jobs" + (" open" if open_only else ""))
        return
    width = max(len(j.id) for j in jobs)
    click.echo(f"{'JOB':<{width}}  {'CLUSTER':<10} {'STATE':<10} {'CAUSE':<18} SUBMITTED")
    for j in jobs:
        state = display.state_text(j.state) + " " * (10 - len(j.state.value))
        cause = j.cause.value if j.cause else "-"
        click.echo(
            f"{j.id:<{width}}  {j.cluster:<10} {state} {cause:<18} {display.when(j.created_at)}"
        )

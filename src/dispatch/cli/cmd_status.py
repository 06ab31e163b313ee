"""`dispatch status [JOB]`: a job's state, cause, attempts and the supervisor's last decision."""

from __future__ import annotations

import asyncio

import click

from dispatch.cli import display
from dispatch.cli.common import Settings, fail, output_option, report_errors
from dispatch.cli.session import client
from dispatch.model import NotFound


@click.command("status")
@click.argument("job", required=False)
@output_option
@click.pass_obj
@report_errors
def command(settings: Settings, job: str | None, output: str) -> None:
    """Show a job's state, cause, evidence, attempts and the supervisor's last decision.
    JOB is a job id or an unambiguous prefix; without it, the most recent job."""
    api = client(settings, background=False)
    try:
        if job is None:
            recent = asyncio.run(api.list(limit=1))
            if not recent:
                fail("no jobs yet; submit one with `dispatch run JOB.yaml`", output=output)
            job = recent[0].id
        try:
            status = asyncio.run(api.get(job))
        except NotFound as exc:
            fail(str(exc), output=output)
    finally:
        api.close()
    display.show_status(status, output)

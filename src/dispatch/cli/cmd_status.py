"""`dispatch status [JOB]`: a job's state, cause, attempts and the supervisor's last decision."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("status")
@click.argument("job", required=False)
@output_option
def command(job: str | None, output: str) -> None:
    """Show a job's state, cause, attempts and the supervisor's last decision."""
    not_built("status", 3, output)

"""`dispatch cancel JOB`: stop a job's running attempt and start no new one."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("cancel")
@click.argument("job")
@click.option(
    "--reason", default="cancelled from the command line", help="Recorded with the cancel."
)
@output_option
def command(job: str, reason: str, output: str) -> None:
    """Cancel a job: stop its running attempt and start no new one."""
    not_built("cancel", 3, output)

"""`dispatch logs JOB`: what a job's ranks printed."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("logs")
@click.argument("job")
@click.option("--rank", type=int, help="Only this rank.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the job ends.")
@output_option
def command(job: str, rank: int | None, follow: bool, output: str) -> None:
    """Print the output of a job's ranks."""
    not_built("logs", 3, output)

"""`dispatch submit`: submit a job and return at once; a background supervisor drives it."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("submit")
@click.argument("spec_file", metavar="JOB.yaml")
@click.option("--hold", is_flag=True, help="Accept the job but do not start it until released.")
@output_option
def command(spec_file: str, hold: bool, output: str) -> None:
    """Submit a job and return at once; a background supervisor drives it."""
    not_built("submit", 3, output)

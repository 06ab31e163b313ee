"""`dispatch run`: submit a job and follow it to the end: live per-rank view, then state, cause and evidence."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("run")
@click.argument("spec_file", metavar="JOB.yaml")
@output_option
def command(spec_file: str, output: str) -> None:
    """Submit a job and follow it to the end: live per-rank view, then state, cause and evidence."""
    not_built("run", 3, output)

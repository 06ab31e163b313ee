"""`dispatch plan JOB.yaml`: what a job would become on its cluster, creating nothing."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("plan")
@click.argument("spec_file", metavar="JOB.yaml")
@output_option
def command(spec_file: str, output: str) -> None:
    """Show what a job would become on its cluster, and every refusal, creating nothing."""
    not_built("plan", 6, output)

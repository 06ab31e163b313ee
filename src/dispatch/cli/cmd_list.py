"""`dispatch list`: list jobs, newest first."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("list")
@click.option("--all", "show_all", is_flag=True, help="Include ended jobs.")
@output_option
def command(show_all: bool, output: str) -> None:
    """List jobs, newest first."""
    not_built("list", 3, output)

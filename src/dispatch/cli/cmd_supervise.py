"""`dispatch supervise`: run the supervisor: drive every open job until it ends, crash-safely."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("supervise")
@click.option("--once", is_flag=True, help="Make one pass over the open jobs, then exit.")
@output_option
def command(once: bool, output: str) -> None:
    """Run the supervisor: drive every open job until it ends, crash-safely."""
    not_built("supervise", 4, output)

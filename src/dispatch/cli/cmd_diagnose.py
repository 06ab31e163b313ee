"""`dispatch diagnose`: derive the typed cause of a TrainJob from a dump of its objects."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("diagnose")
@click.argument("dump_file", metavar="FILE")
@output_option
def command(dump_file: str, output: str) -> None:
    """Derive the typed cause of a TrainJob from a dump of its objects."""
    not_built("diagnose", 7, output)

"""`dispatch check-runtime FILE`: check a Kubeflow Trainer runtime against dispatch's rules."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("check-runtime")
@click.argument("runtime_file", metavar="FILE")
@click.option("--cluster", help="The configured cluster whose settings apply.")
@output_option
def command(runtime_file: str, cluster: str | None, output: str) -> None:
    """Check a Kubeflow Trainer runtime file against dispatch's runtime rules."""
    not_built("check-runtime", 6, output)

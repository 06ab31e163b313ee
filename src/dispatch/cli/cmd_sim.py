"""`dispatch sim`: run the deterministic simulator over seeded interleavings and faults."""

from __future__ import annotations

import click

from dispatch.cli.common import not_built, output_option


@click.command("sim")
@click.option("--seeds", type=int, default=100, show_default=True)
@click.option("--steps", type=int, default=300, show_default=True)
@output_option
def command(seeds: int, steps: int, output: str) -> None:
    """Run the deterministic simulator over seeded interleavings and faults."""
    not_built("sim", 4, output)

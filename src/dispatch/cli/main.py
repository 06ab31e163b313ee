"""The ``dispatch`` command: a thin layer of one module per verb over the library."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from dispatch import __version__
from dispatch.cli.common import Settings

#: verb modules in the order ``--help`` lists them
VERBS = (
    "run",
    "submit",
    "status",
    "list",
    "logs",
    "cancel",
    "release",
    "plan",
    "validate",
    "check_runtime",
    "diagnose",
    "supervise",
    "sim",
    "version",
)


class OrderedGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=OrderedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="dispatch")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="DISPATCH_CONFIG",
    help="Clusters configuration file (default: $DISPATCH_CONFIG, else the user config dir).",
)
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None) -> None:
    """Submit and supervise multi-node training jobs on the scheduler you already have.

    Every job ends with a state and a typed cause (preempted, node_lost, out_of_memory,
    timeout, no_capacity, start_failure, app_error, cancelled, unplanned_recovery, unknown)
    and the evidence that proves it.
    """
    ctx.obj = Settings(config_path=config_path)


for _verb in VERBS:
    cli.add_command(importlib.import_module(f"dispatch.cli.cmd_{_verb}").command)


def main() -> None:
    cli(prog_name="dispatch")

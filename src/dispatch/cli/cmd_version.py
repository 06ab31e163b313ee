"""`dispatch version`: the installed version, and which optional adapters can be loaded."""

from __future__ import annotations

import importlib.util
import platform

import click

from dispatch import __version__
from dispatch.cli.common import emit_json, output_option

_OPTIONAL = {"kubeflow": "kubernetes_asyncio", "torch": "torch"}


@click.command("version")
@output_option
def command(output: str) -> None:
    """Show dispatch's version and which optional extras are installed."""
    extras = {
        name: importlib.util.find_spec(module) is not None for name, module in _OPTIONAL.items()
    }
    if output == "json":
        emit_json({"version": __version__, "python": platform.python_version(), "extras": extras})
        return
    click.echo(f"dispatch {__version__} (Python {platform.python_version()})")
    for name, present in extras.items():
        click.echo(f"  {name}: {'installed' if present else 'not installed'}")

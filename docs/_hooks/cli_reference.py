"""mkdocs hook: replace ``<!-- cli-reference -->`` with the help of every ``dispatch`` verb
(and of every sub-command of a verb that has them, such as ``dispatch admission serve``).

The command line reference is generated from the click commands at build time, so it cannot
drift from the code. ``render()`` is also used by the documentation tests.
"""

from __future__ import annotations

from typing import Any

import click

MARKER = "<!-- cli-reference -->"


def _help(command: click.Command, path: str, parent: click.Context | None) -> str:
    context = click.Context(command, info_name=path, parent=parent, terminal_width=100)
    return command.get_help(context)


def render() -> str:
    """The reference as Markdown: the group's help, then one section per verb in help order."""
    from dispatch.cli.main import cli

    root = click.Context(cli, info_name="dispatch", terminal_width=100)
    parts = ["## dispatch", "", "```text", _help(cli, "dispatch", None), "```", ""]
    for name in cli.list_commands(root):
        command = cli.get_command(root, name)
        if command is None:
            continue
        parts += [f"## dispatch {name}", "", "```text", _help(command, name, root), "```", ""]
        if isinstance(command, click.Group):  # its sub-commands, each under its own heading
            group = click.Context(command, info_name=name, parent=root, terminal_width=100)
            for sub in command.list_commands(group):
                child = command.get_command(group, sub)
                if child is not None:
                    text = _help(child, sub, group)
                    parts += [f"### dispatch {name} {sub}", "", "```text", text, "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return markdown.replace(MARKER, render()) if MARKER in markdown else markdown

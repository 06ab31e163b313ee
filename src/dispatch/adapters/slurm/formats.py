"""The JSON formats of ``squeue --json``: the ones dispatch reads, the ones an installation
offers, and the choice between them. Pure; no I/O (design note 0012).

A format is a data_parser version (``v0.0.42``). Slurm 22.05 prints v0.0.38 and its ``--json``
takes no argument; from 23.02 on ``--json=<version>`` chooses among the versions a build
offers, and ``--json=list`` lists them. dispatch asks for the newest offered format it reads,
and refuses an installation that offers none (it would misread states and exit codes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from dispatch.model import Reason

#: The formats dispatch reads, each tested on a real recording (``tests/slurm/recorded``),
#: with the Slurm releases that offer it. v0.0.39 (23.02 only) and anything newer than
#: v0.0.42 are not read: their shape has not been seen here.
JSON_FORMATS: Mapping[str, str] = MappingProxyType(
    {
        # job_state one word, exit codes raw wait statuses, times integers
        "v0.0.38": "Slurm 22.05",
        # job_state a list of base state and flags, exit codes objects {status, return_code,
        # signal}, numbers {set, infinite, number}
        "v0.0.40": "Slurm 23.11 to 25.05",
        # the v0.0.40 shape for every field dispatch reads
        "v0.0.41": "Slurm 24.05 to 25.11",
        # the v0.0.40 shape for every field dispatch reads
        "v0.0.42": "Slurm 24.11 to 26.05",
    }
)

#: ``squeue --json`` exists from this release on
JSON_SINCE = (21, 8, 0)
#: from this release on ``--json=<version>`` chooses the format and ``--json=list`` lists
#: the ones offered; before, ``--json`` takes no argument and prints the release's own format
JSON_CHOICE_SINCE = (23, 2, 0)
#: the format each release before ``JSON_CHOICE_SINCE`` prints (meta.plugin.type openapi/…)
RELEASE_JSON: Mapping[tuple[int, int], str] = MappingProxyType(
    {
        (21, 8): "v0.0.37",
        (22, 5): "v0.0.38",
    }
)


def format_name(plugin: str) -> str:
    """The data_parser version in a plugin name: ``data_parser/v0.0.42`` and
    ``openapi/v0.0.38`` -> ``v0.0.42``, ``v0.0.38``; ``""`` when there is none."""
    match = re.search(r"v\d+\.\d+\.\d+", plugin)
    return match.group(0) if match else ""


def format_key(name: str) -> tuple[int, ...]:
    """``v0.0.42`` -> (0, 0, 42), to order formats."""
    return tuple(int(part) for part in name.lstrip("v").split("."))


def parse_formats_output(text: str) -> tuple[str, ...]:
    """``squeue --json=list``: one plugin a line (``data_parser/v0.0.42``) -> the versions,
    oldest first (``v0.0.40``, ``v0.0.41``, ``v0.0.42``). The heading goes to stderr."""
    found = {format_name(line) for line in text.splitlines() if "data_parser/" in line}
    return tuple(sorted(found - {""}, key=format_key))


def offered_formats(version: tuple[int, int, int], listed: tuple[str, ...]) -> tuple[str, ...]:
    """The formats a release can print, oldest first: none before 21.08, its own until 23.02,
    then what ``squeue --json=list`` ``listed``."""
    if version < JSON_SINCE:
        return ()
    if version < JSON_CHOICE_SINCE:
        own = RELEASE_JSON.get(version[:2])
        return (own,) if own else ()
    return listed


def chosen_format(offered: tuple[str, ...]) -> str | None:
    """The newest offered format that dispatch reads; None when there is none."""
    readable = [name for name in offered if name in JSON_FORMATS]
    return max(readable, key=format_key) if readable else None


def known_formats() -> str:
    """``v0.0.38 (Slurm 22.05), v0.0.40 (Slurm 23.11 to 25.05), …`` for messages."""
    return ", ".join(f"{name} ({releases})" for name, releases in JSON_FORMATS.items())


def unknown_format_message(found: str) -> str:
    """An output in a format dispatch does not read, naming the ones it does."""
    return f"Slurm printed JSON format data_parser {found}; dispatch reads {known_formats()}"


def format_refusal(
    version: tuple[int, int, int], version_text: str, offered: tuple[str, ...]
) -> Reason | None:
    """Why dispatch refuses this installation's JSON output; None when it reads one of the
    offered formats, or when there is no ``squeue --json`` (``scontrol show job`` is read)."""
    if version < JSON_SINCE or chosen_format(offered) is not None:
        return None
    return Reason(
        "slurm-json-format",
        f"Slurm {version_text} offers the squeue --json formats (data_parser) "
        f"{', '.join(offered) or 'none'}; dispatch reads only {known_formats()}, the formats "
        "it was tested on",
    )

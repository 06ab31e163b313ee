"""Code blocks of the Markdown documentation, and how each kind is checked.

The convention (docs/contributing-docs.md says it for writers):

* ```` ```python ```` blocks run (exec) in order, sharing one namespace per page, in a folder
  holding a copy of ``examples/``; ```` ```pycon ```` blocks are doctests (output checked,
  ``...`` matches anything) in the same namespace.
* ```` ```console ```` blocks: each ``$ command`` runs in bash in the same folder; the lines
  after it are expected output (stdout and stderr), matched in order as whole lines (``...``
  inside a line matches anything; a line of only ``...`` skips any number of lines). The exit
  code must be 0, or the number in a trailing ``# exit N`` / ``# exits N`` comment. A variable
  set by a command of the form ``name=...`` is kept for the later commands of the page.
* ```` ```yaml ```` blocks must load; a job spec (or a fragment whose keys are all job spec
  fields) must validate, and a configuration (``clusters:``) must parse.
* ```` ```json ```` blocks must load; ```` ```text ```` and ```` ```mermaid ```` are not run.
* An HTML comment right before a block directs the test: ``<!-- test: skip REASON -->``
  (a reason is required); ``<!-- test: needs MODULE -->`` (skipped when the Python module,
  e.g. torch, is not installed); ``<!-- test: wait-for-jobs -->`` (before running the block,
  wait until no job is open, as the prose tells the reader to).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

LANGUAGES = frozenset({"python", "pycon", "console", "yaml", "json", "text", "mermaid"})
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,})(?P<info>[^`]*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*test:\s*(?P<verb>[-a-z]+)\s*(?P<arg>.*?)\s*-->\s*$")
_EXIT = re.compile(r"#\s*exits?\s+(\d+)\b")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
DIRECTIVES = ("skip", "needs", "wait-for-jobs")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    directives: tuple[tuple[str, str], ...] = ()

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def directive(self, verb: str) -> str | None:
        return next((arg for v, arg in self.directives if v == verb), None)


@dataclass(frozen=True)
class Command:
    command: str
    expected: tuple[str, ...] = ()
    exit_code: int = 0

    @property
    def assigns(self) -> str | None:
        """The shell variable this command sets (``job=$(...)``), to keep for later commands."""
        match = _ASSIGNMENT.match(self.command)
        return match[1] if match else None


@dataclass
class _Open:
    start: int
    fence: str
    indent: str
    language: str
    directives: tuple[tuple[str, str], ...]
    lines: list[str] = field(default_factory=list)


def blocks(page: Path) -> list[Block]:
    """Every fenced code block of ``page``, with the test directives written right before it."""
    found: list[Block] = []
    pending: list[tuple[str, str]] = []
    current: _Open | None = None
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if current is not None:
            match = _FENCE.match(line)
            if match and match["fence"] == current.fence and not match["info"].strip():
                text = textwrap.dedent("\n".join(current.lines))
                found.append(
                    Block(page, current.start, current.language, text + "\n", current.directives)
                )
                current = None
            else:
                current.lines.append(line)
            continue
        directive = _DIRECTIVE.match(line)
        if directive:
            pending.append((directive["verb"], directive["arg"]))
            continue
        match = _FENCE.match(line)
        if match:
            info = match["info"].strip().split()
            language = info[0] if info else ""
            current = _Open(number, match["fence"], match["indent"], language, tuple(pending))
            pending = []
        elif line.strip():
            pending = []
    if current is not None:
        raise ValueError(f"{page}:{current.start}: the code block is never closed")
    return found


def commands(block: Block) -> list[Command]:
    """The ``$ command`` lines of a console block, each with the output lines shown after it."""
    parsed: list[Command] = []
    lines = block.text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            raise ValueError(f"{block.where}: console output before any `$ command`: {line!r}")
        command = line[2:]
        while command.endswith("\\") and index + 1 < len(lines):
            index += 1  # a continued line: bash joins it (the backslash-newline stays)
            command = command + "\n" + lines[index]
        index += 1
        expected: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            expected.append(lines[index].rstrip())
            index += 1
        code = _EXIT.search(command.splitlines()[-1])
        parsed.append(
            Command(command, tuple(e for e in expected if e), int(code[1]) if code else 0)
        )
    return parsed


def _pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in expected.split("...")))


def missing_output(expected: tuple[str, ...], actual: str) -> str | None:
    """None when every expected line matches a line of ``actual``, in order; else the first
    expected line that did not."""
    lines = [line.rstrip() for line in actual.splitlines()]
    position = 0
    for wanted in expected:
        if wanted.strip() == "...":
            continue
        pattern = _pattern(wanted)
        while position < len(lines) and not pattern.fullmatch(lines[position]):
            position += 1
        if position == len(lines):
            return wanted
        position += 1
    return None

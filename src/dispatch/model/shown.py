"""Values echoed in error messages: short, bounded work, never an exception.

Input nobody vetted can hold a megabyte string, a list of a million items or an integer of
tens of thousands of digits (YAML reads ``0x`` followed by any number of digits; Python
refuses to print integers past 4,300 digits). A message that quotes such a value shows its
beginning and its kind, never all of it.
"""

from __future__ import annotations

import reprlib
from typing import Any

#: characters of a value a message quotes
LIMIT = 60


class _Short(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple, self.maxset = 2, 4, 4, 4, 4
        self.maxstring = self.maxother = self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # printing it is slow, and refused past 4,300 digits
            digits = int(x.bit_length() * 0.30103) + 1
            return f"<an integer of about {digits:,} digits>"
        return super().repr_int(x, level)


_SHORT = _Short()


def show(value: Any, limit: int = LIMIT) -> str:
    """``repr(value)`` for a message: at most about ``limit`` characters, never raises."""
    try:
        shown = _SHORT.repr(value)
    except (RecursionError, ValueError, TypeError, OverflowError):
        return f"<a {type(value).__name__}>"
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def clip(text: str, limit: int = 300) -> str:
    """A message from elsewhere (a parser's, an OS error) cut to ``limit`` characters a line
    and 20 lines, so a megabyte-long line of input is not echoed whole."""
    lines = text.splitlines() or [""]
    kept = [line if len(line) <= limit else line[:limit] + "... (cut)" for line in lines[:20]]
    if len(lines) > 20:
        kept.append(f"... ({len(lines) - 20:,} more lines)")
    return "\n".join(kept)


def listed(problems: list[str], limit: int = 10) -> str:
    """The first ``limit`` problems joined by "; ", and how many more there are."""
    shown = "; ".join(problems[:limit])
    return shown + (f"; and {len(problems) - limit:,} more" if len(problems) > limit else "")

"""Columns, printers and ages: the vocabulary of server-side printing.

``human_duration`` is ``k8s.io/apimachinery/pkg/util/duration.HumanDuration``; ``since`` is the
printers' ``translateTimestampSince``, computed against the server's ``now`` (for the emulator,
the emulated clock).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dispatch.testing.k8s.meta import parse_rfc3339

JsonObj = dict[str, Any]

NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
CREATED_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


@dataclass(frozen=True)
class Column:
    """A ``TableColumnDefinition``; ``path`` is the JSONPath of a CRD's printer column."""

    name: str
    type: str = "string"
    description: str = ""
    priority: int = 0
    format: str = ""
    path: str = ""

    def to_json(self) -> JsonObj:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


NAME = Column("Name", format="name", description=NAME_DOC)
AGE = Column("Age", description=CREATED_DOC)

# ---------------------------------------------------------------------------- durations


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``: 2-3 significant figures."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def since(timestamp: str | None, now: float) -> str:
    """``translateTimestampSince``: ``<unknown>`` for a missing time."""
    if not timestamp:
        return "<unknown>"
    try:
        return human_duration(now - parse_rfc3339(timestamp))
    except ValueError:
        return "<invalid>"


Cells = Callable[[JsonObj, float], list[Any]]


@dataclass(frozen=True)
class Printer:
    """How one resource prints: its columns, each row's cells (from the object and the
    server's ``now``), and row conditions (a finished pod's ``Completed``)."""

    columns: tuple[Column, ...]
    cells: Cells
    conditions: Callable[[JsonObj], list[JsonObj]] | None = None

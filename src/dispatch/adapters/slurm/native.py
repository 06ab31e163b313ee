"""What dispatch reads about a Slurm job, whatever tool reported it: one normalised record.

Every parser (``sacct``, ``squeue --json`` of each data_parser version, ``scontrol show job``,
the ``jobcomp/filetxt`` file) produces ``SlurmJob`` values, so that the state table and the
cause derivation (``states``) are written once. Pure values; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: Slurm records an out-of-memory kill as the pseudo-signal 125 (``SIG_OOM`` = 253 as a raw
#: wait status, shown as ``0:125``).
SIG_OOM = 125


#: Slurm's base job states; every other state name is a flag (COMPLETING, REQUEUED …).
BASE_STATE_NAMES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)


class Source(StrEnum):
    """Which Slurm tool a record came from; reported in the evidence."""

    SACCT = "sacct"  # the accounting database (slurmdbd): complete, with steps
    SQUEUE = "squeue"  # squeue --json: the controller's memory, finished jobs kept MinJobAge
    SCONTROL = "scontrol"  # scontrol show job: same lifetime as squeue, no JSON before 23.x
    JOBCOMP = "jobcomp"  # the jobcomp/filetxt completion file: one line per finished job


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """An exit code and a signal, as Slurm shows them in ``code:signal``."""

    code: int = 0
    signal: int = 0

    @property
    def ok(self) -> bool:
        return self.code == 0 and self.signal == 0

    @property
    def out_of_memory(self) -> bool:
        return self.signal == SIG_OOM

    def __str__(self) -> str:
        return f"{self.code}:{self.signal}"

    @classmethod
    def from_text(cls, text: str | None) -> ExitStatus | None:
        """``"3:0"`` -> code 3, signal 0. None for empty or unparsable text."""
        match = re.fullmatch(r"\s*(\d+):(\d+)\s*", text or "")
        return cls(int(match.group(1)), int(match.group(2))) if match else None

    @classmethod
    def from_wait_status(cls, status: int) -> ExitStatus:
        """A raw wait status as ``squeue --json`` v0.0.38 prints it (768 -> 3:0, 253 -> 0:125)."""
        signal = status & 0x7F
        if signal:
            return cls(0, signal)
        return cls((status >> 8) & 0xFF, 0)


@dataclass(frozen=True, slots=True)
class SlurmStep:
    """One job step (``.batch``, ``.0`` …), known only from accounting."""

    step_id: str
    state: str
    exit: ExitStatus | None = None
    nodes: str = ""


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One Slurm job as a tool reported it.

    ``states`` holds the base state first and then any state flags (``COMPLETING``,
    ``REQUEUED`` …); tools that print one word give a one-element tuple.
    """

    job_id: str
    name: str
    states: tuple[str, ...]
    source: Source
    reason: str = ""
    exit: ExitStatus | None = None
    derived_exit: ExitStatus | None = None
    nodes: str = ""
    batch_host: str = ""
    comment: str = ""
    cancelled_by: str = ""
    submit_time: str = ""
    start_time: str = ""
    end_time: str = ""
    steps: tuple[SlurmStep, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """The base state (``COMPLETED``, ``PENDING`` …)."""
        return self.states[0] if self.states else "UNKNOWN"

    @property
    def flags(self) -> tuple[str, ...]:
        return self.states[1:]


def expand_hostlist(text: str) -> list[str]:
    """Node names in a Slurm hostlist: ``"n[1-3,5],gpu07"`` -> n1, n2, n3, n5, gpu07.

    Zero padding is kept (``gpu[01-02]`` -> gpu01, gpu02). Empty or ``(null)`` -> [].
    """
    text = text.strip()
    if not text or text in ("(null)", "None"):
        return []
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", text):
        names.extend(_expand_one(part))
    return names


def _expand_one(pattern: str) -> list[str]:
    match = re.search(r"\[([^\]]*)\]", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end() :]
    expanded: list[str] = []
    for item in match.group(1).split(","):
        low, _, high = item.partition("-")
        if high:
            width = len(low)
            expanded.extend(f"{head}{n:0{width}d}" for n in range(int(low), int(high) + 1))
        else:
            expanded.append(f"{head}{low}")
    return [name for prefix in expanded for name in _expand_one(prefix + tail)]

"""What srun and slurmstepd print into a batch job's output, read as evidence.

Without accounting, Slurm keeps no per-task record; srun itself reports each failed task in
the batch script's output (``srun: error: n2: task 1: Exited with exit code 3``) and every
node that failed under its step (``srun: error: Node failure on n2``), and slurmstepd reports
out-of-memory kills. This module parses those lines. Pure; no I/O.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

_TASK_LINE = re.compile(
    r"^srun: error: (?P<node>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\]]+): (?P<what>.+?)\s*$"
)
_EXITED = re.compile(r"^Exited with exit code (\d+)$")
_OOM_LINES = (
    re.compile(r"oom-kill event", re.IGNORECASE),
    re.compile(r": Out Of Memory$"),
)
_LAUNCH_FAILED = re.compile(r"^srun: error: .*(launch failed|Unable to create step)")
#: srun's line when a node of the allocation fails under a step (node set DOWN, slurmd lost)
_NODE_FAILURE = re.compile(r"^srun: error: Node failure on (?P<node>\S+)$")

#: "Terminated" -> 15, "Killed" -> 9 …, as srun names the signal that ended a task.
SIGNAL_NAMES = {
    name: number.value
    for number in signal.Signals
    if (name := signal.strsignal(number)) is not None
}
#: Commands that could not start: 126 = found but not executable, 127 = not found (the shell).
START_FAILURE_CODES = frozenset({126, 127})


@dataclass(frozen=True, slots=True)
class TaskFailure:
    """One failed task as srun reported it."""

    node: str
    task: int
    line: str
    exit_code: int | None = None
    signal: int | None = None
    out_of_memory: bool = False

    @property
    def collateral(self) -> bool:
        """Killed by SIGTERM/SIGKILL because another task failed first (--kill-on-bad-exit)."""
        return self.signal in (signal.SIGTERM.value, signal.SIGKILL.value)


@dataclass(frozen=True, slots=True)
class NodeFailure:
    """A node srun reported failed under its step (``srun: error: Node failure on n2``)."""

    node: str
    line: str


@dataclass(frozen=True, slots=True)
class BatchOutput:
    """The failure lines found in a batch job's output, in the order printed."""

    failures: tuple[TaskFailure, ...] = ()
    out_of_memory: bool = False
    launch_failed: bool = False
    node_failures: tuple[NodeFailure, ...] = ()

    def first_failure(self) -> TaskFailure | None:
        """The task that failed first on its own: the first one not killed as collateral."""
        own = [f for f in self.failures if not f.collateral]
        candidates = own or list(self.failures)
        return candidates[0] if candidates else None

    @property
    def could_not_start(self) -> bool:
        first = self.first_failure()
        return self.launch_failed or (first is not None and first.exit_code in START_FAILURE_CODES)


def parse_batch_output(text: str) -> BatchOutput:
    """The failures srun and slurmstepd printed in ``text`` (a batch job's output)."""
    failures: list[TaskFailure] = []
    node_failures: list[NodeFailure] = []
    out_of_memory = False
    launch_failed = False
    for raw in text.splitlines():
        line = raw.strip()
        if any(p.search(line) for p in _OOM_LINES):
            out_of_memory = True
        if _LAUNCH_FAILED.match(line):
            launch_failed = True
        lost = _NODE_FAILURE.match(line)
        if lost:
            node_failures.append(NodeFailure(lost.group("node"), line))
        match = _TASK_LINE.match(line)
        if not match:
            continue
        what = match.group("what")
        exited = _EXITED.match(what)
        for task in _task_numbers(match.group("tasks")):
            failures.append(
                TaskFailure(
                    node=match.group("node"),
                    task=task,
                    line=line,
                    exit_code=int(exited.group(1)) if exited else None,
                    signal=None if exited else SIGNAL_NAMES.get(what),
                    out_of_memory=what == "Out Of Memory",
                )
            )
    return BatchOutput(tuple(failures), out_of_memory, launch_failed, tuple(node_failures))


def _task_numbers(text: str) -> list[int]:
    """``"1"`` -> [1]; ``"0-1"`` -> [0, 1]; ``"[0-1,3]"`` -> [0, 1, 3]."""
    numbers: list[int] = []
    for item in text.strip("[]").split(","):
        low, _, high = item.partition("-")
        if not low.isdigit():
            continue
        numbers.extend(range(int(low), int(high) + 1) if high.isdigit() else [int(low)])
    return numbers

"""What a job does on the memory scheduler, attempt by attempt: a small scripted scenario.

Grammar: attempts separated by ``;``; the last entry applies to every later attempt. Each entry
is ``result[@seconds] [key=value ...]``::

    succeeded@60                 runs 60 s, every rank exits 0
    app_error@10 exit=3 rank=1   rank 1 exits 3 after 10 s
    out_of_memory@5 rank=0       rank 0 is killed for memory after 5 s
    timeout                      runs until the spec's timeLimit (or @seconds) and is killed
    preempted@30                 the scheduler takes the resources back after 30 s
    preempted@30 rerun=10        ... and puts the work back 10 s later inside the same
                                 attempt (Slurm requeue / Kueue readmission): unplanned recovery
    node_lost@20 node=1          node 1 disappears after 20 s
    start_failure                a rank cannot start (bad image or command)
    no_capacity@300              never placed; gives up after 300 s of waiting
    hang                         runs until cancelled (or the timeLimit)

Options valid on every entry: ``queue=S`` (queued S seconds before it starts: a slow start).
Example: ``"preempted@30; succeeded@60"``: attempt 1 is preempted, attempt 2 and later succeed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from dispatch.model import InvalidSpec, SpecProblem

#: the job spec's env variable a scenario is read from
SCENARIO_ENV = "MEMORY_SCENARIO"
DEFAULT_SCENARIO = "succeeded@10"


class Result(StrEnum):
    SUCCEEDED = "succeeded"
    APP_ERROR = "app_error"
    OUT_OF_MEMORY = "out_of_memory"
    TIMEOUT = "timeout"
    PREEMPTED = "preempted"
    NODE_LOST = "node_lost"
    START_FAILURE = "start_failure"
    NO_CAPACITY = "no_capacity"
    HANG = "hang"


_ALIASES = {"succeed": Result.SUCCEEDED, "oom": Result.OUT_OF_MEMORY, "preempt": Result.PREEMPTED}
_OPTIONS = {"queue", "exit", "rank", "node", "rerun"}


@dataclass(frozen=True, slots=True)
class Script:
    """One attempt's scripted behaviour. ``after`` is seconds of running (or of waiting for
    ``no_capacity``); ``queue`` is seconds queued before the ranks start."""

    result: Result
    after: float = 10.0
    queue: float = 0.0
    exit_code: int = 1
    rank: int = 0
    node: int = 0
    rerun: float | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    scripts: tuple[Script, ...]

    def for_attempt(self, attempt: int) -> Script:
        return self.scripts[min(attempt, len(self.scripts)) - 1]


def _problem(text: str, message: str) -> InvalidSpec:
    return InvalidSpec(
        [SpecProblem(field=f"env.{SCENARIO_ENV}", message=f"{text!r}: {message}")],
        source="memory scenario",
    )


def _parse_entry(text: str) -> Script:
    words = text.split()
    head, *options = words
    name, _, at = head.partition("@")
    try:
        result = _ALIASES.get(name) or Result(name)
    except ValueError:
        known = ", ".join(r.value for r in Result)
        raise _problem(text, f"unknown result {name!r}; known: {known}") from None
    pairs = [option.partition("=") for option in options]
    unknown = [key for key, _, value in pairs if key not in _OPTIONS or not value]
    if unknown:
        raise _problem(text, f"unknown option(s) {unknown}; known: {sorted(_OPTIONS)}")
    try:
        after = float(at) if at else 10.0
        values = {key: float(value) for key, _, value in pairs}
    except ValueError:
        raise _problem(text, "times and numbers must be numbers") from None
    return Script(
        result=result,
        after=after,
        queue=values.get("queue", 0.0),
        exit_code=int(values.get("exit", 1)),
        rank=int(values.get("rank", 0)),
        node=int(values.get("node", 0)),
        rerun=values.get("rerun"),
    )


def parse_scenario(text: str) -> Scenario:
    """Parse a scenario; raises ``InvalidSpec`` naming the bad entry."""
    entries = [e.strip() for e in text.split(";") if e.strip()]
    if not entries:
        raise _problem(text, "a scenario needs at least one entry, e.g. succeeded@10")
    return Scenario(tuple(_parse_entry(e) for e in entries))

"""Coroutines stepped by hand: no event loop, no real time, one resumption per step.

A supervisor's work runs as a plain coroutine. Every adapter call (and the pause between two
passes) is an await point that *parks* the coroutine: it yields a ``Call`` to the driver and
waits until the simulation resumes it. Between two await points the coroutine runs without
interruption (the records store is synchronous), so the only interleavings are the ones the
simulation chooses, seeded, which makes every run replayable.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

#: the call a supervisor parks at between two passes
PAUSE = "pause"


@dataclass(slots=True)
class Call:
    """An adapter call (or a pause) a supervisor is parked at, and how it will go.

    The simulation fills ``fault`` (a ``Fault`` value) and ``distort`` (``stale`` or
    ``duplicate``, observations only) before resuming the call.
    """

    op: str
    owner: str
    job_id: str = ""
    attempt: int = 0
    fault: str | None = None
    distort: str | None = None
    until: float = 0.0  # a pause: the virtual time it ends

    def ready(self, now: float) -> bool:
        """True unless it is a pause that has not ended yet."""
        return self.op != PAUSE or self.until <= now

    def describe(self) -> str:
        if self.op == PAUSE:
            return "pause over"
        extra = "".join(f" [{x}]" for x in (self.fault, self.distort) if x)
        return f"{self.op} {self.job_id} a{self.attempt}{extra}"


class _Park:
    __slots__ = ("call",)

    def __init__(self, call: Call) -> None:
        self.call = call

    def __await__(self) -> Generator[Call, None, None]:
        yield self.call


def park(call: Call) -> _Park:
    """``await park(call)``: hand ``call`` to the driver and wait to be resumed."""
    return _Park(call)


class Actor:
    """One supervisor process: a coroutine, the call it is parked at, and whether it lives.

    ``resume`` runs the coroutine up to its next park (the first ``resume`` creates it from
    ``work``). Exceptions from the coroutine (a simulated crash, or a bug) propagate to the
    caller; the actor is dead afterwards.
    """

    def __init__(self, name: str, work: Callable[[], Coroutine[Call, None, Any]]) -> None:
        self.name = name
        self._work = work
        self._coroutine: Coroutine[Call, None, Any] | None = None
        self.parked: Call | None = None
        self.alive = True

    def resume(self) -> Call | None:
        if self._coroutine is None:
            self._coroutine = self._work()
        try:
            self.parked = self._coroutine.send(None)
        except StopIteration:
            self.alive, self.parked = False, None
        except BaseException:
            self.alive, self.parked = False, None
            raise
        return self.parked

    def kill(self) -> None:
        """The process dies where it is parked (nothing after the await point runs)."""
        if self.alive and self._coroutine is not None:
            self._coroutine.close()
        self.alive, self.parked = False, None

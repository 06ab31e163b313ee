"""The adapter as the simulator hands it to a supervisor: every call is an await point, and
faults are applied at the call boundary.

``GatedAdapter`` wraps one ``MemoryAdapter`` (one per supervisor process; several share one
``MemoryScheduler``). Each call first parks (``driver.park``); ``on_call`` sees it at that
moment (the simulation checks the intent invariant there). When the simulation resumes it,
the fault it chose happens: ``unavailable`` / ``unknown-before`` / ``crash`` before the call
takes effect, ``unknown-after`` / ``crash-after`` after. An observation may also be
``stale`` (an older observation of that attempt, delivered late) or a ``duplicate`` (the
previous delivery again). Faults are decided by the simulation, never by this class, except
which older observation a stale delivery is (from the simulation's seeded ``rng``).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Sequence

from dispatch.adapters.memory import Fault, MemoryAdapter, SimulatedCrash
from dispatch.config import ClusterConfig
from dispatch.model import (
    AttemptHandle,
    CapabilityReport,
    Job,
    JobSpec,
    Observation,
    OutcomeUnknown,
    Plan,
    SchedulerUnavailable,
)
from dispatch.sim.driver import Call, park

STALE, DUPLICATE = "stale", "duplicate"


def _before(call: Call) -> None:
    if call.fault == Fault.UNAVAILABLE:
        raise SchedulerUnavailable(f"simulated: scheduler unavailable ({call.op})")
    if call.fault == Fault.UNKNOWN_BEFORE:
        raise OutcomeUnknown(f"simulated: {call.op} got no answer (no effect)")
    if call.fault == Fault.CRASH:
        raise SimulatedCrash(f"simulated crash before {call.op}")


def _after(call: Call) -> None:
    if call.fault == Fault.UNKNOWN_AFTER:
        raise OutcomeUnknown(f"simulated: {call.op} answer lost (it took effect)")
    if call.fault == Fault.CRASH_AFTER:
        raise SimulatedCrash(f"simulated crash after {call.op}")


class GatedAdapter:
    """A ``MemoryAdapter`` whose start, observe and cancel park and may fail as told."""

    kind = "memory"

    def __init__(
        self,
        inner: MemoryAdapter,
        owner: str,
        rng: random.Random,
        on_call: Callable[[Call], None],
    ) -> None:
        self.inner = inner
        self.cluster: ClusterConfig = inner.cluster
        self.owner = owner
        self._rng = rng
        self._on_call = on_call
        self._delivered: dict[tuple[str, int], list[Observation]] = {}

    async def _gate(self, op: str, job_id: str, attempt: int) -> Call:
        call = Call(op, self.owner, job_id, attempt)
        self._on_call(call)
        await park(call)
        _before(call)
        return call

    async def capabilities(self, spec: JobSpec | None = None) -> CapabilityReport:
        return await self.inner.capabilities(spec)

    async def plan(self, job: Job, attempt: int) -> Plan:
        return await self.inner.plan(job, attempt)

    async def start(self, job: Job, attempt: int) -> AttemptHandle:
        call = await self._gate("start", job.id, attempt)
        handle = await self.inner.start(job, attempt)
        _after(call)
        return handle

    async def observe(self, handle: AttemptHandle) -> Observation:
        call = await self._gate("observe", handle.job_id, handle.attempt)
        fresh = await self.inner.observe(handle)
        _after(call)
        delivered = self._delivered.setdefault((handle.native, handle.attempt), [])
        delivered.append(fresh)
        if call.distort == DUPLICATE and len(delivered) > 1:
            return delivered[-2]
        if call.distort == STALE and len(delivered) > 1:
            return delivered[self._rng.randrange(len(delivered) - 1)]
        return fresh

    def watch(self, handles: Sequence[AttemptHandle]) -> AsyncIterator[Observation]:
        return self.inner.watch(handles)

    async def cancel(self, handle: AttemptHandle, actor: str, reason: str) -> None:
        call = await self._gate("cancel", handle.job_id, handle.attempt)
        await self.inner.cancel(handle, actor, reason)
        _after(call)

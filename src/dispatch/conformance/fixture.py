"""How an adapter under test is described to the conformance suite.

An ``AdapterFixture`` says how to make the adapter (a fresh instance each time, as another
process would make it, bound to the same cluster and world), which job specs to run (one that
succeeds quickly, one that fails with ``app_error``, one that runs long enough to be
cancelled, optionally one the cluster must refuse), and how time passes (virtual for the
memory scheduler, real sleeping for local processes). ``footprint`` optionally returns a
comparable value describing everything that exists on the scheduler, so that checks can
prove that planning and refusals create nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field

from dispatch.adapters.base import Adapter
from dispatch.model import AttemptHandle, Job, JobSpec, Observation


class ConformanceFailure(AssertionError):
    """The adapter broke the contract in the way the message says."""


class Skip(Exception):
    """The check does not apply to this adapter; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def require(condition: bool, message: str) -> None:
    """Fail the check with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConformanceFailure(message)


@dataclass
class AdapterFixture:
    """An adapter under test, as the conformance checks need it described.

    ``advance(seconds)`` lets that much time pass for the scheduler; ``patience`` is how long
    (in those seconds) an attempt may take to reach an expected state, polled every
    ``poll`` seconds; ``real_timeout`` bounds, in real seconds, a wait that the adapter drives
    itself (a ``watch`` stream). ``job_prefix`` starts every job id the suite makes (ids must be valid
    for the adapter, e.g. folder names).
    """

    name: str
    make_adapter: Callable[[], Adapter]
    succeeds: JobSpec
    fails: JobSpec
    runs_long: JobSpec
    advance: Callable[[float], Awaitable[None]]
    patience: float = 60.0
    poll: float = 0.5
    real_timeout: float = 120.0
    refused: JobSpec | None = None
    footprint: Callable[[], Hashable] | None = None
    job_prefix: str = "conf"
    _ids: itertools.count[int] = field(default_factory=itertools.count, repr=False)

    def job(self, spec: JobSpec, label: str) -> Job:
        """A job with a fresh id for one check."""
        return Job(id=f"{self.job_prefix}-{label}-{next(self._ids)}", spec=spec, created_at=0.0)

    async def wait_for(
        self,
        adapter: Adapter,
        handle: AttemptHandle,
        done: Callable[[Observation], bool],
        what: str,
    ) -> Observation:
        """Observe until ``done`` holds; fail after ``patience`` seconds of the fixture's time."""
        waited = 0.0
        while True:
            observation = await adapter.observe(handle)
            if done(observation):
                return observation
            require(
                waited < self.patience,
                f"{handle.native}: not {what} after {self.patience:g} s; last seen "
                f"{observation.state.value} ({observation.outcome.summary})",
            )
            await self.advance(self.poll)
            waited += self.poll

    async def wait_end(self, adapter: Adapter, handle: AttemptHandle) -> Observation:
        return await self.wait_for(adapter, handle, lambda o: o.outcome.is_terminal, "ended")

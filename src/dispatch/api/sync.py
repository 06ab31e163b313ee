"""``Client``: the synchronous facade over ``AsyncClient`` for scripts and notebooks.

Each method runs the async implementation on one private event loop; there is no second copy
of the logic. Do not call it from inside a running event loop (use ``AsyncClient`` there).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dispatch.api.client import AsyncClient, SpecLike
from dispatch.api.environment import Environment
from dispatch.api.status import JobStatus
from dispatch.model import CapabilityReport, JobSpec, Plan


class Client:
    """Submit, follow, inspect and cancel jobs from synchronous code."""

    def __init__(self, env: Environment | None = None, *, background: bool = True) -> None:
        self._runner = asyncio.Runner()
        self._async = AsyncClient(env, background=background)

    @property
    def env(self) -> Environment:
        return self._async.env

    def close(self) -> None:
        self._async.close()
        self._runner.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def capabilities(self, spec: JobSpec) -> CapabilityReport:
        return self._runner.run(self._async.capabilities(spec))

    def plan(self, spec: SpecLike, *, spec_file: str | Path | None = None) -> Plan:
        return self._runner.run(self._async.plan(spec, spec_file=spec_file))

    def submit(
        self, spec: SpecLike, *, spec_file: str | Path | None = None, hold: bool = False
    ) -> JobStatus:
        return self._runner.run(self._async.submit(spec, spec_file=spec_file, hold=hold))

    def run(
        self,
        spec: SpecLike,
        *,
        spec_file: str | Path | None = None,
        raise_on_failure: bool = False,
    ) -> JobStatus:
        return self._runner.run(
            self._async.run(spec, spec_file=spec_file, raise_on_failure=raise_on_failure)
        )

    def get(self, job: str) -> JobStatus:
        return self._runner.run(self._async.get(job))

    def list(self, *, include_ended: bool = True, limit: int | None = None) -> list[JobStatus]:
        return self._runner.run(self._async.list(include_ended=include_ended, limit=limit))

    def wait(
        self, job: str, *, timeout: float | None = None, raise_on_failure: bool = False
    ) -> JobStatus:
        return self._runner.run(
            self._async.wait(job, timeout=timeout, raise_on_failure=raise_on_failure)
        )

    def cancel(self, job: str, *, actor: str | None = None, reason: str = "cancelled") -> JobStatus:
        return self._runner.run(self._async.cancel(job, actor=actor, reason=reason))

    def release(self, job: str) -> JobStatus:
        return self._runner.run(self._async.release(job))

    def logs(self, job: str, *, rank: int | None = None, follow: bool = False) -> Iterator[str]:
        lines = self._async.logs(job, rank=rank, follow=follow)
        try:
            while True:
                try:
                    yield self._runner.run(_next(lines))
                except StopAsyncIteration:
                    return
        finally:
            self._runner.run(lines.aclose())


async def _next(iterator: Any) -> str:
    return str(await iterator.__anext__())

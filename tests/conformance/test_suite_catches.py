"""The suite has teeth: adapters that break one promise each fail the matching check."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from dispatch.adapters.memory import MemoryAdapter
from dispatch.conformance import CHECKS, Verdict, run_all, run_check
from dispatch.model import AttemptHandle, Job, Observation
from tests.conformance.test_memory import memory_fixture

BY_NAME = {check.name: check for check in CHECKS}


class RestartsOnStart(MemoryAdapter):
    """Not idempotent: every start creates a new execution under a new name."""

    def name_for(self, job: Job, attempt: int) -> str:
        self.scheduler.calls["names"] += 1
        return f"{job.id}-a{attempt}-{self.scheduler.calls['names']}"


class IgnoresCancel(MemoryAdapter):
    """Accepts a cancel and does nothing."""

    async def cancel(self, handle: AttemptHandle, actor: str, reason: str) -> None:
        return None


class ForgetsTheCause(MemoryAdapter):
    """Reports failures without their cause's details (no firstFailure)."""

    async def observe(self, handle: AttemptHandle) -> Observation:
        seen = await super().observe(handle)
        return replace(seen, outcome=replace(seen.outcome, first_failure=None))


@pytest.mark.parametrize(
    ("kind", "check"),
    [
        (RestartsOnStart, "start_is_idempotent"),
        (IgnoresCancel, "cancel"),
        (ForgetsTheCause, "failure_has_cause"),
    ],
)
def test_a_broken_promise_fails_its_check(kind: type[MemoryAdapter], check: str) -> None:
    result = asyncio.run(run_check(BY_NAME[check], memory_fixture("slurm", kind)))
    assert result.verdict is Verdict.FAILED, result


def test_run_all_reports_every_check_with_a_verdict() -> None:
    results = asyncio.run(run_all(lambda: memory_fixture("kubernetes")))
    assert [r.check for r in results] == [c.name for c in CHECKS]
    verdicts = {r.check: r.verdict for r in results}
    absent = {"identity_weakener", "held_starter", "evidence_seeder"}  # memory has none of these
    assert all(verdicts[k] is Verdict.SKIPPED for k in absent)
    assert all(v is Verdict.PASSED for k, v in verdicts.items() if k not in absent)

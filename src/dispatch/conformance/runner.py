"""Running the checks without any test framework: one check, or all of them, on one fixture."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from dispatch.conformance.checks import CHECKS, Check
from dispatch.conformance.fixture import AdapterFixture, ConformanceFailure, Skip


class Verdict(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    verdict: Verdict
    reason: str = ""


async def run_check(check: Check, fixture: AdapterFixture) -> CheckResult:
    """Run one check; a broken promise is ``failed`` with the reason, never an exception."""
    try:
        await check.run(fixture)
    except Skip as skip:
        return CheckResult(check.name, Verdict.SKIPPED, skip.reason)
    except (ConformanceFailure, AssertionError) as failure:
        return CheckResult(check.name, Verdict.FAILED, str(failure))
    return CheckResult(check.name, Verdict.PASSED)


async def run_all(
    make_fixture: Callable[[], AdapterFixture], checks: Sequence[Check] = CHECKS
) -> list[CheckResult]:
    """Every check, each on a fresh fixture."""
    return [await run_check(check, make_fixture()) for check in checks]

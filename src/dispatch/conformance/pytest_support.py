"""Running the suite under pytest: parametrize a test over the checks, run one per test.

    from dispatch.conformance import checks_parameters, run_under_pytest

    @pytest.mark.parametrize("check", checks_parameters())
    def test_conformance(check, my_fixture):
        run_under_pytest(check, my_fixture)

A check that does not apply is reported as skipped with its reason. pytest is imported only
when these are called (it is a test dependency, not a runtime one).
"""

from __future__ import annotations

import asyncio
from typing import Any

from dispatch.conformance.checks import CHECKS, Check
from dispatch.conformance.fixture import AdapterFixture, Skip


def checks_parameters() -> list[Any]:
    """``pytest.param`` per check, with the check's name as its id."""
    import pytest

    return [pytest.param(check, id=check.name) for check in CHECKS]


def run_under_pytest(check: Check, fixture: AdapterFixture) -> None:
    """Run one check in a fresh event loop; ``Skip`` becomes ``pytest.skip(reason)``."""
    import pytest

    try:
        asyncio.run(check.run(fixture))
    except Skip as skip:
        pytest.skip(skip.reason)

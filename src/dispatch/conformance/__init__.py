"""The conformance suite every adapter must pass.

An adapter under test is described by an ``AdapterFixture`` (how to make it, which specs to
run, how time passes). ``CHECKS`` are plain async functions of a fixture; ``run_check`` and
``run_all`` run them without a test framework; ``checks_parameters`` and ``run_under_pytest``
run them as parametrized pytest tests. This package imports no concrete adapter: the test
suites of the adapters choose what to run it against.
"""

from dispatch.conformance.checks import CHECKS, Check
from dispatch.conformance.fixture import AdapterFixture, ConformanceFailure, Skip, require
from dispatch.conformance.pytest_support import checks_parameters, run_under_pytest
from dispatch.conformance.runner import CheckResult, Verdict, run_all, run_check

__all__ = [
    "CHECKS",
    "AdapterFixture",
    "Check",
    "CheckResult",
    "ConformanceFailure",
    "Skip",
    "Verdict",
    "checks_parameters",
    "require",
    "run_all",
    "run_check",
    "run_under_pytest",
]

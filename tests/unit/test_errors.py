from __future__ import annotations

import pytest

from dispatch.model import (
    ConfigError,
    DispatchError,
    Forbidden,
    InvalidSpec,
    LeaseLost,
    NotFound,
    OutcomeUnknown,
    PermanentError,
    Reason,
    SchedulerUnavailable,
    SpecProblem,
    TransientError,
    Unsupported,
)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (OutcomeUnknown("start timed out"), True),
        (SchedulerUnavailable("503"), True),
        (LeaseLost("taken"), True),
        (InvalidSpec([SpecProblem("nodes", "must be at least 1")]), False),
        (Unsupported([Reason("not-found", "no runtime")]), False),
        (NotFound("job x"), False),
        (Forbidden("no create"), False),
        (ConfigError("bad"), False),
    ],
)
def test_every_error_is_a_dispatch_error_sorted_by_what_to_do(
    error: DispatchError, transient: bool
) -> None:
    assert isinstance(error, DispatchError)
    assert error.transient is transient
    assert isinstance(error, TransientError if transient else PermanentError)


def test_errors_inherit_the_matching_builtins() -> None:
    assert isinstance(InvalidSpec([]), ValueError)
    assert isinstance(NotFound("x"), LookupError)
    assert isinstance(Forbidden("x"), PermissionError)
    assert isinstance(SchedulerUnavailable("x"), ConnectionError)


def test_unsupported_carries_every_reason() -> None:
    reasons = [Reason("restart-policy", "states OnFailure"), Reason("backoff-limit", "is 6")]
    error = Unsupported(reasons, cluster="prod")
    assert error.rules == ("restart-policy", "backoff-limit")
    text = str(error)
    assert "prod" in text and "[restart-policy]" in text and "[backoff-limit]" in text


def test_unsupported_without_a_reason_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least one reason"):
        Unsupported([])


def test_transient_errors_may_say_when_to_retry() -> None:
    assert SchedulerUnavailable("429", delay=2.5).delay == 2.5
    assert OutcomeUnknown("lost").delay is None


def test_invalid_spec_lists_each_problem_with_its_fix() -> None:
    error = InvalidSpec(
        [SpecProblem("nodes", "must be at least 1", "set nodes: 1"), SpecProblem("name", "bad")],
        source="job.yaml",
    )
    text = str(error)
    assert text.startswith("job.yaml: 2 problems")
    assert "nodes: must be at least 1 (fix: set nodes: 1)" in text

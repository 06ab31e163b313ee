"""``bench.scale``'s CPU per job while it submits: the supervisor's CPU samples read between the
first TrainJob created and the last; and the most attempts open at once, with the RSS then."""

from __future__ import annotations

import pytest
from bench.scale import cpu_at, cpu_per_job, open_at_most

SERIES = [(100.0, 1.0), (101.0, 1.5), (102.0, 3.5)]


def test_cpu_is_read_between_the_samples_around_a_moment() -> None:
    assert cpu_at(SERIES, 100.0) == 1.0
    assert cpu_at(SERIES, 100.5) == pytest.approx(1.25)
    assert cpu_at(SERIES, 101.5) == pytest.approx(2.5)
    assert cpu_at(SERIES, 102.0) == 3.5
    assert cpu_at(SERIES, 99.9) is None and cpu_at(SERIES, 102.1) is None and cpu_at([], 1) is None


def test_cpu_per_job_is_the_cpu_of_the_submission_window_over_the_jobs() -> None:
    assert cpu_per_job(SERIES, 100.5, 101.5, 10) == pytest.approx(125.0)  # 1.25 s over 10 jobs
    assert cpu_per_job(SERIES, 90.0, 101.5, 10) is None  # the window starts before the samples
    assert cpu_per_job(SERIES, 100.5, 101.5, 0) is None


def test_the_most_attempts_open_at_once_are_those_created_and_not_yet_reported() -> None:
    rss = [(100.0, 150.0), (101.0, 180.5), (102.0, 181.0), (103.5, 190.0)]
    created = {"a": 99.0, "b": 100.5, "c": 101.0, "d": 101.5}
    reported = {"a": 101.8, "b": 103.0, "d": 103.2}  # "c" never reported: open to the end
    # at 101.0: a, b and c; at 102.0: b, c and d (the later of two equal counts); at 103.5: c
    assert open_at_most(rss, created, reported) == {
        "attempts": 3, "rssMiB": 181.0, "firstRssMiB": 150.0
    }  # fmt: skip
    assert open_at_most([], created, reported) is None

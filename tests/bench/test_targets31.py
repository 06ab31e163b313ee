"""Issue 31's targets are judged from the scale and submission rows: met, not met, or not
judged; results.md names whose targets it judges."""

from __future__ import annotations

from typing import Any

from bench.report import render
from bench.targets import judge_issue31


def _row(tool: str, jobs: int, following: float, **more: Any) -> dict[str, Any]:
    return {
        "tool": tool,
        "jobs": jobs,
        "lifetime": 60,
        "meanLifetimeSeconds": 60,
        "followingPerJobMinute": following,
        "peakOpenWatches": 8,
        **more,
    }


INTACT = {"lost": 0, "duplicated": 0, "wrongState": 0}
ROWS = [
    _row("dispatch", 1000, 0.15, requestsPerJob=3.9, detectP99=0.4, **INTACT),
    _row("sdk", 1000, 18.0, requestsPerJob=17.7),
    _row("dispatch", 10_000, 0.1, detectP99=1.2, peakRssMiB=390.0, **INTACT),
    {
        "tool": "sdk",
        "jobs": 10_000,
        "error": "killed after 1800 s",
        "stopped": {
            "killedAfterGoSeconds": 1700.0,
            "trainJobsEnded": 10_000,
            "waitersReturned": 4000,
            "waitersWaiting": 6000,
            "lastReturnSeconds": 610.0,
            "lastProgressSeconds": 1690.0,
            "requestsLastMinute": 60,
            "lastMinuteSeconds": 60.0,
            "requestsPerSecondLastMinute": 1.0,
            "requestsServed": 99,
            "returned": [(10.0, 0), (610.0, 4000)],
        },
    },
]
SUBMISSION = [
    {"jobs": 1000, "submissionSeconds": 8.0, "throttled": 120, "trainJobs": 1000, **INTACT}
]


def _by_target(rows: list[dict[str, Any]], submission: list[dict[str, Any]]) -> dict[str, Any]:
    return {j.target.split(":")[0]: j for j in judge_issue31(rows, submission)}


def test_each_target_is_judged_from_its_rows() -> None:
    found = _by_target(ROWS, SUBMISSION)
    following = found["following requests per job-minute at N = 1,000"]
    assert following.met is True and "120.0x" in following.measured
    assert found["requests per job at N = 1,000"].met is True
    detection = found["detection p99 at N = 10,000 (one supervisor) under 1 s"]
    assert detection.met is False and "1.20 s" in detection.measured
    assert found["peak RSS at N = 10,000 under 400 MiB"].met is True
    assert found["0 lost, duplicated or wrong at N = 10,000"].met is True
    submission = found["submission"]
    assert submission.met is True and "120 429s sent" in submission.measured
    sdk = found["the SDK's row at N = 10,000, or the point at which it stops answering"]
    assert sdk.met is True and "4,000 of 10,000 waiters had returned" in sdk.measured


def test_a_submission_without_429_is_not_judged_and_one_too_slow_is_not_met() -> None:
    quiet = [{**SUBMISSION[0], "throttled": 0}]
    assert _by_target(ROWS, quiet)["submission"].met is None
    slow = [{**SUBMISSION[0], "submissionSeconds": 12.5}]
    assert _by_target(ROWS, slow)["submission"].met is False
    duplicated = [{**SUBMISSION[0], "duplicated": 1}]
    assert _by_target(ROWS, duplicated)["submission"].met is False


def test_a_submission_names_the_cpu_each_process_took_per_job_when_measured() -> None:
    assert "CPU per job" not in _by_target(ROWS, SUBMISSION)["submission"].measured
    shares = {"submissionCpuMsPerJob": 20.37, "emulatorSubmissionCpuMsPerJob": 19.0}
    measured = _by_target(ROWS, [{**SUBMISSION[0], **shares}])["submission"].measured
    assert measured.endswith("CPU per job while submitting: supervisor 20.4 ms, emulator 19.0 ms")


def test_targets_without_their_rows_are_not_judged() -> None:
    rows = [_row("dispatch", 10, 5.0, detectP99=0.3, requestsPerJob=9.0)]
    assert {j.met for j in judge_issue31(rows, [])} == {None}


def test_the_report_names_issue_31_when_the_run_has_its_rows() -> None:
    table = ("requestsPerJobMinute", "requestsPerJob", "watchesStarted", "detectP50")
    table += ("detectP99", "cpuSeconds", "peakRssMiB", "wallSeconds", "ended", "reported")
    table += ("passes", "submissionSeconds")
    rows = [r if "error" in r else {**dict.fromkeys(table, 1.0), **r} for r in ROWS]
    submission = [{**SUBMISSION[0], "requests": 3500, "requestsPerJob": 3.5, "wallSeconds": 70.0}]
    found = {"seconds": 1, "loadAverage": "0", "lifetime": 60, "timeScale": 10.0}
    found |= {"rows": rows, "submission": submission}
    keys = ("date", "cpu", "cores", "memoryGiB", "os", "python", "loadAverageAtStart")
    machine = dict.fromkeys(keys, "-")
    md = render({"command": "python bench/run.py", "machine": machine, "scale": found})
    assert "Issue 31's targets" in md and "Issue 10's targets" not in md
    assert "stopped answering: killed 1700 s after go" in md
    assert "1 requests/s served in the last 60 s" in md
    assert "| 1,000 | — | 8.00 | 120 | 3,500 |" in md


def test_targets_are_judged_on_the_newest_runs_rows_alone() -> None:
    """Rows merged from an older run (an older version of the code) beside the newest run's
    are shown but not judged: a target is met or missed by one run."""
    from bench.report import _newest_run

    old = {"rerun": {"date": "2026-12-01 05:16 UTC"}}
    new = {"rerun": {"date": "2026-12-02 10:34 UTC"}}
    rows = [
        {"tool": "dispatch", "jobs": 100},  # the first run's, never merged again
        {"tool": "sdk", "jobs": 5000, **old},
        {"tool": "dispatch", "jobs": 1000, **new},
        {"tool": "sdk", "jobs": 1000, **new},
    ]
    assert [(r["tool"], r["jobs"]) for r in _newest_run(rows)] == [
        ("dispatch", 1000),
        ("sdk", 1000),
    ]
    one_run = [{"tool": "dispatch", "jobs": 100}, {"tool": "sdk", "jobs": 100}]
    assert _newest_run(one_run) == one_run

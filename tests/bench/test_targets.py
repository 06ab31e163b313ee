"""Issue 10's targets are judged from the scale rows: met, not met, or not judged."""

from __future__ import annotations

from typing import Any

from bench.report import render
from bench.targets import judge


def _row(tool: str, jobs: int, lifetime: float, following: float, **more: Any) -> dict[str, Any]:
    return {
        "tool": tool,
        "jobs": jobs,
        "lifetime": lifetime,
        "meanLifetimeSeconds": lifetime,
        "followingPerJobMinute": following,
        "peakOpenWatches": 7,
        **more,
    }


ROWS = [
    _row("dispatch", 100, 60, 3.0, detectP99=0.5),
    _row("sdk", 100, 60, 100.0),
    _row("dispatch", 1000, 60, 0.9, detectP99=0.95, detectP99AfterSubmission=1.1),
    _row("sdk", 1000, 60, 16.0),
    _row("dispatch", 5000, 60, 0.4, peakRssMiB=290.0, peakOpenWatches=8),
    _row("dispatch", 1000, 300, 0.2, detectP99=0.9, longer=True),
    _row("sdk", 1000, 300, 16.0, longer=True),
]


def test_each_lifetime_is_judged_on_its_own_pair() -> None:
    requests = [j for j in judge(ROWS) if j.target.startswith("following requests")]
    assert [(j.met, j.measured.split(": ", 1)[1]) for j in requests] == [
        (False, "SDK 16.00, dispatch 0.90 -> 17.8x"),
        (True, "SDK 16.00, dispatch 0.20 -> 80.0x"),
    ]


def test_memory_is_judged_in_megabytes_and_watches_by_their_growth() -> None:
    by_target = {j.target.split(" at ")[0]: j for j in judge(ROWS)}
    memory = by_target["peak memory"]
    assert (memory.met, memory.measured) == (False, "290.0 MiB = 304 MB")  # 290 MiB > 300 MB
    watches = by_target["open watch streams independent of N"]
    assert watches.met is False and "N = 5,000: 8" in watches.measured
    detection = by_target["detection p99"]
    assert detection.met is True and "1.10 s over those that ended after" in detection.measured


def test_targets_without_their_rows_are_not_judged_and_failed_runs_do_not_count() -> None:
    rows = [_row("dispatch", 10, 6, 5.0, detectP99=0.3), {"tool": "sdk", "jobs": 10, "error": "x"}]
    assert {j.met for j in judge(rows)} == {None}


def test_the_report_states_every_target() -> None:
    found = {"seconds": 1, "loadAverage": "0", "lifetime": 60, "timeScale": 10.0, "rows": []}
    table = ("requestsPerJobMinute", "requestsPerJob", "watchesStarted", "detectP50")
    table += ("detectP99", "cpuSeconds", "peakRssMiB", "wallSeconds", "ended", "reported")
    found["rows"] = [{**dict.fromkeys(table, 1.0), **r} for r in ROWS]
    keys = ("date", "cpu", "cores", "memoryGiB", "os", "python", "loadAverageAtStart")
    machine = dict.fromkeys(keys, "-")
    md = render({"command": "python bench/run.py", "machine": machine, "scale": found})
    assert md.count("**not met**") == 3 and md.count(": met (") == 2

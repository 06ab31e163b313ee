"""`dispatch ui` with thousands of jobs: the jobs page's load time in a real browser, and how
long a job's end takes to show on an open page.

    python -m bench.ui                 # 5,000 jobs
    python -m bench.ui --jobs 500      # a quick run

N jobs of a realistic mix (tests/ui/seed.py: attempts, handles, evidence, decisions; 40 %
succeeded, app errors with a retry, preemptions retried, OOM, node lost, timeouts, cancels,
and the newest 10 % partly running, queued, held or pending) are written through the records
contract into a fresh SQLite store. The real `dispatch ui --port 0` is started on it (its start
time includes reading every job into its index), and Debian's headless Chromium (Playwright)
loads the jobs page: the navigation's time to DOMContentLoaded and to load (the page's own
Navigation Timing), median and worst of several loads, for the default page (the newest 200
matching jobs) and for all N rows (``?limit=N``). Liveness: with the page open, running jobs
are ended one at a time by another process's records (as a supervisor writes them), and the
seconds from the write's commit to the new state on the page are measured (the UI's feed
ticks every 0.5 s).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.ui.seed import SetClock, seed_job, seed_mix

from dispatch.model import Cause, Outcome, State
from dispatch.records import LogKind, Records, open_records

#: the issue's target: the jobs page of 5,000 jobs loads in under a second
TARGET_SECONDS = 1.0


def _end(records: Records, job_id: str) -> None:
    records.record_outcome(job_id, 1, Outcome(State.FAILED, Cause.PREEMPTED, "preempted"))
    records.append_log(job_id, "attempt", {"attempt": 1, "state": "failed", "cause": "preempted"})
    records.append_log(job_id, LogKind.DECISION, {"action": "finish", "attempt": 1, "reason": "x"})
    records.set_job_status(job_id, State.FAILED, Cause.PREEMPTED, "preempted; unmatched: fail")


def _timing(page: Any) -> tuple[float, float]:
    raw = page.evaluate(
        "() => { const n = performance.getEntriesByType('navigation')[0];"
        " return [n.domContentLoadedEventEnd, n.loadEventEnd]; }"
    )
    return float(raw[0]), float(raw[1])


def _loads(page: Any, url: str, repeat: int) -> dict[str, Any]:
    ready, loaded = [], []
    for _ in range(repeat):
        page.goto(url, wait_until="load")
        dom, load = _timing(page)
        ready.append(dom)
        loaded.append(load)
    rows = page.locator("tbody tr").count()
    return {
        "rows": rows,
        "domContentLoadedMsP50": round(statistics.median(ready)),
        "loadMsP50": round(statistics.median(loaded)),
        "loadMsMax": round(max(loaded)),
    }


def run(jobs: int, *, repeat: int = 5, ends: int = 10) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        return {"skipped": "chromium is not installed (scripts/install-chromium.sh as root)"}
    with tempfile.TemporaryDirectory(prefix="dispatch-bench-ui-") as tmp:
        state = Path(tmp) / "state"
        config = Path(tmp) / "config.yaml"
        config.write_text("clusters: []\n")
        env = {**os.environ, "DISPATCH_STATE_DIR": str(state), "DISPATCH_CONFIG": str(config)}
        env.pop("DISPATCH_RECORDS", None)
        clock = SetClock(time.time())
        records = open_records(state / "records.sqlite3", clock=clock)
        began = time.monotonic()
        seed_mix(records, clock, jobs, days=7.0)
        seeded = time.monotonic() - began
        clock.at = time.time()
        live = [seed_job(records, clock, "running", name=f"live{i}") for i in range(ends)]
        began = time.monotonic()
        server = subprocess.Popen(
            [sys.executable, "-m", "dispatch", "ui", "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            first = server.stdout.readline()
            started = time.monotonic() - began
            if not first.startswith("dispatch ui: "):
                raise RuntimeError(f"dispatch ui did not start: {first}{server.stdout.read()}")
            url = first.split()[2]
            with sync_playwright() as playwright:
                args = ["--no-sandbox"] if os.geteuid() == 0 else []
                browser = playwright.chromium.launch(executable_path=chromium, args=args)
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(url + "jobs")  # warm: the browser's own start is not the page's
                default = _loads(page, url + "jobs", repeat)
                everything = _loads(page, url + f"jobs?limit={jobs + ends}", repeat)
                page.goto(url + "jobs")
                delays = []
                for job_id in live:
                    cell = page.locator(f"tr[data-job='{job_id}'] .state")
                    cell.wait_for()
                    written = time.monotonic()
                    _end(records, job_id)
                    page.wait_for_function(
                        "id => document.querySelector(`tr[data-job='${id}'] .state`)"
                        ".textContent.trim() === 'failed'",
                        arg=job_id,
                        timeout=30_000,
                    )
                    delays.append(time.monotonic() - written)
                browser.close()
        finally:
            server.terminate()
            server.wait(15)
            records.close()
    return {
        "jobs": jobs + ends,
        "seedSeconds": round(seeded, 1),
        "startSeconds": round(started, 2),
        "defaultPage": default,
        "allRows": everything,
        "liveness": {
            "ends": len(delays),
            "p50Seconds": round(statistics.median(delays), 2),
            "maxSeconds": round(max(delays), 2),
            "feedIntervalSeconds": 0.5,
        },
        "targetSeconds": TARGET_SECONDS,
        "met": default["loadMsMax"] / 1000 < TARGET_SECONDS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    args = parser.parse_args()
    print(json.dumps(run(args.jobs), indent=1))


if __name__ == "__main__":
    main()

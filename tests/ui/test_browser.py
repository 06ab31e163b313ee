"""The UI in a real browser (Debian's headless Chromium through Playwright): the jobs table
follows the store live, a failed job's page shows its first failure and evidence, logs
follow a running job, actions need the token; and the three pages' screenshots for the docs
(written to docs/how-to/images/ only with DISPATCH_UPDATE_SCREENSHOTS=1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatch.api import Environment
from dispatch.model import Cause, Outcome, State
from dispatch.records import LogKind, Records, open_records
from tests.ui.conftest import UiThread, screenshot_path
from tests.ui.seed import SetClock, seed_job, seed_mix

expect = pytest.importorskip("playwright.sync_api").expect


def end_job(records: Records, job_id: str, cause: Cause, summary: str) -> None:
    """What a supervisor writes when an attempt ends and the job is finished."""
    records.record_outcome(job_id, 1, Outcome(State.FAILED, cause, summary))
    records.append_log(
        job_id,
        "attempt",
        {"attempt": 1, "state": "failed", "cause": cause.value, "summary": summary},
    )
    records.append_log(
        job_id, LogKind.DECISION, {"action": "finish", "attempt": 1, "reason": summary}
    )
    records.set_job_status(job_id, State.FAILED, cause, summary)


def test_the_jobs_table_follows_the_store(
    ui: UiThread, jobs: dict[str, str], writer: Records, clock: SetClock, page: Any, tmp_path: Path
) -> None:
    page.goto(ui.url + "jobs")
    row = page.locator(f"tr[data-job='{jobs['running']}']")
    expect(row.locator(".state")).to_have_text("running")
    expect(page.locator("#live")).to_have_text("● live")
    began = time.monotonic()
    end_job(writer, jobs["running"], Cause.NODE_LOST, "node gpu-7 stopped answering")
    expect(row.locator(".state")).to_have_text("failed", timeout=5000)
    expect(row.locator(".cause")).to_have_text("node_lost")
    expect(row.locator(".summary")).to_have_text("node gpu-7 stopped answering")
    assert time.monotonic() - began < 5
    expect(page.locator("[data-state='failed']")).to_have_text("3")
    # a new job with a history entry appears at the top without a reload
    clock.at = time.time()
    new = seed_job(writer, clock, "running", name="fresh-run", user="bob")
    expect(page.locator("tbody tr").first).to_have_attribute("data-job", new, timeout=5000)
    # filters: only failed jobs; the live rows respect them
    page.goto(ui.url + "jobs?state=failed")
    expect(page.locator("tbody tr")).to_have_count(3)
    end_job(writer, new, Cause.OUT_OF_MEMORY, "rank 0 OOMKilled")
    expect(page.locator("tbody tr")).to_have_count(4, timeout=5000)
    page.select_option("select[name=cause]", "app_error")
    page.click("form#filters button")
    expect(page.locator("tbody tr")).to_have_count(1)


def test_a_failed_jobs_page_shows_its_first_failure_and_evidence(
    ui: UiThread, jobs: dict[str, str], page: Any, tmp_path: Path
) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(ui.url + f"jobs/{jobs['app_error']}")
    failure = page.locator("#first-failure")
    expect(failure).to_contain_text("rank 1")
    expect(failure).to_contain_text("exit code 3")
    expect(page.locator("#job-cause")).to_have_text("app_error")
    lanes = page.locator(".lane")
    expect(lanes).to_have_count(2)
    flagged = page.locator(".lane[data-attempt='2'] li.first-failure-evidence")
    expect(flagged.first).to_contain_text("rank 1 (node 0) exited with code 3")
    expect(page.locator(".lane[data-attempt='2'] .track .mark.first").first).to_be_visible()
    expect(page.locator("#history")).to_contain_text("decision: wait")
    between = page.locator("ol.recovery[data-after='1']")
    expect(between).to_contain_text("wait")
    expect(between).to_contain_text("retry 1 of 1")
    expect(page.locator("#history")).to_contain_text("retry limit 1 exhausted")
    # evidence data is shown as text: the markup in a rank's last words is not run
    page.locator(".lane[data-attempt='2'] li.first-failure-evidence details").last.click()
    expect(page.locator(".lane[data-attempt='2']")).to_contain_text("<script>alert(1)</script>")
    # the plan that was run, secret values masked
    page.locator(".lane[data-attempt='2'] details.plan summary").click()
    plan = page.locator(".lane[data-attempt='2'] .plan-body")
    expect(plan).to_contain_text("WANDB_API_KEY")
    expect(plan).to_contain_text("masked")
    assert "plain-text-key-in-env" not in page.content()
    assert dialogs == []


def test_the_overview_shows_ends_time_lost_and_what_runs(
    ui: UiThread, jobs: dict[str, str], page: Any, tmp_path: Path
) -> None:
    page.goto(ui.url + "overview")
    expect(page.locator("#now tr[data-cluster='local']")).to_contain_text("local")
    for chart in ("#ends-chart", "#lost-chart"):
        loaded = page.locator(chart).evaluate("img => img.complete && img.naturalWidth > 0")
        assert loaded, chart
    expect(page.locator("#totals")).to_contain_text("out_of_memory")
    expect(page.locator("#lost")).to_contain_text("preempted")


def test_an_action_without_the_token_is_refused_and_with_it_is_recorded(
    ui_actions: UiThread, jobs: dict[str, str], writer: Records, page: Any
) -> None:
    job = jobs["running"]
    page.goto(ui_actions.url + f"jobs/{job}")
    page.click("button[data-action='cancel']")
    expect(page.locator("#action-result")).to_have_text(
        "refused: the action token is missing or wrong"
    )
    assert writer.get_job(job).cancel is None
    # the address printed at start carries the token in its fragment (never sent to the server)
    page.goto(ui_actions.url + f"jobs/{job}#token={ui_actions.token}")
    expect(page).to_have_url(ui_actions.url + f"jobs/{job}")  # taken out of the address
    page.click("button[data-action='cancel']")
    expect(page.locator("#action-result")).to_contain_text("cancel requested by tester")
    cancel = writer.get_job(job).cancel
    assert cancel is not None and cancel.actor == "tester"
    # the page follows: the cancel request is in its history without a reload
    expect(page.locator("#history")).to_contain_text("cancel requested", timeout=5000)


LOGGING_JOB = """
import sys, time
for i in range(1, 13):
    print(f"step {i} of 12", flush=True)
    time.sleep(0.5)
"""


def test_logs_follow_a_running_job(env: Environment, page: Any, tmp_path: Path) -> None:
    """A real job on the local scheduler, driven by a background supervisor: its output
    appears on the page while it runs, and the page sees it end."""
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"name": "chatty", "nodes": 1, "procsPerNode": 1,
                                    "command": [sys.executable, "-c", LOGGING_JOB]}))  # fmt: skip
    ui = UiThread(env, interval=0.2, background=False)
    try:
        submitted = subprocess.run(
            [sys.executable, "-m", "dispatch", "submit", str(spec), "-o", "json"],
            capture_output=True, text=True, check=True, env=dict(os.environ), timeout=60,
        )  # fmt: skip
        job = json.loads(submitted.stdout)["job"]
        page.goto(ui.url + f"jobs/{job}")
        logs = page.locator("#logs")
        expect(logs).to_contain_text("step 1 of 12", timeout=15_000)
        early = logs.inner_text()
        expect(logs).to_contain_text("step 12 of 12", timeout=15_000)
        assert "step 12 of 12" not in early  # it was followed, not read once at the end
        expect(page.locator("#logs-state")).to_contain_text("ended", timeout=15_000)
        expect(page.locator("#job-state")).to_have_text("succeeded", timeout=15_000)
    finally:
        ui.stop()


def test_the_jobs_table_follows_a_team_store_on_postgresql(
    postgres: Any, monkeypatch: pytest.MonkeyPatch, page: Any
) -> None:
    """The same live table over a team's PostgreSQL records (``$DISPATCH_RECORDS``), written
    by another client, as a supervisor on another host would."""
    monkeypatch.setenv("DISPATCH_RECORDS", postgres.create_database())
    env = Environment.load()
    clock = SetClock(time.time() - 600)
    writer = open_records(env.records_location, clock=clock)
    try:
        running = seed_job(writer, clock, "running", name="team-run", cluster="local", user="chen")
        ui = UiThread(env, interval=0.2, background=False)
        try:
            page.goto(ui.url + "jobs")
            row = page.locator(f"tr[data-job='{running}']")
            expect(row.locator(".state")).to_have_text("running")
            end_job(writer, running, Cause.PREEMPTED, "preempted by a higher priority workload")
            expect(row.locator(".cause")).to_have_text("preempted", timeout=5000)
            page.goto(ui.url + f"jobs/{running}")
            expect(page.locator("#job-state")).to_have_text("failed")
        finally:
            ui.stop()
    finally:
        writer.close()


def test_screenshots_of_the_three_pages(
    env: Environment, writer: Records, clock: SetClock, page: Any, tmp_path: Path
) -> None:
    """The pages over a few days of a team's jobs, for docs/how-to/web-ui.md (written there
    with DISPATCH_UPDATE_SCREENSHOTS=1)."""
    clock.at = time.time()
    seeded = seed_mix(writer, clock, 90, days=2.0, seed=11)
    clock.at = time.time() - 1800
    failed = seed_job(writer, clock, "app_error", name="llama-finetune", cluster="local",
                      user="dana", secret=True)  # fmt: skip
    ui = UiThread(env, interval=0.2, background=False)
    try:
        page.goto(ui.url + "jobs")
        expect(page.locator("tbody tr")).to_have_count(len(seeded.ids) + 1)
        page.screenshot(path=str(screenshot_path("ui-jobs.png", tmp_path)))
        page.goto(ui.url + f"jobs/{failed}")
        expect(page.locator("#first-failure")).to_contain_text("exit code 3")
        page.locator(".lane[data-attempt='2'] li.first-failure-evidence details").last.click()
        page.locator(".lane[data-attempt='2'] details.plan summary").click()
        expect(page.locator(".lane[data-attempt='2'] .plan-body")).to_contain_text("masked")
        # closed again for the picture: a local plan names this machine's paths
        page.locator(".lane[data-attempt='2'] details.plan summary").click()
        expect(page.locator("#logs-state")).to_contain_text("no output to show")
        page.screenshot(path=str(screenshot_path("ui-job.png", tmp_path)), full_page=True)
        page.goto(ui.url + "overview")
        expect(page.locator("#now")).to_contain_text("prod")
        page.wait_for_function("() => document.getElementById('lost-chart').complete")
        page.screenshot(path=str(screenshot_path("ui-overview.png", tmp_path)), full_page=True)
    finally:
        ui.stop()

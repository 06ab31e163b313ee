"""The UI server over HTTP: pages, bounds, assets, actions refused and carried out, the
change feed's cost, and `dispatch ui` itself (its missing extra, its start and stop)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from dispatch.model import Cause, State
from dispatch.records import Records
from tests.ui.conftest import UiThread


def fetch(url: str, *, method: str = "GET", headers: dict[str, str] | None = None,
          data: bytes | None = None) -> tuple[int, str, Any]:  # fmt: skip
    request = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode(), answer.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers


def origin(ui: UiThread) -> dict[str, str]:
    return {"Origin": ui.url.rstrip("/")}


def test_pages_answer_escaped_with_security_headers(ui: UiThread, jobs: dict[str, str]) -> None:
    status, body, headers = fetch(ui.url + "jobs")
    assert status == 200
    assert all(job in body for job in jobs.values())
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    status, body, _ = fetch(ui.url + f"jobs/{jobs['app_error']}")
    assert status == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in body
    assert "plain-text-key-in-env" not in body  # WANDB_API_KEY's value, masked
    status, body, _ = fetch(ui.url + f"jobs/{jobs['app_error']}/plan?attempt=1")
    assert status == 200 and "masked" in body and "plain-text-key-in-env" not in body
    assert fetch(ui.url + "overview")[0] == 200
    status, svg, headers = fetch(ui.url + "overview/ends.svg")
    assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")
    assert "<script" not in svg


def test_unknown_jobs_assets_and_traversal_are_404(ui: UiThread) -> None:
    assert fetch(ui.url + "jobs/no-such-job")[0] == 404
    assert fetch(ui.url + "jobs/..%2f..%2fetc")[0] == 404
    assert fetch(ui.url + "static/ui.css")[0] == 200
    for name in ("..%2f__init__.py", "%2e%2e/app.py", "nope.css", "..%2f..%2fpyproject.toml"):
        assert fetch(ui.url + "static/" + name)[0] == 404


def test_a_foreign_host_and_a_large_body_are_refused(
    ui_actions: UiThread, jobs: dict[str, str]
) -> None:
    assert fetch(ui_actions.url + "jobs", headers={"Host": "evil.example"})[0] == 421
    url = ui_actions.url + f"jobs/{jobs['running']}/actions/cancel"
    big = fetch(url, method="POST", data=b"x" * 100_000,
                headers={**origin(ui_actions), "X-Dispatch-Token": ui_actions.token or ""})  # fmt: skip
    assert big[0] == 413


def test_actions_are_off_unless_allowed(
    ui: UiThread, jobs: dict[str, str], writer: Records
) -> None:
    status, body, _ = fetch(ui.url + f"jobs/{jobs['running']}/actions/cancel", method="POST",
                            headers=origin(ui))  # fmt: skip
    assert status == 403 and "--allow-actions" in body
    assert writer.get_job(jobs["running"]).cancel is None
    assert 'data-action="cancel"' not in fetch(ui.url + f"jobs/{jobs['running']}")[1]


def test_an_action_needs_the_token_and_the_same_origin(
    ui_actions: UiThread, jobs: dict[str, str], writer: Records
) -> None:
    ui = ui_actions
    url = ui.url + f"jobs/{jobs['running']}/actions/cancel"
    token = {"X-Dispatch-Token": ui.token or ""}
    assert fetch(url, method="POST", headers=origin(ui))[0] == 403  # no token
    assert fetch(url, method="POST", headers={**origin(ui), "X-Dispatch-Token": "guess"})[0] == 403
    assert fetch(url, method="POST", headers=token)[0] == 403  # no Origin
    assert fetch(url, method="POST", headers={**token, "Origin": "http://evil.example"})[0] == 403
    assert writer.get_job(jobs["running"]).cancel is None
    status, body, _ = fetch(url, method="POST", headers={**origin(ui), **token})
    assert status == 200 and "cancel requested by tester" in body
    cancel = writer.get_job(jobs["running"]).cancel
    assert cancel is not None and cancel.actor == "tester" and "web UI" in cancel.reason


def test_hold_and_release_are_recorded_with_their_actor(
    ui_actions: UiThread, jobs: dict[str, str], writer: Records
) -> None:
    ui = ui_actions
    headers = {**origin(ui), "X-Dispatch-Token": ui.token or ""}
    status, body, _ = fetch(
        ui.url + f"jobs/{jobs['pending']}/actions/hold", method="POST", headers=headers
    )
    assert status == 200, body
    held = [e for e in writer.log(jobs["pending"]) if e.kind == "hold-requested"]
    assert held and held[-1].data == {"attempt": 0, "actor": "tester"}
    status, body, _ = fetch(
        ui.url + f"jobs/{jobs['running']}/actions/hold", method="POST", headers=headers
    )
    assert status == 409 and "only a job that has not started" in body
    status, body, _ = fetch(
        ui.url + f"jobs/{jobs['held']}/actions/release", method="POST", headers=headers
    )
    assert status == 200, body
    entries = [(e.kind, dict(e.data)) for e in writer.log(jobs["held"])]
    assert ("ui-action", {"action": "release", "actor": "tester"}) in entries
    assert writer.get_job(jobs["held"]).release_count == 1
    status, body, _ = fetch(
        ui.url + f"jobs/{jobs['succeeded']}/actions/cancel", method="POST", headers=headers
    )
    assert status == 409 and "already ended" in body
    assert (
        fetch(ui.url + f"jobs/{jobs['held']}/actions/explode", method="POST", headers=headers)[0]
        == 404
    )


def test_the_feed_makes_one_store_query_per_tick_however_many_jobs(
    ui: UiThread, jobs: dict[str, str], writer: Records
) -> None:
    feed = ui.server.ui.feed
    before, began = feed.queries, time.monotonic()
    writer.append_log(
        jobs["running"], "attempt", {"attempt": 1, "state": "failed", "cause": "node_lost"}
    )
    writer.set_job_status(jobs["running"], State.FAILED, Cause.NODE_LOST, "node lost")
    deadline = time.monotonic() + 5
    while ui.server.ui.index.rows[jobs["running"]].state is not State.FAILED:
        assert time.monotonic() < deadline, "the index never saw the job end"
        time.sleep(0.05)
    ticks = (time.monotonic() - began) / feed.interval
    assert feed.queries - before <= ticks + 2  # one logged_after per tick (and a rare rescan)


def test_dispatch_ui_without_the_extra_exits_2_with_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from click.testing import CliRunner

    import dispatch.ui
    from dispatch.cli.main import cli

    monkeypatch.setattr(dispatch.ui, "missing_modules", lambda: ["pygal"])
    result = CliRunner().invoke(cli, ["ui"])
    assert result.exit_code == 2
    assert "pip install 'dispatch-train[ui]'" in result.output


def test_dispatch_ui_starts_prints_the_token_and_stops(jobs: dict[str, str]) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "dispatch", "ui", "--port", "0", "--allow-actions"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ),
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("dispatch ui: http://127.0.0.1:") and "9 jobs" in first
        token_line = process.stdout.readline()
        assert "token: " in token_line
        url = first.split()[2]
        status, body, _ = fetch(url + "jobs")
        assert status == 200 and jobs["running"] in body
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def first_event(url: str, headers: dict[str, str]) -> list[str]:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as stream:
        lines = []
        while (line := stream.readline().decode().rstrip("\n")) != "":
            lines.append(line)
        return lines


def test_a_page_that_reconnects_receives_what_it_missed(
    ui: UiThread, jobs: dict[str, str], writer: Records
) -> None:
    seen = ui.server.ui.index.seq
    writer.append_log(jobs["queued"], "attempt", {"attempt": 1, "state": "failed"})
    writer.set_job_status(jobs["queued"], State.FAILED, Cause.NO_CAPACITY, "never fit")
    deadline = time.monotonic() + 5
    while ui.server.ui.index.rows[jobs["queued"]].state is not State.FAILED:
        assert time.monotonic() < deadline, "the index never saw the job end"
        time.sleep(0.05)
    event = first_event(ui.url + "events", {"Last-Event-ID": str(seen)})
    assert event[0] == "event: rows"
    assert jobs["queued"] in event[2] and '"cause":"no_capacity"' in event[2]
    assert first_event(ui.url + "events", {})[0] == "event: hello"

"""The CLI verbs end to end on the local scheduler, each call a new process."""

from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.api.conftest import dispatch

OK = """
    name: ok
    nodes: 2
    procsPerNode: 2
    command: ["python", "main.py"]
"""
OK_SCRIPT = """
    import os
    print("rank", os.environ["RANK"], "attempt", os.environ["DISPATCH_ATTEMPT"], flush=True)
"""
FAILS = """
    name: fails
    nodes: 2
    procsPerNode: 2
    command: ["python", "main.py"]
"""
FAILS_SCRIPT = """
    import os, sys, time
    rank = int(os.environ["RANK"])
    time.sleep(0.3)
    if rank == 2:
        sys.exit(3)
    time.sleep(60)
"""
SLEEPS = """
    name: sleeps
    nodes: 1
    procsPerNode: 2
    command: ["python", "-c", "import time; print('up', flush=True); time.sleep(120)"]
"""


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.2):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def job_processes(job_id: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["environ"]):
        try:
            environ = process.info["environ"] or {}
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
        if environ.get("DISPATCH_JOB") == job_id:
            found.append(process)
    return found


def test_run_succeeds_and_prints_one_json_object(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("ok", OK, OK_SCRIPT)
    done = dispatch("run", str(spec), "--output", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["state"] == "succeeded"
    assert result["cause"] is None
    assert [a["attempt"] for a in result["attempts"]] == [1]
    assert {"job", "state", "cause", "summary", "firstFailure", "evidence", "attempts"} <= set(
        result
    )


def test_run_failure_names_cause_rank_and_exit_code(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("fails", FAILS, FAILS_SCRIPT)
    done = dispatch("run", str(spec), "--output", "json")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert (result["state"], result["cause"]) == ("failed", "app_error")
    assert result["firstFailure"]["rank"] == 2
    assert result["firstFailure"]["exitCode"] == 3


def test_run_text_shows_ranks_output_and_the_summary(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("ok", OK, OK_SCRIPT)
    done = dispatch("run", str(spec))
    assert done.returncode == 0, done.stderr
    for rank in range(4):
        assert f"[rank {rank}] rank {rank} attempt 1" in done.stdout
    assert "state     succeeded" in done.stdout


def test_submit_returns_at_once_and_status_from_a_new_process(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("ok", OK, OK_SCRIPT)
    submitted = dispatch("submit", str(spec), "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["job"]

    def ended() -> dict[str, object] | None:
        status = json.loads(dispatch("status", job_id, "-o", "json").stdout)
        return status if status["state"] in ("succeeded", "failed", "cancelled") else None

    final = wait_for(ended)
    assert final["state"] == "succeeded"
    listed = json.loads(dispatch("list", "-o", "json").stdout)
    assert [j["job"] for j in listed] == [job_id]
    logs = dispatch("logs", job_id, "--rank", "3")
    assert logs.stdout.strip() == "rank 3 attempt 1"


def test_cancel_a_submitted_job(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("sleeps", SLEEPS)
    job_id = json.loads(dispatch("submit", str(spec), "-o", "json").stdout)["job"]
    wait_for(lambda: len(job_processes(job_id)) == 2)
    done = dispatch("cancel", job_id, "--reason", "testing", "--wait", "60", "-o", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)
    assert (status["state"], status["cause"]) == ("cancelled", "cancelled")
    assert status["cancelRequestedBy"]
    wait_for(lambda: not job_processes(job_id), timeout=30)


def test_ctrl_c_cancels_the_job_cleanly(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("sleeps", SLEEPS)
    process = subprocess.Popen(
        [sys.executable, "-m", "dispatch", "run", str(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    listed = wait_for(lambda: json.loads(dispatch("list", "-o", "json").stdout))
    job_id = listed[0]["job"]
    wait_for(lambda: len(job_processes(job_id)) == 2)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    assert process.returncode == 130
    status = json.loads(dispatch("status", job_id, "-o", "json").stdout)
    assert (status["state"], status["cause"]) == ("cancelled", "cancelled")
    wait_for(lambda: not job_processes(job_id), timeout=30)


def test_a_refused_job_creates_nothing(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job(
        "gpu",
        """
        name: gpu
        command: ["python", "-c", "pass"]
        resources: {gpu: 1}
        """,
    )
    done = dispatch("submit", str(spec), "-o", "json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["reasons"]
    assert json.loads(dispatch("list", "-o", "json").stdout) == []


def test_plan_shows_the_processes_and_creates_nothing(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("ok", OK, OK_SCRIPT)
    done = dispatch("plan", str(spec), "-o", "json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["accepted"] is True
    ranks = [o for o in plan["objects"] if o["name"] != "attempt-runner"]
    assert len(ranks) == 4
    assert json.loads(dispatch("list", "-o", "json").stdout) == []


def test_unknown_job_and_unknown_cluster_are_clear_errors(write_job, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    missing = dispatch("status", "nope", "-o", "json")
    assert missing.returncode == 1
    assert "nope" in json.loads(missing.stdout)["error"]
    spec = write_job("elsewhere", "name: x\ncluster: prod\ncommand: [python]\n")
    refused = dispatch("run", str(spec))
    assert refused.returncode == 2
    assert "no cluster named 'prod'" in refused.stderr


def test_kill_9_of_run_leaves_no_unsupervised_rank(write_job) -> None:  # type: ignore[no-untyped-def]
    """`dispatch run` killed with SIGKILL cannot cancel; its standby background supervisor
    takes the job over when the foreground lease expires and drives it to its end, after
    which no process of the job is left."""
    spec = write_job(
        "short",
        """
        name: short
        nodes: 1
        procsPerNode: 2
        command: ["python", "-c", "import time; time.sleep(4)"]
        """,
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "dispatch", "run", str(spec)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    listed = wait_for(lambda: json.loads(dispatch("list", "-o", "json").stdout))
    job_id = listed[0]["job"]
    wait_for(lambda: len(job_processes(job_id)) == 2)
    process.kill()
    process.wait(timeout=10)

    def ended() -> dict[str, object] | None:
        status = json.loads(dispatch("status", job_id, "-o", "json").stdout)
        return status if status["state"] in ("succeeded", "failed", "cancelled") else None

    final = wait_for(ended, timeout=90, interval=1.0)
    assert final["state"] == "succeeded"
    assert not job_processes(job_id)


def test_a_held_job_waits_for_release_then_runs_attempt_2(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job(
        "held",
        """
        name: held
        nodes: 1
        procsPerNode: 1
        command: ["python", "-c", "import os, sys; sys.exit(0 if os.environ['DISPATCH_ATTEMPT'] == '2' else 3)"]
        recovery:
          rules:
            - on: [app_error]
              action: hold
        """,
    )
    job_id = json.loads(dispatch("submit", str(spec), "-o", "json").stdout)["job"]
    held = wait_for(
        lambda: (
            (s := json.loads(dispatch("status", job_id, "-o", "json").stdout))["state"] == "held"
            and s
        )
    )
    assert held["cause"] == "app_error"
    not_held = dispatch("release", "no-such-job", "-o", "json")
    assert not_held.returncode == 1
    released = dispatch("release", job_id, "-o", "json")
    assert released.returncode == 0, released.stdout + released.stderr

    def ended() -> dict[str, object] | None:
        status = json.loads(dispatch("status", job_id, "-o", "json").stdout)
        return status if status["state"] in ("succeeded", "failed", "cancelled") else None

    final = wait_for(ended)
    assert final["state"] == "succeeded"
    assert [a["attempt"] for a in final["attempts"]] == [1, 2]
    again = dispatch("release", job_id, "-o", "json")
    assert again.returncode == 1
    assert "not held" in json.loads(again.stdout)["error"]


def test_submit_hold_starts_nothing_until_release(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("ok", OK, OK_SCRIPT)
    submitted = dispatch("submit", "--hold", str(spec))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    assert submitted.stderr.strip() == (
        f"held at submission by {getpass.getuser()}; release with `dispatch release {job_id}`"
    )
    # a supervisor pass leaves it alone: no attempt, no process
    once = dispatch("supervise", "--once", "-o", "json")
    assert once.returncode == 0, once.stderr
    status = json.loads(dispatch("status", job_id, "-o", "json").stdout)
    assert (status["state"], status["attempts"]) == ("held", [])
    assert status["summary"].startswith("held at submission by ")
    assert status["decision"]["action"] == "nothing"
    text = dispatch("status", job_id).stdout
    assert "state     held" in text
    assert f"release with `dispatch release {job_id}`" in text
    assert not job_processes(job_id)

    released = dispatch("release", job_id)
    assert released.returncode == 0, released.stdout + released.stderr
    assert "released: a supervisor starts attempt 1 next" in released.stderr

    def ended() -> dict[str, object] | None:
        status = json.loads(dispatch("status", job_id, "-o", "json").stdout)
        return status if status["state"] in ("succeeded", "failed", "cancelled") else None

    final = wait_for(ended)
    assert final["state"] == "succeeded"
    assert [a["attempt"] for a in final["attempts"]] == [1]
    logs = dispatch("logs", job_id, "--rank", "0")
    assert logs.stdout.strip() == "rank 0 attempt 1"


def test_cancel_of_a_job_submitted_held_ends_it_with_no_attempt(write_job) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("sleeps", SLEEPS)
    submitted = dispatch("submit", "--hold", str(spec), "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    status = json.loads(submitted.stdout)
    assert (status["state"], status["cause"], status["attempts"]) == ("held", None, [])
    job_id = status["job"]
    done = dispatch("cancel", job_id, "--reason", "not needed", "--wait", "60", "-o", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    final = json.loads(done.stdout)
    assert (final["state"], final["cause"], final["attempts"]) == ("cancelled", "cancelled", [])
    assert "no attempt was started" in final["summary"]
    assert not job_processes(job_id)
    refused = dispatch("release", job_id, "-o", "json")
    assert refused.returncode == 1
    assert "not held" in json.loads(refused.stdout)["error"]

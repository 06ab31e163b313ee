"""The CLI on a team's PostgreSQL records (``$DISPATCH_RECORDS``): a local job run, listed and
shown from another process, with no SQLite file written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dispatch.testing.postgres import PostgresServer
from tests.conftest import EXAMPLES


def _dispatch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dispatch", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_run_then_list_and_status_read_the_shared_database(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    env = {**os.environ, "DISPATCH_RECORDS": postgres.create_database()}
    ran = _dispatch("run", str(EXAMPLES / "hello" / "job.yaml"), env=env)
    assert ran.returncode == 0, ran.stderr
    listed = _dispatch("list", "--output", "json", env=env)
    assert listed.returncode == 0, listed.stderr
    [job] = json.loads(listed.stdout)
    assert (job["name"], job["state"]) == ("hello", "succeeded")
    shown = _dispatch("status", job["job"], "--output", "json", env=env)
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["state"] == "succeeded"
    assert len([e for e in status["evidence"] if e["kind"] == "process"]) == 4
    state = Path(os.environ["DISPATCH_STATE_DIR"])
    assert not (state / "records.sqlite3").exists()


def test_a_teammate_on_another_machine_sees_and_cancels_the_job(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    url = postgres.create_database()
    alice = {**os.environ, "DISPATCH_RECORDS": url, "DISPATCH_STATE_DIR": str(tmp_path / "a")}
    bob = {**os.environ, "DISPATCH_RECORDS": url, "DISPATCH_STATE_DIR": str(tmp_path / "b"),
           "USER": "bob", "LOGNAME": "bob"}  # fmt: skip
    alice["USER"] = alice["LOGNAME"] = "alice"
    held = _dispatch("submit", "--hold", str(EXAMPLES / "hello" / "job.yaml"), "-o", "json",
                     env=alice)  # fmt: skip
    assert held.returncode == 0, held.stderr
    job = json.loads(held.stdout)["job"]
    cancelled = _dispatch("cancel", job, "--reason", "wrong data", env=bob)
    assert cancelled.returncode == 0, cancelled.stderr
    supervised = _dispatch("supervise", "--once", "--owner", "bob-laptop", env=bob)
    assert supervised.returncode == 0, supervised.stderr
    status = json.loads(_dispatch("status", job, "-o", "json", env=alice).stdout)
    assert (status["state"], status["submittedBy"], status["cancelRequestedBy"]) == (
        "cancelled",
        "alice",
        "bob",
    )
    text = _dispatch("status", job, env=alice).stdout
    assert "who       submitted by alice; cancel asked by bob" in text


def test_a_remote_supervised_cluster_gets_no_supervisor_from_submit(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    config = tmp_path / "team.yaml"
    config.write_text(
        "clusters:\n"
        "  - {name: team, adapter: memory, supervision: remote, shape: slurm}\n"
    )  # fmt: skip
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: train\ncluster: team\ncommand: [python, train.py]\n"
        "env: {MEMORY_SCENARIO: 'succeeded@1'}\n"
    )
    laptop = {**os.environ, "DISPATCH_RECORDS": postgres.create_database(),
              "DISPATCH_CONFIG": str(config), "DISPATCH_STATE_DIR": str(tmp_path / "laptop")}  # fmt: skip
    submitted = _dispatch("submit", str(spec), env=laptop)
    assert submitted.returncode == 0, submitted.stderr
    assert "supervised remotely" in submitted.stderr
    job = submitted.stdout.strip()
    assert not (tmp_path / "laptop" / "supervisor.log").exists()  # none was started
    pending = json.loads(_dispatch("status", job, "-o", "json", env=laptop).stdout)
    assert (pending["state"], pending["attempts"]) == ("pending", [])
    in_cluster = {**laptop, "DISPATCH_STATE_DIR": str(tmp_path / "pod")}
    driven = _dispatch("supervise", "--exit-when-idle", "--cluster", "team", "--owner", "pod-1",
                       "--poll-interval", "0.2", env=in_cluster)  # fmt: skip
    assert driven.returncode == 0, driven.stderr
    done = json.loads(_dispatch("status", job, "-o", "json", env=laptop).stdout)
    assert done["state"] == "succeeded"

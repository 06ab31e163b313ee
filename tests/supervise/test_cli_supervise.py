"""`dispatch supervise` against the records database in the state directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dispatch.cli.main import cli
from dispatch.config import state_dir
from dispatch.model import Cause, State, parse_spec
from dispatch.records import SqliteRecords, database_path

CONFIG = """\
clusters:
  - name: mem
    adapter: memory
    watchInterval: 0.02
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def submit(scenario: str, cluster: str = "mem") -> str:
    records = SqliteRecords(database_path(state_dir()))
    spec = {
        "name": "train",
        "cluster": cluster,
        "command": ["python", "t.py"],
        "env": {"MEMORY_SCENARIO": scenario},
        "recovery": {"rules": [{"on": ["preempted"], "action": "retry", "limit": 1}]},
    }
    try:
        return records.create_job(parse_spec(spec)).id
    finally:
        records.close()


def job_state(job: str) -> tuple[State, Cause | None]:
    records = SqliteRecords(database_path(state_dir()))
    try:
        record = records.get_job(job)
        return record.state, record.cause
    finally:
        records.close()


def invoke(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config), "supervise", *args])
    return result.exit_code, result.output


def test_once_with_no_jobs(config: Path) -> None:
    code, out = invoke(config, "--once", "-o", "json")
    assert code == 0
    report = json.loads(out)
    assert report["jobs"] == []
    assert report["reconciled"] == []
    code, out = invoke(config, "--once")
    assert (code, out.strip()) == (0, "no open jobs")


def test_once_starts_the_first_attempt(config: Path) -> None:
    job = submit("hang")
    code, out = invoke(config, "--once", "--owner", "tester", "-o", "json")
    assert code == 0, out
    report = json.loads(out)
    assert report["owner"] == "tester"
    [entry] = report["jobs"]
    assert entry["job"] == job
    assert [d["action"] for d in entry["decisions"]] == ["start"]
    assert job_state(job) == (State.QUEUED, None)


def test_long_lived_until_idle_drives_jobs_to_their_end(config: Path) -> None:
    done = submit("succeeded@0.1")
    failed = submit("app_error@0.1 exit=2")
    code, out = invoke(
        config, "--exit-when-idle", "--poll-interval", "0.05", "--lease-ttl", "5", "-o", "json"
    )
    assert code == 0, out
    summary = json.loads(out)
    assert summary["actions"]["start"] == 2
    assert summary["actions"]["finish"] == 2
    assert job_state(done) == (State.SUCCEEDED, None)
    assert job_state(failed) == (State.FAILED, Cause.APP_ERROR)


def test_a_job_on_an_unknown_cluster_is_reported_not_fatal(config: Path) -> None:
    job = submit("hang", cluster="nowhere")
    code, out = invoke(config, "--once")
    assert code == 0, out
    assert f"{job}: cannot act: no cluster named 'nowhere'" in out
    assert job_state(job) == (State.PENDING, None)
    records = SqliteRecords(database_path(state_dir()))
    try:
        assert records.open_intents() == []  # nothing was written before the adapter was known
        assert records.attempts(job) == []
    finally:
        records.close()

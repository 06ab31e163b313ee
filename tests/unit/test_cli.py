from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from dispatch.cli.main import VERBS, cli
from tests.conftest import EXAMPLES


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_help_lists_every_verb() -> None:
    code, out = invoke("--help")
    assert code == 0
    for verb in VERBS:
        assert verb.replace("_", "-") in out


def test_the_installed_command_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dispatch", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert "check-runtime" in done.stdout


def test_validate_a_good_example() -> None:
    code, out = invoke("validate", str(EXAMPLES / "hello" / "job.yaml"))
    assert code == 0
    assert "ok (hello)" in out


def test_validate_names_all_three_mistakes() -> None:
    code, out = invoke("validate", str(EXAMPLES / "invalid" / "three-mistakes.yaml"))
    assert code == 1
    assert "3 problems" in out
    for field in ("name:", "nodes:", "timelimit:"):
        assert field in out
    assert "did you mean 'timeLimit'" in out


def test_validate_json() -> None:
    code, out = invoke("validate", "-o", "json", str(EXAMPLES / "invalid" / "three-mistakes.yaml"))
    assert code == 1
    result = json.loads(out)
    assert result["valid"] is False
    assert [p["field"] for p in result["problems"]] == ["name", "nodes", "timelimit"]


def test_validate_a_missing_file() -> None:
    code, out = invoke("validate", "does-not-exist.yaml")
    assert code == 1
    assert "cannot read" in out


def test_version_json() -> None:
    code, out = invoke("version", "--output", "json")
    assert code == 0
    assert set(json.loads(out)) == {"version", "python", "extras"}


def test_run_reports_every_spec_problem_as_json(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: Bad_Name\nnodes: 0\ncommand: [python]\n")
    code, out = invoke("run", str(spec), "-o", "json")
    assert code == 1
    problems = json.loads(out)["problems"]
    assert [p["field"] for p in problems] == ["name", "nodes"]


def test_a_missing_slurm_conf_is_a_configuration_error_at_once(tmp_path: Path) -> None:
    """It was reported as "temporary: try again" after Slurm's own 60 s of retries."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "clusters:\n  - name: hpc\n    adapter: slurm\n    transport: local\n"
        f"    slurmConf: {tmp_path / 'missing-slurm.conf'}\n"
    )
    spec = tmp_path / "job.yaml"
    spec.write_text("name: on-slurm\ncluster: hpc\ncommand: [hostname]\n")
    result = CliRunner().invoke(cli, ["--config", str(config), "plan", str(spec), "-o", "json"])
    assert result.exit_code == 2, result.output
    error = json.loads(result.output)
    assert "transient" not in error
    assert "missing-slurm.conf is not a file here: fix `slurmConf`" in error["error"]

"""`dispatch sim` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dispatch.cli.main import cli


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_a_batch_reports_in_json() -> None:
    code, out = invoke("sim", "--seeds", "4", "--steps", "80", "-o", "json")
    assert code == 0, out
    report = json.loads(out[out.index("{") :])
    assert (report["ok"], report["seeds"], report["violations"]) == (True, 4, 0)
    assert report["steps"] >= 4 * 80
    assert report["stepsPerSecond"] > 0
    assert report["config"]["shape"] == "both"


def test_one_shape_and_a_fixed_number_of_supervisors() -> None:
    code, out = invoke(
        "sim", "--seeds", "3", "--steps", "50", "--shape", "kubernetes", "--supervisors", "2"
    )
    assert code == 0, out
    assert "kubernetes': 3" in out
    assert "{2: 3}" in out
    assert "no invariant violated" in out


def test_a_broken_supervisor_exits_1_and_names_the_seed() -> None:
    code, out = invoke("sim", "--seeds", "3", "--broken", "skip-intent")
    assert code == 1
    assert "seed 0: step" in out
    assert "[intent]" in out


def test_replaying_a_seed_stops_and_dumps(tmp_path: Path) -> None:
    folder = tmp_path / "dump"
    code, out = invoke("sim", "--seed", "7", "--stop-at", "40", "--dump", str(folder))
    assert code == 0, out
    assert "seed 7" in out
    assert "40 steps" in out
    assert (folder / "trace.txt").read_text().count("\n") == 40
    code, out = invoke("sim", "--seed", "7", "--stop-at", "40", "-o", "json")
    assert json.loads(out)["steps"] == 40


def test_bad_options_are_usage_errors() -> None:
    assert invoke("sim", "--supervisors", "3-1")[0] == 2
    assert invoke("sim", "--stop-at", "5")[0] == 2

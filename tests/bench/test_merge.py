"""`bench/run.py --merge`: one benchmark run again replaces its section and keeps the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import run


def _fake_run_one(name: str, args: Any) -> dict[str, Any]:
    return {"jobs": 7, "seconds": 0.0, "jobsPerSecond": 1.0}


def test_merge_replaces_only_the_benchmarks_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier = {
        "command": "python bench/run.py",
        "machine": {
            "cpu": "cpu", "cores": 2, "memoryGiB": 4.0, "os": "Linux", "python": "CPython 3.11",
            "loadAverageAtStart": "0.1", "date": "2026-01-01 00:00 UTC",
        },
        "emulator": {"jobs": 1, "seconds": 9.0, "jobsPerSecond": 0.1, "loadAverage": "x"},
        "local": {"skipped": "kept as it was", "seconds": 0.0, "loadAverage": "y"},
    }  # fmt: skip
    (tmp_path / "results.json").write_text(json.dumps(earlier))
    monkeypatch.setattr(run, "run_one", _fake_run_one)

    run.main(["--only", "emulator", "--merge", "--out", str(tmp_path)])

    merged = json.loads((tmp_path / "results.json").read_text())
    assert merged["command"] == "python bench/run.py"  # the whole run's command stays on top
    assert merged["local"] == earlier["local"]
    assert merged["emulator"]["jobs"] == 7
    rerun = merged["emulator"]["rerun"]
    assert rerun["command"] == "python bench/run.py --only emulator --merge --out '<a folder>'"
    page = (tmp_path / "results.md").read_text()
    assert "**Not run:** kept as it was" in page
    assert f"Run again on its own, {rerun['date']}: `{rerun['command']}`." in page


def test_merge_without_earlier_results_refuses_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "run_one", _fake_run_one)
    with pytest.raises(SystemExit, match="run without --merge first"):
        run.main(["--only", "emulator", "--merge", "--out", str(tmp_path)])
    assert not (tmp_path / "results.json").exists()
    assert not (tmp_path / "results.md").exists()

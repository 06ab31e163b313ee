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


def test_merge_of_scale_replaces_only_the_rows_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def row(tool: str, jobs: int, error: str, longer: bool = False) -> dict[str, Any]:
        return {"tool": tool, "jobs": jobs, "error": error, **({"longer": True} if longer else {})}

    earlier_rows = [
        row("dispatch", 1000, "old"), row("sdk", 1000, "old"),
        row("dispatch", 5000, "old"), row("dispatch", 1000, "old", longer=True),
    ]  # fmt: skip
    section = {"seconds": 9.0, "loadAverage": "x", "lifetime": 60.0, "timeScale": 10.0}
    earlier = {
        "command": "python bench/run.py",
        "machine": {
            "cpu": "cpu", "cores": 2, "memoryGiB": 4.0, "os": "Linux", "python": "CPython 3.11",
            "loadAverageAtStart": "0.1", "date": "2026-01-01 00:00 UTC",
        },
        "scale": {**section, "dispatchOnly": [5000], "rows": earlier_rows},
    }  # fmt: skip
    (tmp_path / "results.json").write_text(json.dumps(earlier))
    ran = [row("sdk", 5000, "new"), row("sdk", 1000, "new")]
    monkeypatch.setattr(run, "run_one", lambda name, args: {**section, "rows": ran})

    run.main(["--only", "scale", "--merge", "--out", str(tmp_path)])

    merged = json.loads((tmp_path / "results.json").read_text())["scale"]
    assert merged["seconds"] == 9.0  # the section's figures stay those of the whole run
    order = [(r["tool"], r["jobs"], r["error"], "rerun" in r) for r in merged["rows"]]
    assert order == [
        ("dispatch", 1000, "old", False), ("sdk", 1000, "new", True),
        ("dispatch", 5000, "old", False), ("sdk", 5000, "new", True),
        ("dispatch", 1000, "old", False),
    ]  # fmt: skip
    assert merged["rows"][-1].get("longer")  # rows of the longer lifetime come last
    page = (tmp_path / "results.md").read_text()
    assert "| sdk † | 5,000 |" in page
    assert "† sdk N=5000 was run again on its own" in page
    assert "dispatch alone" not in page  # the SDK has a row at 5,000 now

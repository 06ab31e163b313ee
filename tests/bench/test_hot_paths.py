"""`python -m bench.hot_paths` runs and names every path it times (no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_hot_paths_prints_a_figure_for_every_path() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.hot_paths", "--repeat", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].endswith("bytes on average")
    names = [line.rsplit(maxsplit=2)[0] for line in lines[1:]]
    assert names == [
        "json.loads",
        "json.dumps (sorted, compact)",
        "laststate.share (next state)",
        "laststate.share (first state)",
        "laststate.share (first, neighbour)",
        "jsontext.loads",
        "jsontext.dumps",
        "plan_objects (torch)",
        "plan_objects (plain)",
        "diagnose (tests/dumps)",
    ]
    assert all(float(line.split()[-2]) > 0 for line in lines[1:])

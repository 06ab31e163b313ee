"""The scale benchmark's children report their own peak memory, not their parent's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIG = 400  # MiB held by this (the parent) process while the child starts


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_child_started_by_a_large_process_reports_its_own_peak() -> None:
    held = bytearray(BIG * 2**20)
    held[::4096] = b"\1" * len(held[::4096])  # touched: resident
    code = (
        "import resource; from bench.peak_rss import peak_rss_mib; "
        "print(peak_rss_mib(resource.getrusage(resource.RUSAGE_SELF)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert 0 < float(out.stdout) < BIG / 2  # ``ru_maxrss`` here says BIG or more

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


@pytest.fixture
def write_job(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a job spec (and optional script) into tmp_path; returns the spec's path."""

    def write(name: str, body: str, script: str | None = None) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        if script is not None:
            (folder / "main.py").write_text(textwrap.dedent(script))
        spec = folder / "job.yaml"
        spec.write_text(textwrap.dedent(body))
        return spec

    return write


def dispatch(
    *args: str, timeout: float = 120, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the real `dispatch` command in a new process with this test's environment."""
    return subprocess.run(
        [sys.executable, "-m", "dispatch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
        check=check,
    )

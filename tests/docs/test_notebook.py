"""examples/notebook.py runs as a script: submit, wait, inspect the cause, resubmit, succeed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_notebook_finds_the_cause_and_the_retry_resumes(workspace: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(workspace / "examples" / "notebook.py")],
        cwd=workspace,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "state: failed cause: app_error" in lines
    assert "rank 1 exited with code 3" in lines
    assert "evidence [process] rank 1 (node 0) exited with code 3" in lines
    assert "rank 1 said: rank 1: loss is NaN at step 2, giving up" in lines
    assert lines[-4:-2] == ["attempt 1: failed app_error", "attempt 2: succeeded"]
    assert "attempt 2 on local, rank 0 of 2: resuming after step" in lines[-2]
    assert "of attempt 1" in lines[-2]
    assert lines[-1] == "final state: succeeded"
    # attempt 2 resumed from attempt 1's newest complete checkpoint and wrote only the steps
    # after it, into its own folder
    resumed = int(re.search(r"resuming after step (\d+)", lines[-2]).group(1))  # type: ignore[union-attr]
    root = workspace / "examples" / "flaky" / "checkpoints"
    (job,) = [p for p in root.iterdir() if (p / "attempt-2").exists()]
    # (rank 0 of attempt 1 may have been stopped mid-save: its temporary folder stays, unread)
    first = sorted(p.name for p in (job / "attempt-1").iterdir() if p.name.startswith("step-"))
    second = sorted(p.name for p in (job / "attempt-2").iterdir())
    assert first == [f"step-{n}" for n in range(1, resumed + 1)]
    assert second == [f"step-{n}" for n in range(resumed + 1, 5)]

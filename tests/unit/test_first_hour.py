"""What a new user meets in the first hour (issue 26): each item failed before the change."""

from __future__ import annotations

from pathlib import Path


def test_the_background_supervisor_starts_without_a_runpy_warning(tmp_path: Path) -> None:
    """Every supervisor.log began with runpy's RuntimeWarning (the package imports the module
    that ``-m`` then ran again); with nothing to supervise the process exits at once."""
    import os
    import subprocess
    import sys

    from dispatch.api.background import MAIN

    env = {**os.environ, "DISPATCH_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", MAIN],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")


def test_cancel_says_what_it_did_and_that_an_ended_job_had_nothing_to_cancel(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from dispatch.cli.main import cli

    spec = tmp_path / "job.yaml"
    spec.write_text("name: sleepy\ncommand: [sleep, '600']\n")
    runner = CliRunner()
    job = runner.invoke(cli, ["submit", str(spec), "--hold"]).stdout.strip()
    first = runner.invoke(cli, ["cancel", job, "--wait", "60"])
    assert first.exit_code == 0, first.output
    assert first.output.startswith(f"cancel requested for {job}")
    assert "state     cancelled" in first.output
    again = runner.invoke(cli, ["cancel", job])
    assert again.exit_code == 1
    assert f"job {job} already ended (cancelled): nothing to cancel" in again.output

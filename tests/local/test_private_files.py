"""An attempt's files hold the ranks' environment (its values) and output: every folder dispatch
makes under the state directory is 0700 and every file 0600, and a link planted where a temp
file goes is not followed (issue 26)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from click.testing import CliRunner

from dispatch.adapters.local.files import write_json
from dispatch.cli.main import cli


def test_an_attempts_files_are_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    spec = tmp_path / "job.yaml"
    spec.write_text("name: private\ncommand: [echo, hi]\nenv: {TOKEN: s3cret}\n")
    result = CliRunner().invoke(cli, ["run", str(spec)], env={"DISPATCH_STATE_DIR": str(state)})
    assert result.exit_code == 0, result.output
    attempt = next((state / "clusters").rglob("launch.json")).parent
    made = [p for p in (state / "clusters").rglob("*") if not p.name.startswith(".")]
    assert any("s3cret" in p.read_text() for p in made if p.name == "launch.json")
    for path in made:
        mode = stat.S_IMODE(path.stat().st_mode)
        if path.is_dir() and path.is_relative_to(attempt.parent):
            assert mode == 0o700, path
        elif path.is_file():
            assert mode & 0o077 == 0, path


def test_a_link_planted_where_the_temp_file_goes_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    target = tmp_path / "status.json"
    planted = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    planted.symlink_to(victim)
    write_json(target, {"ok": True})  # the leftover link is removed, never written through
    assert victim.read_text() == "keep me"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_private_dirs_makes_every_missing_folder_0700(tmp_path: Path) -> None:
    from dispatch.adapters.local.files import private_dirs

    deep = tmp_path / "a" / "b" / "logs"
    private_dirs(deep)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", deep):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700

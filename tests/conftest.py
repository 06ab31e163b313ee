"""Shared fixtures. Tests never touch the user's real state or config directories."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPATCH_STATE_DIR", str(tmp_path / "state"))
    config = tmp_path / "config.yaml"
    config.write_text("clusters: []\n")
    monkeypatch.setenv("DISPATCH_CONFIG", str(config))
    monkeypatch.delenv("DISPATCH_JOB", raising=False)
    monkeypatch.delenv("DISPATCH_ATTEMPT", raising=False)

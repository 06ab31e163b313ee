"""Shared fixtures. Tests never touch the user's real state or config directories."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A throwaway PostgreSQL server (Debian's binaries, on loopback) for the session: the
    records tests and the web UI's team-store test. Skipped where PostgreSQL is not installed,
    except under CI, where it must be."""
    from dispatch.testing.postgres import PostgresServer, PostgresUnavailable, find_bin_dir

    try:
        bin_dir = find_bin_dir()
    except PostgresUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but PostgreSQL cannot be started: {exc}")
        pytest.skip(str(exc))
    with PostgresServer(bin_dir=bin_dir) as server:
        yield server

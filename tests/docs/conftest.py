"""Fixtures for the documentation tests: a scratch copy of examples/ to run things in."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES


def copy_examples(target: Path) -> Path:
    """A copy of examples/ at ``target/examples`` (without checkpoints left by hand-runs)."""
    shutil.copytree(EXAMPLES, target / "examples", ignore=shutil.ignore_patterns("checkpoints"))
    return target


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A folder holding ``examples/``, as the repository root holds it."""
    return copy_examples(tmp_path / "work")

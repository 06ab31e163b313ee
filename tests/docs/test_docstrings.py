"""The ``>>>`` examples in dispatch's public docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

from tests.conftest import REPO

SOURCE = REPO / "src"


def modules_with_examples() -> list[str]:
    found = []
    for path in sorted((SOURCE / "dispatch").rglob("*.py")):
        if ">>> " in path.read_text(encoding="utf-8"):
            parts = path.relative_to(SOURCE).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


MODULES = modules_with_examples()


def test_the_public_modules_have_examples() -> None:
    assert {"dispatch", "dispatch.injob.identity", "dispatch.injob.checkpoint"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags, verbose=False, report=True)
    assert result.attempted > 0
    assert result.failed == 0

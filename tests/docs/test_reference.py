"""The reference pages cannot drift from the code: fields, settings, names, causes, verbs."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

import dispatch
from dispatch.adapters.kubeflow.planning.settings import KNOWN_KEYS
from dispatch.adapters.slurm.settings import KNOWN
from dispatch.cli.main import VERBS
from dispatch.model import Backoff, JobSpec, RecoveryPolicy, RecoveryRule, Resources, RuntimeRef
from tests.conftest import REPO

DOCS = REPO / "docs"
_MARKER = re.compile(r"^<!--\s*(fields|settings):\s*(\S+)\s*-->\s*$")
_FIRST_CELL = re.compile(r"^\|\s*`([^`]+)`\s*\|")


def marked_tables(page: Path) -> dict[tuple[str, str], list[str]]:
    """``(kind, name) -> the backticked names in the first column`` of each marked table."""
    tables: dict[tuple[str, str], list[str]] = {}
    current: list[str] | None = None
    for line in page.read_text(encoding="utf-8").splitlines():
        marker = _MARKER.match(line)
        if marker:
            current = tables.setdefault((marker[1], marker[2]), [])
        elif current is not None and line.startswith("|"):
            cell = _FIRST_CELL.match(line)
            if cell:
                current.append(cell[1])
        elif current is not None and current and not line.startswith("|"):
            current = None
    return tables


def aliases(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def test_the_job_spec_reference_lists_exactly_the_model_fields() -> None:
    tables = marked_tables(DOCS / "reference" / "job-spec.md")
    models = (JobSpec, Resources, RuntimeRef, RecoveryPolicy, RecoveryRule, Backoff)
    assert set(tables) == {("fields", m.__name__) for m in models}
    for model in models:
        assert tables[("fields", model.__name__)] == aliases(model), model.__name__


def local_settings() -> set[str]:
    """The settings the local adapter reads (``cluster.setting("name", ...)``, or
    ``cluster.number(...)`` / ``cluster.whole_number(...)``)."""
    found: set[str] = set()
    for source in (REPO / "src" / "dispatch" / "adapters" / "local").glob("*.py"):
        found |= set(
            re.findall(
                r'\.(?:setting|number|whole_number)\(\s*"(\w+)"', source.read_text(encoding="utf-8")
            )
        )
    return found


def test_the_configuration_reference_lists_every_setting() -> None:
    tables = marked_tables(DOCS / "reference" / "configuration.md")
    assert set(tables[("settings", "kubeflow")]) == set(KNOWN_KEYS)
    assert set(tables[("settings", "slurm")]) == set(KNOWN)
    assert set(tables[("settings", "local")]) == local_settings()
    assert local_settings()  # the scan found the settings


def test_every_exported_name_is_in_the_python_api_reference() -> None:
    text = (DOCS / "reference" / "python-api.md").read_text(encoding="utf-8")
    missing = [
        name
        for name in dispatch.__all__
        if name != "__version__" and not re.search(rf"`{re.escape(name)}\b", text)
    ]
    assert missing == []


def test_every_state_and_cause_is_in_the_outcomes_reference() -> None:
    text = (DOCS / "reference" / "outcomes.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\|\s*`([a-z_]+)`\s*\|", text, flags=re.MULTILINE))
    assert {s.value for s in dispatch.State} <= rows
    assert {c.value for c in dispatch.Cause} <= rows


def load_hook() -> ModuleType:
    path = DOCS / "_hooks" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("cli_reference_hook", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_generated_for_every_verb() -> None:
    hook = load_hook()
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    assert hook.MARKER in page
    rendered = hook.on_page_markdown(page)
    for verb in VERBS:
        name = verb.replace("_", "-")
        assert f"## dispatch {name}\n" in rendered, name
        assert f"Usage: dispatch {name} [OPTIONS]" in rendered, name
    assert hook.MARKER not in rendered


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs not installed")  # fmt: skip
def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cli_page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "dispatch check-runtime" in cli_page
    assert (
        'class="mermaid"'
        in (tmp_path / "site" / "reference" / "outcomes" / "index.html").read_text()
    )

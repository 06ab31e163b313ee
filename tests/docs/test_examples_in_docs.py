"""Every code example in docs/ runs on the local scheduler and does what the page says.

See tests/docs/blocks.py for the convention. Design notes (docs/design/) are records of
decisions, not examples, and are not run.
"""

from __future__ import annotations

import doctest
import importlib.util
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dispatch.api import default
from dispatch.config import parse_config
from dispatch.model import JobSpec, load_spec, parse_spec, yaml12
from tests.conftest import REPO
from tests.docs.blocks import DIRECTIVES, LANGUAGES, Block, blocks, commands, missing_output
from tests.docs.conftest import copy_examples

DOCS = REPO / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "design" not in p.relative_to(DOCS).parts)
RUNNABLE = ("python", "pycon", "console")
SPEC_FIELDS = {info.alias or name for name, info in JobSpec.model_fields.items()}
COMMAND_TIMEOUT = 240


def page_id(page: Path) -> str:
    return str(page.relative_to(DOCS))


def test_every_page_is_found() -> None:
    assert len(PAGES) >= 15
    assert DOCS / "tutorial" / "first-job.md" in PAGES


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_blocks_use_known_languages_and_skips_give_reasons(page: Path) -> None:
    for block in blocks(page):
        assert block.language in LANGUAGES, f"{block.where}: unknown language {block.language!r}"
        skip = block.directive("skip")
        assert skip is None or len(skip) > 10, f"{block.where}: a skip needs a reason"
        for verb, _ in block.directives:
            assert verb in DIRECTIVES, f"{block.where}: unknown directive {verb}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_yaml_and_json_blocks_are_valid(page: Path, tmp_path: Path) -> None:
    for block in blocks(page):
        if block.directive("skip") is not None:
            continue
        if block.language == "json":
            json.loads(block.text)
        elif block.language == "yaml":
            check_yaml(block, tmp_path)


def check_yaml(block: Block, tmp_path: Path) -> None:
    document = yaml12.load(block.text)
    if not isinstance(document, dict):
        return
    if document.get("kind") in ("ClusterTrainingRuntime", "TrainingRuntime"):
        from dispatch.adapters.kubeflow.planning.rules import check_runtime
        from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings

        verdict = check_runtime(document, KubeflowSettings())
        assert verdict.accepted, f"{block.where}: the docs show a refused runtime: {verdict}"
    elif "clusters" in document:
        config = parse_config(document)
        check_cluster_settings(config, tmp_path)
    elif "command" in document:
        parse_spec(document, source=block.where)
    elif document and set(document) <= SPEC_FIELDS:  # a fragment of a job spec
        parse_spec({"name": "fragment", "command": ["true"], **document}, source=block.where)


def check_cluster_settings(config: Any, tmp_path: Path) -> None:
    from dispatch.adapters.kubeflow.planning.settings import parse_settings
    from dispatch.adapters.slurm.settings import SlurmSettings

    for cluster in config.clusters.values():
        if cluster.adapter == "kubeflow":
            parse_settings(cluster)
        elif cluster.adapter == "slurm":
            SlurmSettings.from_cluster(cluster, tmp_path)


RUN_PAGES = [p for p in PAGES if any(b.language in RUNNABLE for b in blocks(p))]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", RUN_PAGES, ids=page_id)
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = copy_examples(tmp_path / "work")
    monkeypatch.chdir(workspace)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    variables = tmp_path / "shell-variables"
    variables.write_text("")
    environ = dict(os.environ)  # examples may set variables (e.g. DISPATCH_ATTEMPT)
    default.reset()
    try:
        for block in blocks(page):
            if block.language not in RUNNABLE or block.directive("skip") is not None:
                continue
            needed = block.directive("needs")
            if needed and importlib.util.find_spec(needed) is None:
                continue
            if block.directive("wait-for-jobs") is not None:
                wait_for_jobs(workspace)
            if block.language == "python":
                exec(compile(block.text, block.where, "exec"), namespace)
            elif block.language == "pycon":
                run_doctest(block, namespace)
            else:
                run_console(block, workspace, variables)
    finally:
        default.reset()
        os.environ.clear()
        os.environ.update(environ)
        wait_for_jobs(workspace)  # leave no background supervisor behind


def run_doctest(block: Block, namespace: dict[str, Any]) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.text, namespace, block.where, str(block.page), block.line)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    report = io.StringIO()
    result = runner.run(test, out=report.write, clear_globs=False)
    namespace.update(test.globs)  # a DocTest works on a copy; later blocks see its names
    assert result.failed == 0, report.getvalue()


def shell_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def run_console(block: Block, workspace: Path, variables: Path) -> None:
    for command in commands(block):
        script = f"source {variables}\n{command.command}\nstatus=$?\n"
        if command.assigns:
            script += f"declare -p {command.assigns} >> {variables}\n"
        done = subprocess.run(
            ["bash", "-c", script + "exit $status"],
            cwd=workspace,
            env=shell_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        shown = f"{block.where}: $ {command.command}\n{done.stdout}"
        assert done.returncode == command.exit_code, f"exit {done.returncode}\n{shown}"
        missing = missing_output(command.expected, done.stdout)
        assert missing is None, f"expected line not printed: {missing!r}\n{shown}"


def wait_for_jobs(workspace: Path, timeout: float = 240.0) -> None:
    """Wait until no job of this test's state directory is open."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run(
            [sys.executable, "-m", "dispatch", "list", "--open", "-o", "json"],
            cwd=workspace,
            env=shell_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode == 0 and json.loads(done.stdout) == []:
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs still open after {timeout} s")


def test_the_examples_the_docs_use_are_valid_specs() -> None:
    for spec in sorted((REPO / "examples").glob("*/job.yaml")):
        load_spec(spec)

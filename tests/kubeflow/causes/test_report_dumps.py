"""`dispatch diagnose` on the dumps in tests/dumps/reports: every workload kind a training team
runs (TrainJob, JobSet, training-operator v1 jobs, batch Jobs, with and without Kueue), most
modelled on objects pasted in public bug reports (each case names its report)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dispatch.cli.main import cli
from dispatch.model import Cause
from tests.kubeflow.causes.dumpgen import DUMPS
from tests.kubeflow.causes.report_cases import Case

REPORTS = DUMPS / "reports"
#: report dumps the how-to pages use live in the examples (the docs' tests run those)
EXAMPLES = DUMPS.parents[1] / "examples" / "kubeflow" / "dumps"
CASES: dict[str, Case] = {}
for module in ("cases_operator", "cases_k8s"):
    if not (Path(__file__).parent / f"{module}.py").exists():
        continue
    CASES.update(importlib.import_module(f"tests.kubeflow.causes.{module}").CASES)


def report_path(name: str) -> Path:
    """Where the report dump ``name`` is: tests/dumps/reports, else the examples."""
    path = REPORTS / name
    return path if path.exists() else EXAMPLES / name


def diagnose(name: str, case: Case) -> dict[str, Any]:
    args = ["diagnose", str(report_path(name)), "--kind", case.kind, "--name", case.name]
    result = CliRunner().invoke(cli, [*args, *case.args, "-o", "json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def test_every_report_dump_has_a_case() -> None:
    examples = {p.name for p in EXAMPLES.glob("*.yaml")} - {"app-error.yaml"}  # a TrainJob case
    assert {p.name for p in REPORTS.glob("*.yaml")} | examples == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnose_a_report_dump(name: str) -> None:
    case = CASES[name]
    data = diagnose(name, case)
    assert data["workload"]["kind"] == case.kind
    assert data["workload"]["name"] == case.name
    assert (data["state"], data["cause"]) == (case.state, case.cause), data["summary"]
    assert case.says.lower() in data["summary"].lower(), data["summary"]
    first = data["firstFailure"]
    if case.first is None:
        assert first is None, first
    else:
        assert first is not None, data["summary"]
        assert (first["rank"], first["exitCode"]) == case.first
    keys = [e["key"] for e in data["evidence"]]
    for proof in case.proofs:
        assert any(proof in key for key in keys), (proof, keys)
    if data["cause"] is not None:
        assert data["evidence"], "a cause comes with the evidence that proves it"


def test_every_cause_is_reached_from_two_workload_kinds() -> None:
    from tests.kubeflow.causes.test_dumps import CASES as TRAINJOB_CASES

    kinds: dict[str, set[str]] = {}
    for case in CASES.values():
        if case.cause is not None:
            kinds.setdefault(case.cause, set()).add(case.kind)
    for expected in TRAINJOB_CASES.values():
        if expected.cause is not None:
            kinds.setdefault(expected.cause, set()).add("TrainJob")
    short = {c.value: sorted(kinds.get(c.value, ())) for c in Cause if c is not Cause.UNKNOWN}
    assert all(len(k) >= 2 for k in short.values()), short

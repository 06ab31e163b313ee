"""Trainer v2.3.0's own unit-test cases, translated case by case, against the renderer.

Each file under ``cases/`` is one case of one Go test of kubeflow/trainer at tag v2.3.0,
written by hand from the test's inputs (the TrainJob and runtime its wrappers build) and its
expected objects. ``follows`` names the Go file, test function and case. The renderer's whole
output is compared with ``want`` the way the Go test compares it (every object in full, in
order); ``error`` instead names the build error Trainer returns (a substring of its message).
Objects the Go test does not build are left out of ``want`` only where ``compare`` says so.

Case file keys:

``follows``: ``{file, test, case}``;
``trainjob``, ``runtime``: the inputs, as the API server stores them;
``want``: the objects Trainer applies (JobSet first, then the plugins' others); or
``error``: what the build fails with;
``compare`` (optional): ``jobset`` to compare the JobSet only, ``others`` for the rest only.

MPI's SSH-key Secret is compared as Trainer's ``MPISecretDataComparer`` does: its two keys are
random, so only whether each is set counts (the Go cases write ``EXIST``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dispatch.adapters.kubeflow.planning.jobset import BuildRefused, UnsupportedRuntime, build

CASES = Path(__file__).parent / "cases"
#: the issue asks for at least this many translated cases
AT_LEAST = 60


def _load() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(CASES.rglob("*.yaml")):
        case = yaml.safe_load(path.read_text())
        found.append((str(path.relative_to(CASES)), case))
    return found


LOADED = _load()
SSH_KEYS = ("ssh-privatekey", "ssh-publickey")


def _as_trainer_compares(objects: list[Any]) -> list[Any]:
    """Each SSH-auth Secret's keys reduced to whether they are set (``MPISecretDataComparer``)."""
    compared = []
    for obj in objects:
        if obj.get("kind") == "Secret" and obj.get("type") == "kubernetes.io/ssh-auth":
            data = {k: (bool(v) if k in SSH_KEYS else v) for k, v in obj["data"].items()}
            obj = {**obj, "data": data}
        compared.append(obj)
    return compared


@pytest.mark.parametrize(("name", "case"), LOADED, ids=[name for name, _ in LOADED])
def test_trainer_case(name: str, case: dict[str, Any]) -> None:
    follows = case["follows"]
    assert {"file", "test", "case"} <= set(follows), f"{name} must name the Go test it follows"
    if "error" in case:
        with pytest.raises((BuildRefused, UnsupportedRuntime)) as refused:
            build(case["trainjob"], case["runtime"])
        assert case["error"] in str(refused.value)
        return
    built = build(case["trainjob"], case["runtime"])
    compare = case.get("compare", "all")
    got = {"all": built.objects, "jobset": [built.jobset], "others": built.others}[compare]
    assert _as_trainer_compares(got) == _as_trainer_compares(case["want"])


def test_enough_cases_follow_trainer() -> None:
    assert len(LOADED) >= AT_LEAST
    followed = {(c["follows"]["test"], c["follows"]["case"]) for _, c in LOADED}
    assert len(followed) == len(LOADED), "each case follows a different Go test case"

"""The real ``dispatch`` command (new processes) against the emulated cluster."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from dispatch.adapters.kubeflow.planning.rules import weakened_identity_text
from dispatch.testing.k8s import Emulator
from tests.api.conftest import dispatch

from .conftest import JOBS, RUNTIMES, stored


@pytest.fixture
def config(emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A dispatch configuration whose kubeflow clusters are the emulator (as in the examples)."""
    common = {"adapter": "kubeflow", "kubeconfig": str(emulator.kubeconfig), "namespace": "ml-team"}
    clusters = [
        {"name": "kf", **common},
        {"name": "kf-rank-restart", **common, "allowRankRestart": True},
    ]
    path = tmp_path / "dispatch.yaml"
    path.write_text(yaml.safe_dump({"clusters": clusters}))
    monkeypatch.setenv("DISPATCH_CONFIG", str(path))
    return path


def _supervisors(state_dir: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmdline = process.info["cmdline"] or []
            environ = process.info["environ"] or {}
        except (psutil.AccessDenied, psutil.NoSuchProcess):
            continue
        if "dispatch.api.background" in cmdline and environ.get("DISPATCH_STATE_DIR") == state_dir:
            found.append(process)
    return found


@pytest.fixture
def background() -> Iterator[Callable[[], list[psutil.Process]]]:
    """The background supervisors this test's `dispatch submit` started; stopped at the end."""
    state_dir = os.environ["DISPATCH_STATE_DIR"]
    yield lambda: _supervisors(state_dir)
    for process in _supervisors(state_dir):
        process.terminate()
    psutil.wait_procs(_supervisors(state_dir), timeout=10)


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


@pytest.mark.usefixtures("config")
def test_plan_json_has_the_answers_the_refusals_and_the_objects(emulator: Emulator) -> None:
    done = dispatch("plan", str(JOBS / "torch.yaml"), "-o", "json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["accepted"] is True and plan["reasons"] == []
    capabilities = plan["capabilities"]
    assert capabilities["TrainerAPI"]["supported"] is True
    assert "2.3.0" in capabilities["TrainerVersion"]["reason"]
    assert capabilities["access:create trainjobs.trainer.kubeflow.org"]["supported"] is True
    assert capabilities["ProcsPerNode"]["supported"] is True
    assert plan["weakenedIdentity"] is None
    kinds = [(o["kind"], o["name"]) for o in plan["objects"]]
    assert kinds == [
        ("TrainingRuntime", "torch-ddp-preview-1"),
        ("TrainJob", "torch-ddp-preview-1"),
    ]
    trainjob = plan["objects"][1]["content"]
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-ddp-preview-1"
    assert stored(emulator, "TrainJob") == stored(emulator, "TrainingRuntime") == []


@pytest.mark.usefixtures("config")
def test_plan_of_a_refused_job_lists_every_reason_and_no_object() -> None:
    done = dispatch("plan", str(JOBS / "refused.yaml"), "-o", "json")
    assert done.returncode == 1, done.stderr
    plan = json.loads(done.stdout)
    assert plan["accepted"] is False and plan["objects"] == []
    rules = [r["rule"] for r in plan["reasons"]]
    assert {"restart-policy", "backoff-limit"} <= set(rules)


@pytest.mark.usefixtures("config")
def test_plan_shows_the_weakened_identity() -> None:
    done = dispatch("plan", str(JOBS / "rank-restart.yaml"), "-o", "json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    expected = weakened_identity_text(ignore_rule=True, per_index=True)
    assert plan["weakenedIdentity"] == expected
    trainjob = plan["objects"][1]["content"]
    assert trainjob["metadata"]["annotations"]["dispatch.dev/weakened-identity"] == expected


@pytest.mark.usefixtures("config")
def test_check_runtime_reads_a_live_runtime() -> None:
    accepted = dispatch("check-runtime", "--cluster", "kf", "torch-dispatch", "-o", "json")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert json.loads(accepted.stdout)["runtime"] == {
        "kind": "ClusterTrainingRuntime",
        "name": "torch-dispatch",
    }
    refused = dispatch("check-runtime", "--cluster", "kf", "torch-distributed", "-o", "json")
    assert refused.returncode == 1
    assert "restart-policy" in [r["rule"] for r in json.loads(refused.stdout)["reasons"]]
    missing = dispatch("check-runtime", "--cluster", "kf", "TrainingRuntime/nope", "-o", "json")
    assert missing.returncode == 1
    verdict = json.loads(missing.stdout)
    assert verdict["runtime"] == {"kind": "TrainingRuntime", "name": "nope"}
    assert [r["rule"] for r in verdict["reasons"]] == ["not-found"]
    # a file is still read as a file, with the cluster's settings
    from_file = dispatch(
        "check-runtime", "--cluster", "kf", str(RUNTIMES / "torch.yaml"), "-o", "json"
    )
    assert from_file.returncode == 0, from_file.stdout


def test_check_runtime_on_an_unreachable_cluster_exits_3(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    from dispatch.testing.k8s.kubeconfig import write_kubeconfig

    write_kubeconfig(kubeconfig, "http://127.0.0.1:9")  # nothing listens on the discard port
    config = tmp_path / "down.yaml"
    config.write_text(
        yaml.safe_dump(
            {"clusters": [{"name": "down", "adapter": "kubeflow", "kubeconfig": str(kubeconfig)}]}
        )
    )
    done = dispatch(
        "--config",
        str(config),
        "check-runtime",
        "--cluster",
        "down",
        "torch-dispatch",
        "-o",
        "json",
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "cannot be reached" in json.loads(done.stdout)["error"]


@pytest.mark.usefixtures("config")
def test_submit_creates_the_trainjob_and_cancel_removes_it(
    emulator: Emulator, background: Callable[[], list[psutil.Process]]
) -> None:
    submitted = dispatch("submit", str(JOBS / "torch.yaml"), "-o", "json")
    assert submitted.returncode == 0, submitted.stderr
    job_id = json.loads(submitted.stdout)["job"]
    [trainjob] = wait_for(lambda: stored(emulator, "TrainJob"))
    assert trainjob["metadata"]["name"] == f"{job_id}-1"
    assert trainjob["metadata"]["labels"]["dispatch.dev/job"] == job_id
    wait_for(
        lambda: json.loads(dispatch("status", job_id, "-o", "json").stdout)["state"] == "queued"
    )
    done = dispatch("cancel", job_id, "--reason", "testing", "--wait", "60", "-o", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)
    assert (status["state"], status["cause"]) == ("cancelled", "cancelled")
    assert stored(emulator, "TrainJob") == stored(emulator, "TrainingRuntime") == []
    wait_for(lambda: not background(), timeout=30)  # the supervisor exits once idle

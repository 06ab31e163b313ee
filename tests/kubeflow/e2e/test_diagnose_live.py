"""`dispatch diagnose KIND/NAME --cluster C [--follow]` and `--collect` on the emulator, for a
TrainJob, a bare JobSet and a bare indexed batch Job that nobody made through dispatch.

The emulator runs real controllers (Trainer, JobSet, Job, kubelet) over real HTTP on
loopback; the pods behave as the scenario says. diagnose only reads: the test checks that it
wrote nothing (the request counts of the emulator)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dispatch.adapters.kubeflow.causes.dump import parse_dump
from dispatch.cli.main import cli
from dispatch.testing.k8s import Emulator
from dispatch.testing.k8s.runtimes import torch_strict
from dispatch.testing.k8s.scenario import PodBehaviour, PodRule, Scenario
from tests.emulator.scenario_helpers import JOBSET, cluster, trainjob, wait_for
from tests.kubeflow.e2e.harness import diagnose_config, indexed_job

SCENARIO = Scenario(
    pods=(
        PodRule(PodBehaviour(run_for=2, exit_code=3), index=1, jobset="tj-crash"),
        PodRule(PodBehaviour(run_for=2, exit_code=3), index=1, jobset="tj-recipe"),
        PodRule(PodBehaviour(run_for=2, oom_killed=True), index=1, jobset="js-oom"),
        PodRule(PodBehaviour(run_for=2, exit_code=5), index=1, jobset="bj-exit"),
        PodRule(PodBehaviour(run_for=2, exit_code=5), index=1, jobset="bj-exit2"),
        PodRule(PodBehaviour(run_for=None), jobset="bj-long"),
        PodRule(PodBehaviour(run_for=1, oom_killed=True), index=0, jobset="bj-oom-loop"),
    ),
    default=PodBehaviour(run_for=4),
)


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with cluster(SCENARIO, runtimes=(torch_strict(),), time_scale=100) as emulator:
        yield emulator


@pytest.fixture
def config(tmp_path: Path, emu: Emulator) -> Path:
    return diagnose_config(emu.kubeconfig, tmp_path / "dispatch.yaml")


def jobset(name: str) -> dict[str, Any]:
    pod = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "trainer", "image": "pytorch/pytorch:2.13.0"}],
        }
    }
    job = {"parallelism": 2, "completions": 2, "backoffLimit": 0, "template": pod}
    return {
        "apiVersion": JOBSET,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": job}}]},
    }


def batch_job(name: str, restart: str = "Never", backoff: int = 0) -> dict[str, Any]:
    return indexed_job(name, restart=restart, backoff=backoff)


def diagnose(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config), "diagnose", *args])
    return result.exit_code, result.output


def writes(emu: Emulator) -> int:
    """Requests to the API server that were not reads."""
    served = emu.requests().requests
    return sum(n for (verb, _), n in served.items() if verb not in ("get", "list", "watch"))


CASES = [
    (
        "trainjob/tj-crash",
        lambda: trainjob("tj-crash", "torch-strict", trainer={"numNodes": 2}),
        "app_error",
        (1, 3),
    ),
    ("jobset/js-oom", lambda: jobset("js-oom"), "out_of_memory", (1, 137)),
    ("job/bj-exit", lambda: batch_job("bj-exit"), "app_error", (1, 5)),
]


@pytest.mark.parametrize(("target", "make", "cause", "first"), CASES)
def test_follow_reads_until_the_end_and_prints_the_cause(
    emu: Emulator, config: Path, target: str, make: Any, cause: str, first: tuple[int, int]
) -> None:
    emu.create(make(), "default")
    before = writes(emu)
    code, out = diagnose(
        config, target, "--cluster", "kf", "--follow", "--interval", "1s", "-o", "json"
    )
    assert code == 0, out
    data = json.loads(out)
    kind, name = target.split("/")
    assert data["workload"]["name"] == name
    assert data["workload"]["kind"].lower() == kind
    assert (data["state"], data["cause"]) == ("failed", cause), data["summary"]
    assert (data["firstFailure"]["rank"], data["firstFailure"]["exitCode"]) == first
    assert any(e["key"].startswith("Pod/") for e in data["evidence"])
    assert writes(emu) == before, "diagnose only reads"


def test_an_oom_restarted_in_place_until_the_backoff_limit_is_out_of_memory(
    emu: Emulator, config: Path
) -> None:
    """Rank 0 is OOMKilled, restarted in place (restartPolicy OnFailure) and OOMKilled again
    until the Job's backoffLimit: the restarts were the Job's own plan, the cause is the OOM."""
    emu.create(batch_job("bj-oom-loop", restart="OnFailure", backoff=2), "default")
    code, out = diagnose(
        config, "job/bj-oom-loop", "--cluster", "kf", "--follow", "--interval", "1s", "-o", "json"
    )
    assert code == 0, out
    data = json.loads(out)
    assert (data["state"], data["cause"]) == ("failed", "out_of_memory"), data["summary"]
    assert (data["firstFailure"]["rank"], data["firstFailure"]["exitCode"]) == (0, 137)
    assert "re-run as spec.restartPolicy OnFailure" in data["summary"]


def test_one_read_of_a_running_job_and_text_progress(emu: Emulator, config: Path) -> None:
    emu.create(batch_job("bj-long"), "default")
    wait_for(
        "bj-long running",
        lambda: any(
            (p.get("status") or {}).get("phase") == "Running"
            for p in emu.cluster.store.list(emu.cluster.rtype("v1", "Pod"), "default").items
            if p["metadata"]["name"].startswith("bj-long-")
        ),
    )
    code, out = diagnose(config, "job/bj-long", "--cluster", "kf")
    assert code == 0, out
    assert out.startswith("Job bj-long: running")


def test_collect_writes_a_dump_that_diagnoses_the_same(
    emu: Emulator, config: Path, tmp_path: Path
) -> None:
    emu.create(batch_job("bj-exit2"), "default")
    code, out = diagnose(
        config, "job/bj-exit2", "--cluster", "kf", "--follow", "--interval", "1s", "-o", "json"
    )
    assert code == 0, out
    live = json.loads(out)
    code, dump = diagnose(config, "--collect", "job/bj-exit2", "--cluster", "kf")
    assert code == 0, dump
    path = tmp_path / "dump.yaml"
    path.write_text(dump)
    code, out = diagnose(config, str(path), "--kind", "job", "--name", "bj-exit2", "-o", "json")
    assert code == 0, out
    again = json.loads(out)
    assert (
        (again["state"], again["cause"])
        == (live["state"], live["cause"])
        == ("failed", "app_error")
    )


def test_a_missing_workload_exits_1_and_a_bad_target_says_the_form(
    emu: Emulator, config: Path
) -> None:
    code, out = diagnose(config, "pytorchjob/nope", "--cluster", "kf", "-o", "json")
    assert code == 1, out
    assert "does not exist" in json.loads(out)["error"]
    code, out = diagnose(config, "nope", "--cluster", "kf")
    assert code == 2
    assert "KIND/NAME" in out


KUBECTL = shutil.which("kubectl")


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_the_collect_commands_run_by_kubectl_make_a_dump_diagnose_reads(
    emu: Emulator, config: Path, tmp_path: Path
) -> None:
    """The how-to's recipe, as a user runs it: the printed commands through bash and the real
    kubectl against the emulator, then diagnose on the file they wrote."""
    emu.create(trainjob("tj-recipe", "torch-strict", trainer={"numNodes": 2}), "default")
    code, out = diagnose(
        config,
        "trainjob/tj-recipe",
        "--cluster",
        "kf",
        "--follow",
        "--interval",
        "1s",
        "-o",
        "json",
    )
    assert code == 0, out
    live = json.loads(out)
    code, commands = diagnose(config, "--collect", "trainjob/tj-recipe", "--namespace", "default")
    assert code == 0, commands
    kubectl_dir = Path(str(KUBECTL)).parent
    env = {
        "KUBECONFIG": str(emu.kubeconfig),
        "HOME": str(tmp_path),
        "PATH": f"{kubectl_dir}:/usr/bin:/bin",
    }
    ran = subprocess.run(
        ["bash", "-e", "-c", commands], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    dump = tmp_path / "tj-recipe-dump.yaml"
    kinds = {o["kind"] for o in parse_dump(dump.read_text())}
    assert {"TrainJob", "JobSet", "Job", "Pod", "Event", "Node"} <= kinds, kinds
    code, out = diagnose(config, str(dump), "-o", "json")
    assert code == 0, out
    again = json.loads(out)
    assert (again["state"], again["cause"], again["firstFailure"]) == (
        live["state"],
        live["cause"],
        live["firstFailure"],
    )

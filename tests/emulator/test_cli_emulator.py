"""``dispatch emulator``: a subprocess serving an emulated Kubeflow cluster until a signal."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dispatch.cli.cmd_emulator import describe, render
from dispatch.testing.k8s.kubeflow import kubeflow_cluster_config
from tests.conftest import REPO
from tests.docs.blocks import blocks, commands, missing_output
from tests.docs.conftest import copy_examples

from .emulator_process import KUBECTL, dispatch_command, emulator_process


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def test_serves_until_sigint_then_exits_0_and_removes_its_kubeconfig(tmp_path: Path) -> None:
    with emulator_process(tmp_path, "--nodes", "3") as emu:
        assert emu.info["nodes"] == ["node-1", "node-2", "node-3"]
        assert emu.info["timeScale"] == 1.0
        assert emu.info["runtimes"] == ["torch-distributed"]
        assert emu.info["env"] == {"KUBECONFIG": str(emu.kubeconfig)}
        assert stat.S_IMODE(emu.kubeconfig.stat().st_mode) == 0o600
        runtimes = _get(emu.url + "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes")
        assert [r["metadata"]["name"] for r in runtimes["items"]] == ["torch-distributed"]
        nodes = _get(emu.url + "/api/v1/nodes")["items"]
        assert nodes[0]["status"]["capacity"]["nvidia.com/gpu"] == "8"
        groups = {g["name"] for g in _get(emu.url + "/apis")["groups"]}
        assert "trainer.kubeflow.org" in groups and "kueue.x-k8s.io" not in groups  # no --kueue
        with pytest.raises(urllib.error.HTTPError) as caught:
            _get(emu.url + "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")
        assert caught.value.code == 404
        if KUBECTL is not None:
            got = emu.kubectl(tmp_path, "get", "clustertrainingruntimes")
            assert got.returncode == 0, got.stderr
            assert got.stdout.split()[:3] == ["NAME", "AGE", "torch-distributed"]
        assert emu.stop(signal.SIGINT) == 0
        assert not emu.kubeconfig.exists()


def test_sigterm_stops_it_cleanly_too(tmp_path: Path) -> None:
    with emulator_process(tmp_path, "--time-scale", "10", "-n", "ml-team") as emu:
        assert emu.info["timeScale"] == 10.0
        assert emu.info["namespaces"] == ["default", "ml-team"]
        assert emu.info["dispatchCluster"]["namespace"] == "ml-team"
        assert emu.stop(signal.SIGTERM) == 0
        _, err = emu.proc.communicate()
        assert "Traceback" not in err
        assert not emu.kubeconfig.exists()


def test_kueue_flag_adds_the_quickstart_queues(tmp_path: Path) -> None:
    with emulator_process(tmp_path, "--kueue", "--nodes", "2", "--gpus-per-node", "0") as emu:
        assert emu.info["kueue"] == {"clusterQueue": "cluster-queue", "localQueue": "user-queue"}
        base = emu.url + "/apis/kueue.x-k8s.io/v1beta2"
        queue = _get(base + "/clusterqueues/cluster-queue")
        quota = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        assert {r["name"]: r["nominalQuota"] for r in quota} == {"cpu": "64", "memory": "256Gi"}
        local = _get(base + "/namespaces/default/localqueues/user-queue")
        assert local["spec"]["clusterQueue"] == "cluster-queue"


def test_text_output_names_the_kubeconfig_to_export(tmp_path: Path) -> None:
    """What a person does: read ``export KUBECONFIG=...`` from the output and use it."""
    env = {**os.environ, "DISPATCH_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen(
        [*dispatch_command(), "emulator"], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        exported = ""
        for line in proc.stdout:
            if line.strip().startswith("export KUBECONFIG="):
                exported = line.strip().removeprefix("export KUBECONFIG=")
                break
        kubeconfig = Path(exported)
        assert kubeconfig == tmp_path / "state" / "emulator" / "kubeconfig"
        assert kubeconfig.exists()
        if KUBECTL is not None:
            got = subprocess.run(
                [KUBECTL, "get", "clustertrainingruntimes", "-o", "name"],
                env={**env, "KUBECONFIG": exported, "HOME": str(tmp_path)},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert got.stdout.split() == [
                "clustertrainingruntime.trainer.kubeflow.org/torch-distributed"
            ], got.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        if proc.stdout is not None:
            proc.stdout.close()
    assert not kubeconfig.exists()


def test_a_bad_scenario_is_a_usage_error(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("pods: [{index: 1, exitcode: 3}]\n")
    done = subprocess.run(
        [*dispatch_command(), "emulator", "--scenario", str(scenario)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DISPATCH_STATE_DIR": str(tmp_path / "state")},
        check=False,
    )
    assert done.returncode == 2
    assert "not a scenario: unknown scenario key 'exitcode'" in done.stderr


def test_an_invalid_namespace_is_refused_as_the_api_server_refuses_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [*dispatch_command(), "emulator", "-n", "Team_A", "--kubeconfig", str(tmp_path / "kc")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DISPATCH_STATE_DIR": str(tmp_path / "state")},
        check=False,
    )
    assert done.returncode == 2
    assert 'Namespace "Team_A" is invalid: metadata.name: Invalid value' in done.stderr
    assert not (tmp_path / "kc").exists()


def test_an_existing_kubeconfig_of_the_user_is_left_alone(tmp_path: Path) -> None:
    theirs = tmp_path / "config"
    theirs.write_text("apiVersion: v1\nkind: Config\ncurrent-context: prod\n")
    done = subprocess.run(
        [*dispatch_command(), "emulator", "--kubeconfig", str(theirs)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DISPATCH_STATE_DIR": str(tmp_path / "state")},
        check=False,
    )
    assert done.returncode == 2
    assert "is not a kubeconfig dispatch emulator wrote" in done.stderr
    assert theirs.read_text().endswith("current-context: prod\n")


def test_text_tells_how_to_point_each_client(tmp_path: Path) -> None:
    config = kubeflow_cluster_config(nodes=2, gpus_per_node=8)
    info = describe(
        url="http://127.0.0.1:1234",
        kubeconfig=tmp_path / "kc",
        config=config,
        runtimes=["torch-distributed"],
        kueue=False,
        namespace="default",
        dispatch_config=tmp_path / "config.yaml",
    )
    text = render(info)
    assert f"export KUBECONFIG={tmp_path / 'kc'}" in text
    assert "TrainerClient()" in text
    assert f"      kubeconfig: {tmp_path / 'kc'}\n      namespace: default" in text
    assert "nodes        2 (node-1 .. node-2), each cpu 8, memory 32Gi, nvidia.com/gpu 8" in text


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_a_trainjob_runs_to_completion_at_real_time(tmp_path: Path) -> None:
    """Time runs at 1x by default: a TrainJob's pods run their 5 s and the job completes."""
    with emulator_process(tmp_path) as emu:
        manifest = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "hello"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
        applied = subprocess.run(
            [KUBECTL or "kubectl", "apply", "--validate=false", "-f", "-"],
            input=json.dumps(manifest),
            env=emu.env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
        waited = emu.kubectl(
            tmp_path, "wait", "--for=condition=Complete", "trainjob/hello", "--timeout=30s"
        )
        assert waited.returncode == 0, waited.stderr
        shown = emu.kubectl(tmp_path, "get", "trainjobs").stdout.splitlines()
        assert shown[1].split()[:2] == ["hello", "Complete"]


TUTORIAL = REPO / "docs" / "tutorial" / "kubeflow.md"
ON_EMULATOR = "tests/emulator/test_cli_emulator.py runs it on dispatch emulator"


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
@pytest.mark.timeout(300)
def test_the_kubeflow_tutorial_runs_on_dispatch_emulator(tmp_path: Path) -> None:
    """The tutorial's cluster steps (the console blocks its docs test skips for want of a
    cluster), in order, against ``dispatch emulator -n ml-team``, outputs matched as the docs
    test matches them."""
    runnable = [
        b
        for b in blocks(TUTORIAL)
        if b.language == "console" and ON_EMULATOR in (b.directive("skip") or "")
    ]
    assert len(runnable) >= 3  # kubectl setup, plan, run, get
    workspace = copy_examples(tmp_path / "work")
    with emulator_process(tmp_path, "-n", "ml-team", "--time-scale", "5") as emu:
        env = {
            **os.environ,
            "KUBECONFIG": str(emu.kubeconfig),
            "DISPATCH_STATE_DIR": str(tmp_path / "state"),
            "HOME": str(tmp_path),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        }
        env.pop("DISPATCH_CONFIG", None)
        for block in runnable:
            for command in commands(block):
                done = subprocess.run(
                    ["bash", "-c", command.command],
                    cwd=workspace,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    timeout=180,
                    check=False,
                )
                shown = f"{block.where}: $ {command.command}\n{done.stdout}"
                assert done.returncode == command.exit_code, shown
                missing = missing_output(command.expected, done.stdout)
                assert missing is None, f"expected line not printed: {missing!r}\n{shown}"
        assert emu.stop() == 0

"""What `dispatch diagnose` does with what users actually paste: describe text, files cut
short, several workloads, pods without their workload, standard input; and `--collect`."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from dispatch.cli.cmd_diagnose import describe_text
from dispatch.cli.main import cli
from tests.kubeflow.causes.dumpgen import DUMPS

NOT_DUMPS = DUMPS / "not-dumps"


def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    return result.exit_code, result.output


def error_of(*args: str) -> str:
    code, out = run(*args, "-o", "json")
    assert code == 2, out
    message: str = json.loads(out)["error"]
    return message


def test_describe_output_of_a_pytorchjob_says_what_it_is_and_what_to_run() -> None:
    message = error_of("diagnose", str(NOT_DUMPS / "describe-pytorchjob.txt"))
    assert "this is `kubectl describe` output of PyTorchJob/pytorch-dist-mnist-gloo" in message
    assert "kubectl get pytorchjob pytorch-dist-mnist-gloo -o yaml" in message
    assert "-n kubeflow pytorchjobs.kubeflow.org/pytorch-dist-mnist-gloo" in message
    assert "-l training.kubeflow.org/job-name=pytorch-dist-mnist-gloo" in message
    assert "dispatch diagnose pytorch-dist-mnist-gloo-dump.yaml" in message


def test_describe_output_of_a_pod_names_the_job_that_controls_it() -> None:
    assert describe_text((NOT_DUMPS / "describe-pod.txt").read_text()) == ("Job", "train", "ml")
    message = error_of("diagnose", str(NOT_DUMPS / "describe-pod.txt"))
    assert "output of Job/train" in message
    assert "-l batch.kubernetes.io/job-name=train" in message


def test_yaml_is_never_taken_for_describe_text() -> None:
    for path in DUMPS.rglob("*.yaml"):
        assert describe_text(path.read_text()) is None, path


def test_a_file_cut_short_says_so() -> None:
    message = error_of("diagnose", str(NOT_DUMPS / "truncated-trainjob.yaml"))
    assert "not valid YAML or JSON" in message
    assert "cut short" in message


def test_a_json_list_cut_short_says_so(tmp_path: Path) -> None:
    whole = json.dumps(yaml.safe_load((DUMPS / "oom.yaml").read_text()), default=str)
    path = tmp_path / "cut.json"
    path.write_text(whole[: len(whole) // 2])
    assert "cut short" in error_of("diagnose", str(path))


def test_pods_without_their_workload_are_diagnosed_as_that_workload(tmp_path: Path) -> None:
    listed = yaml.safe_load((DUMPS / "oom.yaml").read_text())
    pods = [item for item in listed["items"] if item["kind"] in ("Pod", "Event")]
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": pods}))
    code, out = run("diagnose", str(path), "-o", "json")
    assert code == 0, out
    data = json.loads(out)
    assert data["workload"]["kind"] == "TrainJob"
    assert data["cause"] == "out_of_memory"


def test_kind_and_name_pick_one_workload_of_several(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    other = (DUMPS / "app-error.yaml").read_text().replace("mnist-ddp-x7k2p-1", "other-1")
    other = re.sub(r"(uid: )(\S+)", r"\1\2-other", other)  # uids are unique in a cluster
    path.write_text((DUMPS / "oom.yaml").read_text() + "---\n" + other)
    code, out = run("diagnose", str(path), "-o", "json")
    assert code == 2
    listed = json.loads(out)["workloads"]
    assert [(w["kind"], w["name"]) for w in listed] == [
        ("TrainJob", "mnist-ddp-x7k2p-1"),
        ("TrainJob", "other-1"),
    ]
    code, out = run("diagnose", str(path), "--kind", "trainjobs", "--name", "other-1", "-o", "json")
    assert code == 0, out
    assert json.loads(out)["cause"] == "app_error"
    # the JobSet of a TrainJob is a workload too, when asked for by name
    code, out = run("diagnose", str(path), "--kind", "jobset", "--name", "other-1", "-o", "json")
    assert code == 0, out
    assert json.loads(out)["workload"]["kind"] == "JobSet"
    assert "holds no PyTorchJob" in error_of("diagnose", str(path), "--kind", "pytorchjob")
    assert "not a workload kind" in error_of("diagnose", str(path), "--kind", "deployment")


def test_standard_input_is_read_with_a_dash() -> None:
    code, out = run("diagnose", "-", "-o", "json", stdin=(DUMPS / "oom.yaml").read_text())
    assert code == 0, out
    assert json.loads(out)["cause"] == "out_of_memory"


def test_collect_prints_commands_that_kubectl_accepts_and_diagnose_reads(tmp_path: Path) -> None:
    code, out = run("diagnose", "--collect", "pytorchjob/bert", "--namespace", "ml")
    assert code == 0, out
    assert "kubectl get -n ml pytorchjobs.kubeflow.org/bert -o yaml" in out
    assert "kubectl get -n ml pods -l training.kubeflow.org/job-name=bert -o yaml" in out
    assert out.rstrip().endswith("> bert-dump.yaml")
    # the lines are one shell group: bash can parse it (kubectl is not run)
    checked = subprocess.run(["bash", "-n"], input=out, text=True, capture_output=True)
    assert checked.returncode == 0, checked.stderr
    code, out = run("diagnose", "--collect", "trainjob/t1", "-o", "json")
    data: dict[str, Any] = json.loads(out)
    assert data["kind"] == "TrainJob"
    assert any("jobsets.jobset.x-k8s.io/t1" in line for line in data["commands"])
    assert any(
        "jobs.batch,pods -l jobset.sigs.k8s.io/jobset-name=t1" in line for line in data["commands"]
    )
    assert "is not KIND/NAME" in error_of("diagnose", "--collect", "bert")


def test_follow_needs_a_cluster_and_a_target_is_needed() -> None:
    assert "needs --cluster" in error_of("diagnose", str(DUMPS / "oom.yaml"), "--follow")
    assert "name a dump FILE" in error_of("diagnose")

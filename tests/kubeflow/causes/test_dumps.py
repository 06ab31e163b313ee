"""`dispatch diagnose FILE --output json` on the dumps in tests/dumps: the cause, the first
failing rank and exit code, the proving evidence, and the contract of spec section 4."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dispatch.cli.main import cli
from tests.kubeflow.causes.dumpgen import DUMPS, SCENARIOS, render

KEYS = {"workload", "trainJob", "state", "cause", "summary", "firstFailure", "evidence"}
EVIDENCE_KEYS = {"kind", "key", "observedAt", "summary", "data"}


@dataclass(frozen=True)
class Expected:
    state: str
    cause: str | None
    #: (rank, exit code) of the first failure, or None when no rank failed
    first: tuple[int, int | None] | None
    #: substrings that must appear among the evidence keys (the proof)
    proofs: tuple[str, ...]
    #: a word the summary must contain
    says: str


CASES: dict[str, Expected] = {
    "kueue-preemption.yaml": Expected(
        "failed",
        "preempted",
        None,
        ("Workload/", "#status.conditions[Evicted]", "#status.conditions[Preempted]"),
        "Preempted",
    ),
    "scheduler-preemption.yaml": Expected(
        "failed",
        "preempted",
        (1, None),
        ("-1-m3k8v#status.conditions[DisruptionTarget]", "-1-m3k8v.", "#Preempted"),
        "scheduler",
    ),
    "drain-eviction.yaml": Expected(
        "failed",
        "preempted",
        (1, None),
        ("-1-z9t5b#status.conditions[DisruptionTarget]",),
        "Eviction API",
    ),
    "spot-shutdown.yaml": Expected(
        "failed",
        "preempted",
        (1, None),
        ("-1-z9t5b#status.conditions[DisruptionTarget]", "-1-z9t5b#status.reason"),
        "shutdown",
    ),
    "node-pressure.yaml": Expected(
        "failed",
        "preempted",
        (1, None),
        ("#status.conditions[DisruptionTarget]", "#Evicted"),
        "low on resource: memory",
    ),
    "node-notready-taint.yaml": Expected(
        "failed",
        "node_lost",
        (1, None),
        ("Node/gpu-node-2#status.conditions[Ready]", "#TaintManagerEviction"),
        "not ready",
    ),
    "node-deleted-podgc.yaml": Expected(
        "failed",
        "node_lost",
        (0, None),
        ("-0-f6g3j#status.conditions[DisruptionTarget]",),
        "PodGC",
    ),
    "oom.yaml": Expected(
        "failed",
        "out_of_memory",
        (0, 137),
        ("-0-r4s9k#status.containerStatuses[node]",),
        "OOMKilled",
    ),
    "deadline.yaml": Expected(
        "failed",
        "timeout",
        None,
        ("TrainJob/mnist-ddp-x7k2p-1#status.conditions[Failed]",),
        "deadline",
    ),
    "unschedulable.yaml": Expected(
        "queued",
        "no_capacity",
        (0, None),
        ("#status.conditions[PodScheduled]",),
        "Insufficient nvidia.com/gpu",
    ),
    "exceeds-max-quota.yaml": Expected(
        "queued",
        "no_capacity",
        None,
        ("Workload/", "#status.conditions[QuotaReserved]"),
        "maximum capacity",
    ),
    "image-pull.yaml": Expected(
        "failed",
        "start_failure",
        (0, None),
        ("-0-d7k3w#status.containerStatuses[node]",),
        "ImagePullBackOff",
    ),
    "missing-init-container.yaml": Expected(
        "failed",
        "start_failure",
        None,
        ("#status.conditions[Admitted]", "#Started"),
        "no pod is in the dump",
    ),
    "app-error.yaml": Expected(
        "failed",
        "app_error",
        (1, 3),
        ("-1-j8l4m#status.containerStatuses[node]",),
        "code 3",
    ),
    "cancel.yaml": Expected(
        "cancelled",
        "cancelled",
        None,
        ("TrainJob/mnist-ddp-x7k2p-1#metadata.deletionTimestamp",),
        "alice",
    ),
    "restart-in-place.yaml": Expected(
        "running",
        "unplanned_recovery",
        (0, 1),
        ("-0-o9p1a#status.containerStatuses[node]",),
        "restart",
    ),
    "replacement-pod.yaml": Expected(
        "running",
        "unplanned_recovery",
        (1, 1),
        ("-1-q8r2t#metadata.creationTimestamp",),
        "second pod",
    ),
    "jobset-restarts.yaml": Expected(
        "running", "unplanned_recovery", None, ("JobSet/", "#Restarting"), "JobSet restarted"
    ),
    "vanished.yaml": Expected(
        "failed", "preempted", (1, None), ("-1-w3e4r.", "#Preempted"), "Preempted"
    ),
    "success.json": Expected(
        "succeeded", None, None, ("#status.conditions[Complete",), "completed"
    ),
}


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def diagnose_json(path: Path | str, *extra: str) -> dict[str, Any]:
    code, out = run("diagnose", str(path), "--output", "json", *extra)
    assert code == 0, out
    data: dict[str, Any] = json.loads(out)
    return data


def test_every_dump_has_a_case() -> None:
    assert {p.name for p in DUMPS.iterdir() if p.suffix in (".yaml", ".json")} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnose_a_dump(name: str) -> None:
    expected = CASES[name]
    data = diagnose_json(DUMPS / name)
    assert set(data) == KEYS
    assert data["trainJob"] == "mnist-ddp-x7k2p-1"
    assert data["workload"] == {
        "kind": "TrainJob",
        "namespace": "ml-team",
        "name": data["trainJob"],
    }
    assert (data["state"], data["cause"]) == (expected.state, expected.cause)
    assert expected.says.lower() in data["summary"].lower()
    assert "\n" not in data["summary"]
    first = data["firstFailure"]
    if expected.first is None:
        assert first is None
    else:
        assert set(first) == {"rank", "pod", "exitCode"}
        assert (first["rank"], first["exitCode"]) == expected.first
        assert first["pod"].startswith("mnist-ddp-x7k2p-1-node-0-")
    keys = [e["key"] for e in data["evidence"]]
    assert data["evidence"], "a diagnosis lists the evidence that proves it"
    for proof in expected.proofs:
        assert any(proof in key for key in keys), (proof, keys)
    for item in data["evidence"]:
        assert set(item) == EVIDENCE_KEYS
        assert item["summary"]


def test_the_dumps_are_what_the_generator_writes() -> None:
    for name, build in SCENARIOS.items():
        path = next(DUMPS.glob(f"{name}.*"))
        assert path.read_text() == render(name, build()), f"regenerate {path.name}"


def test_patience_decides_when_waiting_becomes_no_capacity() -> None:
    # the pods have waited 25 minutes when the dump was taken
    assert diagnose_json(DUMPS / "unschedulable.yaml", "--patience", "1h")["state"] == "queued"
    assert (
        diagnose_json(DUMPS / "unschedulable.yaml", "--patience", "20m")["cause"] == "no_capacity"
    )
    early = diagnose_json(DUMPS / "unschedulable.yaml", "--now", "2026-08-27T10:05:00Z")
    assert (early["state"], early["cause"]) == ("queued", None)
    # ExceedsMaxQuota needs no patience
    quota = diagnose_json(DUMPS / "exceeds-max-quota.yaml", "--patience", "30d")
    assert quota["cause"] == "no_capacity"


def test_an_admitted_workload_without_pods_within_patience_is_queued() -> None:
    data = diagnose_json(DUMPS / "missing-init-container.yaml", "--patience", "1h")
    assert (data["state"], data["cause"]) == ("queued", None)


def test_text_output_names_state_cause_and_first_failure() -> None:
    code, out = run("diagnose", str(DUMPS / "oom.yaml"))
    assert code == 0
    assert "failed (out_of_memory)" in out
    assert "first failure: rank 0" in out
    assert "exit code 137" in out


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    code, out = run("diagnose", str(tmp_path / "missing.yaml"), "-o", "json")
    assert code == 2
    assert "cannot read" in json.loads(out)["error"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("items: [\n  - {unclosed")
    code, out = run("diagnose", str(bad), "-o", "json")
    assert code == 2
    assert "not valid YAML or JSON" in json.loads(out)["error"]


def test_a_dump_without_a_trainjob_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n"
    )
    code, out = run("diagnose", str(path), "-o", "json")
    assert code == 2
    assert "holds no training workload" in json.loads(out)["error"]
    assert "it holds: 1 Pod" in json.loads(out)["error"]
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert run("diagnose", str(empty))[0] == 2


def test_several_trainjobs_need_trainjob(tmp_path: Path) -> None:
    both = (
        (DUMPS / "oom.yaml").read_text()
        + "---\n"
        + (DUMPS / "success.json")
        .read_text()
        .replace("mnist-ddp-x7k2p-1", "other-job-1")
        .split("\n}\n")[0]
        + "\n}\n"
    )
    path = tmp_path / "both.yaml"
    path.write_text(both)
    code, out = run("diagnose", str(path), "-o", "json")
    assert code == 2
    names = [w["name"] for w in json.loads(out)["workloads"]]
    assert names == ["mnist-ddp-x7k2p-1", "other-job-1"]
    chosen = diagnose_json(path, "--trainjob", "mnist-ddp-x7k2p-1")
    assert chosen["cause"] == "out_of_memory"
    assert run("diagnose", str(path), "--trainjob", "nope")[0] == 2


def test_unrelated_objects_in_a_dump_are_ignored(tmp_path: Path) -> None:
    # another TrainJob's preempted pod and its events must not leak into this diagnosis
    stranger = (
        (DUMPS / "scheduler-preemption.yaml").read_text().replace("mnist-ddp-x7k2p-1", "zz-other-1")
    )
    path = tmp_path / "mixed.yaml"
    path.write_text((DUMPS / "oom.yaml").read_text() + "---\n" + stranger)
    data = diagnose_json(path, "--trainjob", "mnist-ddp-x7k2p-1")
    assert data["cause"] == "out_of_memory"
    assert all("zz-other" not in e["key"] for e in data["evidence"])


def test_a_json_stream_and_a_yaml_stream_read_like_a_list(tmp_path: Path) -> None:
    import yaml

    listed = yaml.safe_load((DUMPS / "app-error.yaml").read_text())
    stream = tmp_path / "stream.json"
    stream.write_text("\n".join(json.dumps(item) for item in listed["items"]))
    assert diagnose_json(stream)["firstFailure"]["exitCode"] == 3
    docs = tmp_path / "docs.yaml"
    docs.write_text("".join("---\n" + yaml.safe_dump(item) for item in listed["items"]))
    assert diagnose_json(docs)["cause"] == "app_error"

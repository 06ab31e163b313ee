"""`dispatch check-runtime FILE --output json`: the JSON of spec section 4 and the exit codes
(0 accepted, 1 refused, 2 bad usage or unreadable input)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from dispatch.cli.main import cli
from tests.kubeflow.helpers import CONFIG, RUNTIMES, example_runtime, pod_spec

KEYS = {"runtime", "accepted", "reasons", "weakenedIdentity", "capabilities"}


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    code, out = run(*args, "--output", "json")
    return code, json.loads(out)


def write(tmp_path: Path, runtime: Any, name: str = "runtime.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(runtime) if not isinstance(runtime, str) else runtime)
    return str(path)


def test_an_accepted_runtime(tmp_path: Path) -> None:
    code, data = run_json("check-runtime", str(RUNTIMES / "torch.yaml"))
    assert code == 0
    assert set(data) == KEYS
    assert data["runtime"] == {"kind": "ClusterTrainingRuntime", "name": "torch-dispatch"}
    assert data["accepted"] is True
    assert data["reasons"] == []
    assert data["weakenedIdentity"] is None
    assert set(data["capabilities"]) == {"ProcsPerNode"}
    assert data["capabilities"]["ProcsPerNode"]["supported"] is True
    assert isinstance(data["capabilities"]["ProcsPerNode"]["reason"], str)


def test_a_refused_runtime_names_every_reason(tmp_path: Path) -> None:
    code, data = run_json("check-runtime", str(RUNTIMES / "built-in-torch.yaml"))
    assert code == 1
    assert data["accepted"] is False
    assert [r["rule"] for r in data["reasons"]] == [
        "replicated-jobs",
        "restart-policy",
        "backoff-limit",
    ]
    assert all(set(r) == {"rule", "message"} for r in data["reasons"])


def test_cluster_settings_apply_with_the_verb_level_config() -> None:
    rank = str(RUNTIMES / "torch-rank-restart.yaml")
    code, refused = run_json("check-runtime", rank, "--config", str(CONFIG), "--cluster", "kf")
    assert code == 1
    assert {r["rule"] for r in refused["reasons"]} == {"rank-restart"}
    code, waived = run_json(
        "check-runtime", rank, "--config", str(CONFIG), "--cluster", "kf-rank-restart"
    )
    assert code == 0
    assert waived["weakenedIdentity"].startswith("allowRankRestart: the runtime's trainer job")


def test_the_group_config_and_an_allow_list() -> None:
    code, data = run_json(
        "--config",
        str(CONFIG),
        "check-runtime",
        str(RUNTIMES / "torch-register.yaml"),
        "--cluster",
        "kf-queued",
    )
    assert code == 1
    assert [r["rule"] for r in data["reasons"]] == ["allow-list"]


def test_the_verb_level_config_overrides_the_group_one(tmp_path: Path) -> None:
    code, data = run_json(
        "--config",
        str(tmp_path / "missing.yaml"),
        "check-runtime",
        str(RUNTIMES / "torch.yaml"),
        "--config",
        str(CONFIG),
        "--cluster",
        "kf-register",
    )
    assert code == 1
    assert [r["rule"] for r in data["reasons"]] == ["publish-init-container"]


def test_without_a_cluster_the_defaults_apply() -> None:
    code, data = run_json("check-runtime", str(RUNTIMES / "torch-rank-restart.yaml"))
    assert code == 1
    assert data["weakenedIdentity"] is None


def test_text_output(tmp_path: Path) -> None:
    runtime = example_runtime("plain")
    pod_spec(runtime).pop("restartPolicy")
    code, out = run("check-runtime", write(tmp_path, runtime))
    assert code == 1
    assert "refused (1 reason)" in out
    assert "[restart-policy]" in out
    assert "ProcsPerNode: no" in out


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (None, "cannot read"),
        ("a: [unclosed", "not valid YAML"),
        ("[1, 2]", "not a Trainer runtime"),
        ("kind: Deployment\nmetadata: {name: x}\n", "not a Trainer runtime"),
        ("kind: TrainingRuntime\n", "no metadata.name"),
        ("", "holds 0 documents"),
        ("kind: TrainingRuntime\n---\nkind: TrainingRuntime\n", "holds 2 documents"),
    ],
)
def test_unreadable_input_exits_2(tmp_path: Path, content: str | None, phrase: str) -> None:
    path = tmp_path / "runtime.yaml"
    if content is not None:
        path.write_text(content)
    code, data = run_json("check-runtime", str(path))
    assert code == 2
    assert phrase in data["error"]


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (("--cluster", "nope"), "no cluster named 'nope'"),
        (("--cluster", "local"), "uses the 'local' adapter"),
    ],
)
def test_bad_cluster_exits_2(args: tuple[str, ...], phrase: str) -> None:
    code, data = run_json(
        "check-runtime", str(RUNTIMES / "torch.yaml"), "--config", str(CONFIG), *args
    )
    assert code == 2
    assert phrase in data["error"]


def test_bad_cluster_settings_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "clusters:\n  - name: kf\n    adapter: kubeflow\n    allowRankRestrat: true\n"
    )
    code, data = run_json(
        "check-runtime", str(RUNTIMES / "torch.yaml"), "--config", str(config), "--cluster", "kf"
    )
    assert code == 2
    assert "did you mean 'allowRankRestart'" in data["error"]


def test_missing_argument_is_bad_usage() -> None:
    code, _ = run("check-runtime")
    assert code == 2


def test_json_input_is_read_too(tmp_path: Path) -> None:
    path = tmp_path / "runtime.json"
    path.write_text(json.dumps(example_runtime("torch")))
    code, data = run_json("check-runtime", str(path))
    assert code == 0 and data["accepted"] is True

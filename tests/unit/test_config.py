from __future__ import annotations

from pathlib import Path

import pytest

from dispatch.config import LOCAL, load_config, parse_config, state_dir
from dispatch.model import ConfigError

DESIGN_CONFIG = """
clusters:
  - name: prod
    adapter: kubeflow
    kubeconfig: ~/.kube/config
    context: prod-admin
    namespace: ml-team
    runtimes: [torch-distributed, dispatch-kind]
    allowRankRestart: false
    publish: {via: env}
    queue: team-a
  - name: hpc
    adapter: slurm
    transport: local
    partition: gpu
"""


def test_the_design_example(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(DESIGN_CONFIG)
    config = load_config(file)
    assert sorted(config.clusters) == ["hpc", LOCAL, "prod"]
    prod = config.cluster("prod")
    assert prod.adapter == "kubeflow"
    assert prod.setting("namespace") == "ml-team"
    assert prod.setting("publish") == {"via": "env"}
    assert config.cluster("local").adapter == "local"


def test_local_always_exists_without_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPATCH_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent-dispatch-test")
    config = load_config()
    assert list(config.clusters) == [LOCAL]


def test_a_named_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_dispatch_config_env_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(DESIGN_CONFIG)
    monkeypatch.setenv("DISPATCH_CONFIG", str(file))
    assert "prod" in load_config().clusters


def test_unknown_cluster_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="known clusters: local"):
        parse_config(None).cluster("prod")


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ([1, 2], "must be a mapping"),
        ({"cluster": []}, "unknown top-level"),
        ({"clusters": {"a": 1}}, "must be a list"),
        ({"clusters": [{"name": "Prod", "adapter": "slurm"}]}, "lowercase"),
        ({"clusters": [{"name": "prod"}]}, "needs `adapter:`"),
        (
            {"clusters": [{"name": "a", "adapter": "slurm"}, {"name": "a", "adapter": "slurm"}]},
            "used twice",
        ),
    ],
)
def test_bad_configurations(data: object, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_config(data)


def test_state_dir_honours_the_environment(tmp_path: Path) -> None:
    assert state_dir({"DISPATCH_STATE_DIR": str(tmp_path)}) == tmp_path


def test_records_location_env_then_config_then_state_dir(tmp_path: Path) -> None:
    from dispatch.config import records_location

    config = parse_config({"records": "postgresql://team@db.example/records"})
    plain = parse_config({"clusters": []})
    state = tmp_path / "state"
    assert records_location(plain, state, {}) == str(state / "records.sqlite3")
    assert records_location(config, state, {}) == "postgresql://team@db.example/records"
    chosen = {"DISPATCH_RECORDS": "postgresql://me@other/db"}
    assert records_location(config, state, chosen) == "postgresql://me@other/db"
    with pytest.raises(ConfigError, match="`records` must be a postgresql:// URL or a file path"):
        parse_config({"records": 3})


def test_supervision_is_local_or_remote_and_never_reaches_the_adapter() -> None:
    config = parse_config(
        {"clusters": [{"name": "prod", "adapter": "kubeflow", "supervision": "remote"}]}
    )
    prod = config.cluster("prod")
    assert (prod.supervision, prod.supervised_here, dict(prod.settings)) == ("remote", False, {})
    assert config.cluster(LOCAL).supervised_here
    with pytest.raises(ConfigError, match="supervision is 'elsewhere'; write local"):
        parse_config({"clusters": [{"name": "a", "adapter": "slurm", "supervision": "elsewhere"}]})
    with pytest.raises(ConfigError, match="its supervision is local"):
        parse_config({"clusters": [{"name": "b", "adapter": "local", "supervision": "remote"}]})


def test_a_records_url_of_another_kind_is_refused_with_the_two_that_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dispatch.records import open_records

    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    with pytest.raises(ConfigError, match=r"mysql://\.\.\. is not a store dispatch knows"):
        open_records("mysql://me:secret@db/records")
    assert not list(here.rglob("*"))  # no SQLite file made of the URL

"""Input nobody vetted (issue 26): every case gets a clear error naming the problem, in
bounded time, never a traceback. Each failed before the change."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dispatch.adapters.kubeflow.api.client import Connection
from dispatch.cli.main import cli
from dispatch.config import ClusterConfig, load_config
from dispatch.model import ConfigError, yaml12
from dispatch.model.spec import InvalidSpec, parse_spec, parse_spec_text

#: the classic 9 x 9 levels "billion laughs": a few hundred bytes, 9^9 strings when expanded
LAUGHS = "lol: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)
)
JOB = "name: hostile\ncommand: [echo, hi]\n"


def yaml_error(text: str) -> str:
    with pytest.raises(yaml12.YAMLError) as raised:
        yaml12.load(text)
    return str(raised.value)


def test_an_alias_bomb_is_refused_before_anything_walks_it() -> None:
    assert len(LAUGHS) < 600
    assert "aliases would expand this document by" in yaml_error(LAUGHS)
    with pytest.raises(yaml12.YAMLError):
        list(yaml12.load_all("a: 1\n---\n" + LAUGHS))


def test_a_few_aliases_are_still_read() -> None:
    assert yaml12.load("base: &b {x: 1}\nc: *b\nd: {<<: *b, y: 2}") == {
        "base": {"x": 1},
        "c": {"x": 1},
        "d": {"x": 1, "y": 2},
    }


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("a: !!int abc", "is not a valid tag:yaml.org,2002:int"),
        ("a: !!float x", "is not a valid tag:yaml.org,2002:float"),
        ("a: !!timestamp nope", "is not a valid tag:yaml.org,2002:timestamp"),
        ("[" * 5000, "nesting depth"),
        ("a: " + "{b: " * 300 + "1" + "}" * 300, "levels deep"),
        ("a: &a [*a]", "refers to a value that contains it"),
        ("a: 1\nb: 2\na: 3", "the key 'a' is given twice"),
        ("a: !!python/object/apply:os.system [id]", "could not determine a constructor"),
    ],
)
def test_malformed_yaml_is_one_error_type(text: str, phrase: str) -> None:
    assert phrase in yaml_error(text)


def test_yaml_1_2_scalars_no_implicit_timestamps() -> None:
    assert yaml12.load("a: 2026-13-45\nb: 2026-01-01\non: [x]") == {
        "a": "2026-13-45",
        "b": "2026-01-01",
        "on": ["x"],
    }


def problems(text: str) -> str:
    with pytest.raises(InvalidSpec) as raised:
        parse_spec_text(text)
    return str(raised.value)


@pytest.mark.parametrize(
    ("extra", "phrase"),
    [
        ("nodes: true", "nodes: is true, not a whole number"),
        ("procsPerNode: false", "procsPerNode: is false, not a whole number"),
        ("nodes: 10000\nprocsPerNode: 1024", "10,240,000 ranks; at most 131,072"),
        ("resources: {memory: 16Ei}", "more memory than a 64-bit byte count holds"),
        ("resources: {memory: 9223372036854775808}", "more than a 64-bit byte count holds"),
        ('workingDir: "/tmp/a\\0b"', "workingDir: contains a NUL character"),
        ('env: {A: "x\\0y"}', "value of 'A' contains a NUL character"),
        ('args: ["a\\0"]', "args: contains a NUL character"),
        ("name: twice", "the key 'name' is given twice"),
    ],
)
def test_spec_bounds_are_refused_with_the_field_named(extra: str, phrase: str) -> None:
    assert phrase in problems(JOB + extra)


def test_the_echo_of_a_huge_value_is_bounded() -> None:
    huge: dict[str, Any] = {"name": "x", "command": ["x"], "nodes": list(range(10**6))}
    with pytest.raises(InvalidSpec) as raised:
        parse_spec(huge)
    assert len(str(raised.value)) < 400


def test_config_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\xff\xfe clusters")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_config(path)


@pytest.mark.parametrize(("value", "phrase"), [("abc", "not a number"), (True, "not a number")])
def test_numeric_settings_name_the_cluster_and_key(value: Any, phrase: str) -> None:
    cluster = ClusterConfig("box", "local", {"killGrace": value})
    with pytest.raises(ConfigError, match=f"cluster 'box': killGrace is .* {phrase}"):
        cluster.number("killGrace", 5.0)
    with pytest.raises(ConfigError, match="at least 1"):
        ClusterConfig("box", "memory", {"maxNodes": 0}).whole_number("maxNodes", 64)
    assert ClusterConfig("box", "local", {}).number("killGrace", 5.0) == 5.0


def test_a_kubeconfig_path_too_long_is_a_config_error(tmp_path: Path) -> None:
    connection = Connection(Path("/" + "a" * 5000), None)
    with pytest.raises(ConfigError, match=r"cannot be read \(File name too long\)") as raised:
        asyncio.run(connection.configuration())
    assert len(str(raised.value)) < 400


@pytest.mark.parametrize("verb", ["logs", "cancel", "status"])
def test_an_empty_job_prefix_matches_nothing(verb: str, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(JOB)
    runner = CliRunner()
    assert runner.invoke(cli, ["submit", str(spec), "--hold"]).exit_code == 0
    result = runner.invoke(cli, [verb, ""])
    assert result.exit_code != 0
    assert "no job named" in result.output

"""What bench/fuzz_text.py found (issue 26): each input below is the one a fuzz case made, cut
to what matters. Each gave a traceback, a crash, or an answer that echoed the input whole
(megabytes of message) or took seconds, before the change; now a short, clear refusal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.kubeflow.causes.dump import parse_dump
from dispatch.adapters.kubeflow.planning.rules import MAX_REASONS, check_runtime
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings, settings_from_mapping
from dispatch.adapters.local.adapter import LocalAdapter
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.cli.main import cli
from dispatch.config import ClusterConfig, load_config, parse_config
from dispatch.model import ConfigError, InvalidSpec, parse_spec, parse_spec_text, yaml12
from dispatch.model.errors import MAX_LISTED
from dispatch.model.shown import show
from dispatch.model.units import parse_cpu, parse_duration, quantity_value

JOB = "name: found\ncommand: [python, train.py]\n"
#: YAML reads 0x and any number of hex digits as one integer; Python will not print it
HUGE_HEX = "0x" + "f" * 5000
HUGE = int("f" * 5000, 16)


def refusal(text: str) -> str:
    with pytest.raises(InvalidSpec) as raised:
        parse_spec_text(text)
    return str(raised.value)


def test_a_huge_integer_in_a_spec_is_named_not_a_traceback() -> None:
    # spec case 61: ValueError "Exceeds the limit (4300 digits)" from the message's repr
    message = refusal(JOB + f"nodes: {HUGE_HEX}")
    assert "nodes: " in message
    assert "<an integer of about 6,021 digits>" in message


def test_a_spec_lists_its_first_problems_and_counts_the_rest() -> None:
    # spec case 261: `command: [1, 1, ...]` x 300,000 gave a 35 MB message in 5.6 s
    with pytest.raises(InvalidSpec) as raised:
        parse_spec({"name": "x", "command": [1] * 1000})
    total = raised.value.total
    assert total >= 1000  # one per item, and what follows from them
    assert len(raised.value.problems) == MAX_LISTED
    assert str(raised.value).startswith(f"{total:,} problems in the job spec:")
    assert f"and {total - MAX_LISTED:,} more: fix these first" in str(raised.value)
    assert len(str(raised.value)) < 3000


def test_a_long_value_in_a_spec_is_not_echoed_whole() -> None:
    # spec case 213: a 100 KB timeLimit was quoted whole in the message
    message = refusal(JOB + f"timeLimit: {'é' * 100_000}")
    assert "timeLimit:" in message and len(message) < 400


def test_yaml_text_past_the_bound_is_refused_before_it_is_parsed() -> None:
    # spec case 221, config case 5: 3 MB of keys took 2.5 to 6 s before a refusal
    text = "{" + ", ".join(f"k{i}: {i}" for i in range(40_000)) + "}"
    assert len(text) > yaml12.MAX_TEXT
    with pytest.raises(yaml12.YAMLError, match="characters long, more than the 262,144 read"):
        yaml12.load(text)
    assert "more than the 262,144 read" in refusal(text)
    assert len(yaml12.load(text, max_chars=None)) == 40_000  # dumps read any length


def test_a_config_file_past_the_bound_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("clusters:\n" + "#" * yaml12.MAX_TEXT)
    with pytest.raises(ConfigError, match="characters long"):
        load_config(path)


@pytest.mark.parametrize("value", [10**400, "9" * 400 + "s"], ids=["int", "text"])
def test_a_duration_past_any_wait_is_a_value_error(value: Any) -> None:
    # a kubeflow `patience: 99...9` (or an integer past float's range) was an OverflowError
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)
    with pytest.raises(ConfigError, match="`patience` must be a duration"):
        settings_from_mapping({"patience": value}, cluster="kf")


def test_numbers_past_float_s_range_are_refused_not_overflowed() -> None:
    with pytest.raises(ValueError, match="cpu must be a positive, finite number"):
        parse_cpu(HUGE)
    assert quantity_value(HUGE) == 0  # was ValueError from str() of a 6,000-digit integer


@pytest.mark.parametrize("value", [HUGE, float("inf")], ids=["huge", "inf"])
def test_a_local_numeric_setting_must_be_finite(value: Any, tmp_path: Path) -> None:
    # killGrace: <6,000 digits> was an OverflowError; .inf was taken (a stop that never kills)
    cluster = ClusterConfig("box", "local", {"killGrace": value})
    with pytest.raises(
        ConfigError, match=r"cluster 'box': killGrace is .*, not a number"
    ) as raised:
        LocalAdapter(cluster, AdapterContext(state_dir=tmp_path))
    assert len(str(raised.value)) < 200


@pytest.mark.parametrize("value", [HUGE, float("inf"), float("nan")], ids=["huge", "inf", "nan"])
def test_a_slurm_interval_must_be_finite(value: Any, tmp_path: Path) -> None:
    cluster = ClusterConfig("hpc", "slurm", {"pollInterval": value})
    with pytest.raises(ConfigError, match="pollInterval must be a positive number of seconds"):
        SlurmSettings.from_cluster(cluster, tmp_path)


def test_slurm_settings_with_keys_of_several_types_are_named(tmp_path: Path) -> None:
    # sorted() of {1, "b"} was a TypeError
    cluster = ClusterConfig("hpc", "slurm", {1: "a", "bogus": 2})
    with pytest.raises(ConfigError, match="unknown setting '1'; unknown setting 'bogus'"):
        SlurmSettings.from_cluster(cluster, tmp_path)


def test_kubeflow_settings_with_a_huge_integer_key_are_named() -> None:
    # str() of the key, for the "did you mean", was a ValueError
    with pytest.raises(ConfigError, match="unknown setting <an integer of about"):
        settings_from_mapping({HUGE: 1}, cluster="kf")


def test_kubeflow_settings_do_not_echo_a_huge_value() -> None:
    # config case 312: `publish.via: [[...]]` was quoted whole (129 KB)
    with pytest.raises(ConfigError, match=r"publish\.via` must be env or initContainer") as raised:
        settings_from_mapping({"publish": {"via": [list(range(100_000))]}}, cluster="kf")
    assert len(str(raised.value)) < 300


def test_a_config_lists_its_first_problems_and_counts_the_rest() -> None:
    # config case 24: `clusters: [0, 1, ..., 2000]` gave one problem each (55 KB)
    with pytest.raises(ConfigError, match=r"; and 1,990 more$") as raised:
        parse_config({"clusters": list(range(2000))})
    assert len(str(raised.value)) < 1000


def test_a_cluster_name_is_at_most_63_characters() -> None:
    with pytest.raises(ConfigError, match="at most 63 characters") as raised:
        parse_config({"clusters": [{"name": "a" * 100_000, "adapter": "local"}]})
    assert len(str(raised.value)) < 300
    assert "a" * 63 in parse_config({"clusters": [{"name": "a" * 63, "adapter": "local"}]}).clusters


def test_check_runtime_does_not_echo_a_huge_kind(tmp_path: Path) -> None:
    # runtime case 117: a 1 MB `kind:` was quoted whole by `dispatch check-runtime`
    path = tmp_path / "runtime.yaml"
    path.write_text(f"kind: {'y' * 100_000}\nmetadata: {{name: x}}\n")
    result = CliRunner().invoke(cli, ["check-runtime", str(path), "--output", "json"])
    assert result.exit_code == 2
    assert "is not a Trainer runtime" in result.output and len(result.output) < 400


def test_a_runtime_verdict_lists_its_first_reasons_and_counts_the_rest() -> None:
    # runtime case 656: `replicatedJobs: [0, 1, ..., 999]` gave a reason each (274 KB)
    raw = {
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "x" * 100_000},
        "spec": {"mlPolicy": {"torch": {}}, "template": {"spec": {"replicatedJobs": list(range(1000))}}},
    }  # fmt: skip
    verdict = check_runtime(raw, KubeflowSettings())
    assert len(verdict.reasons) == MAX_REASONS + 1
    assert (
        verdict.reasons[-1].message.startswith("and ")
        and "more reasons" in verdict.reasons[-1].message
    )
    assert all(len(r.message) < 600 for r in verdict.reasons)


def test_a_dump_error_does_not_echo_a_megabyte_line() -> None:
    # dump case 93: yaml_rs quotes the line it stopped on; it was 1 MB long
    with pytest.raises(ValueError, match="not valid YAML or JSON") as raised:
        parse_dump("kind: List\nitems: [\n" + "x" * 1_000_000 + ": : :\n")
    assert len(str(raised.value)) < 2000


def test_a_dump_alias_bomb_is_refused_at_a_small_bound() -> None:
    # dump case 138 took 1.6 s to reach yaml_rs's own bound (1,000,000 replayed events);
    # this one, 9^6 values, stayed under it and was expanded whole
    lines = ["l0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"l{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 6)]
    with pytest.raises(ValueError, match="alias replay limit exceeded"):
        parse_dump("\n".join(lines) + "\nkind: Pod\n")
    assert parse_dump("a: &a [1, 2]\nb: [*a, *a]\nkind: Pod") == [
        {"a": [1, 2], "b": [[1, 2], [1, 2]], "kind": "Pod"}
    ]


def test_a_dump_nested_100_000_levels_is_refused_not_a_segfault() -> None:
    # dump case 1243: yaml_rs overflowed its stack (SIGSEGV) past ~10,000 block levels
    with pytest.raises(ValueError, match="nesting depth"):
        parse_dump("kind: List\nitems:\n  " + "- " * 100_000 + "x\n")


def test_show_is_short_and_never_raises() -> None:
    assert show(HUGE) == "<an integer of about 6,021 digits>"
    assert len(show("x" * 10**6)) <= 60
    assert show([1] * 10**6) == "[1, 1, 1, 1, ...]"


def test_env_problems_are_listed_short() -> None:
    # spec case 3389: `env: {k0: 0, k1: 1, ...}` x 10,000 gave one problem each (767 KB)
    env: dict[Any, Any] = {f"k{i}": i for i in range(10_000)}
    message = refusal(JOB + f"env: {env}".replace("'", ""))
    assert 'quote it in YAML, e.g. k0: "0"' in message
    assert "; and 9,995 more" in message and len(message) < 1500


def test_a_huge_key_or_value_in_env_is_not_echoed_whole() -> None:
    data = {"name": "x", "command": ["x"], "env": {"K" * 100_000: HUGE}, "y" * 100_000: 1}
    with pytest.raises(InvalidSpec) as raised:
        parse_spec(data)
    assert "<an integer of about 6,021 digits>" in str(raised.value)
    assert "yyy..." in str(raised.value) and len(str(raised.value)) < 1500


@pytest.mark.parametrize("value", [HUGE, "bogus"], ids=["huge", "unknown"])
def test_local_memory_enforcement_must_be_a_known_mode(value: Any, tmp_path: Path) -> None:
    # a huge integer was a ValueError from str(); an unknown word was taken as auto
    cluster = ClusterConfig("box", "local", {"memoryEnforcement": value})
    with pytest.raises(ConfigError, match=r"memoryEnforcement is .*; write auto, cgroup or"):
        LocalAdapter(cluster, AdapterContext(state_dir=tmp_path))

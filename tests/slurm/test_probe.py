"""Capabilities from recorded Slurm 22.05 configuration outputs, and refusals for specs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.adapters.slurm.probe import (
    ClusterFacts,
    answers,
    parse_config_output,
    parse_nodes_output,
    parse_partitions_output,
    parse_slurm_minutes,
    parse_version_output,
    refusals,
)
from dispatch.model import parse_spec

RECORDED = Path(__file__).parent / "recorded"


def facts() -> ClusterFacts:
    def read(name: str) -> str:
        return (RECORDED / name).read_text()

    return ClusterFacts(
        version=parse_version_output(read("sinfo-version-22.05.txt")),
        config=parse_config_output(read("scontrol-show-config-22.05.txt")),
        partitions=parse_partitions_output(read("scontrol-show-partition-22.05.txt")),
        nodes=parse_nodes_output(read("scontrol-show-node-22.05.txt")),
    )


def spec(**fields: object) -> object:
    return parse_spec({"name": "x", "command": ["true"], **fields})


def test_recorded_installation() -> None:
    found = facts()
    assert found.version_text == "22.05.8"
    assert not found.has_accounting
    assert found.jobcomp_file == "/scratch/slurm/jobcomp.txt"
    debug = found.partition(None)
    assert debug is not None
    assert (debug.name, debug.nodes, debug.max_minutes) == ("debug", ("xn1", "xn2"), None)
    assert [(n.name, n.cpus, n.memory_mib, n.gpus) for n in found.nodes] == [
        ("xn1", 2, 4000, 0),
        ("xn2", 2, 4000, 0),
    ]


def test_answers_carry_reasons() -> None:
    found = {a.name: a for a in answers(facts(), "auto")}
    assert not found["accounting"].supported
    assert "squeue --json and the jobcomp file" in found["accounting"].reason
    assert not found["gpus"].supported
    assert found["partition:debug"].supported
    assert all(a.reason for a in found.values())
    assert {a.name: a for a in answers(facts(), "sacct")}["accounting"].supported


def test_a_spec_that_fits_is_not_refused() -> None:
    assert refusals(facts(), spec(nodes=2, procsPerNode=2), None) == ()  # type: ignore[arg-type]


def test_every_refusal_is_named_at_once() -> None:
    too_big = spec(nodes=3, procsPerNode=3, resources={"gpu": 1, "memory": "8Gi"})
    rules = [r.rule for r in refusals(facts(), too_big, None)]  # type: ignore[arg-type]
    assert rules == [
        "slurm-too-many-nodes",
        "slurm-no-gpus",
        "slurm-too-many-cpus",
        "slurm-too-much-memory",
    ]


def test_unknown_partition_and_time_limit() -> None:
    found = facts()
    unknown = refusals(found, spec(), "gpu")  # type: ignore[arg-type]
    assert [r.rule for r in unknown] == ["slurm-partition-unknown"]
    assert "debug" in unknown[0].message
    limited = replace(found, partitions=(replace(found.partitions[0], max_minutes=30),))
    rules = [r.rule for r in refusals(limited, spec(timeLimit="2h"), None)]  # type: ignore[arg-type]
    assert rules == ["slurm-time-limit"]


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("UNLIMITED", None), ("30", 30), ("1:00:00", 60), ("2-00:00:00", 2880), ("05:30", 6)],
)
def test_slurm_time_limits(text: str, minutes: int | None) -> None:
    assert parse_slurm_minutes(text) == minutes


def test_gpus_in_gres() -> None:
    nodes = parse_nodes_output(
        "NodeName=g1 CPUTot=64 RealMemory=512000 Gres=gpu:a100:4(S:0-1),gpu:v100:2 State=IDLE\n"
    )
    assert nodes[0].gpus == 6

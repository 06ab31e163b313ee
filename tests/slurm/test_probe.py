"""Capabilities from recorded Slurm 22.05 configuration outputs, and refusals for specs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.adapters.slurm.formats import parse_formats_output
from dispatch.adapters.slurm.probe import (
    ClusterFacts,
    answers,
    json_refusal,
    parse_config_output,
    parse_nodes_output,
    parse_partitions_output,
    parse_slurm_minutes,
    parse_version_output,
    refusals,
)
from dispatch.model import parse_spec

RECORDED = Path(__file__).parent / "recorded"


def read(name: str) -> str:
    return (RECORDED / name).read_text()


def facts(release: str = "22.05") -> ClusterFacts:
    """The facts of a recorded installation (22.05 has no ``squeue --json=list``)."""
    listed = RECORDED / f"squeue-json-list-{release}.txt"
    return ClusterFacts(
        version=parse_version_output(read(f"sinfo-version-{release}.txt")),
        config=parse_config_output(read(f"scontrol-show-config-{release}.txt")),
        partitions=parse_partitions_output(read(f"scontrol-show-partition-{release}.txt")),
        nodes=parse_nodes_output(read(f"scontrol-show-node-{release}.txt")),
        json_formats=parse_formats_output(listed.read_text()) if listed.exists() else (),
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


def test_recorded_installation_of_24_11() -> None:
    found = facts("24.11")
    assert found.version_text == "24.11.7"
    assert found.config["AccountingStorageType"] == "(null)"  # no accounting, shown so
    assert not found.has_accounting
    assert found.jobcomp_file == "/scratch/slurm/jobcomp.txt"
    assert found.json_formats == ("v0.0.40", "v0.0.41", "v0.0.42")
    assert (found.json_format, found.json_argument) == ("v0.0.42", "v0.0.42")
    assert [(p.name, p.default, p.nodes) for p in found.partitions] == [
        ("debug", True, ("xn1", "xn2")),
        ("urgent", False, ("xn1", "xn2")),
    ]
    # the same nodes as sinfo --json describes them
    shown = json.loads(read("sinfo-24.11.json"))["sinfo"]
    by_node = {
        row["nodes"]["nodes"][0]: (row["cpus"]["total"], row["memory"]["minimum"]) for row in shown
    }
    assert [(n.name, n.cpus, n.memory_mib, n.gpus) for n in found.nodes] == [
        (name, cpus, memory, 0) for name, (cpus, memory) in sorted(by_node.items())
    ]
    assert by_node == {"xn1": (2, 6000), "xn2": (2, 6000)}
    answered = {a.name: a for a in answers(found, "auto")}
    assert answered["slurm"].reason == (
        "Slurm 24.11.7 (sinfo --version); squeue --json=v0.0.42 (offered: v0.0.40, v0.0.41, "
        "v0.0.42)"
    )
    assert "squeue --json and the jobcomp file" in answered["accounting"].reason


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


# --- the JSON format of squeue --json -------------------------------------------------------


def with_version(version: tuple[int, int, int], listed: tuple[str, ...] = ()) -> ClusterFacts:
    return replace(facts(), version=version, json_formats=listed)


def test_the_formats_squeue_lists() -> None:
    listed = "data_parser/v0.0.42\ndata_parser/v0.0.40\ndata_parser/v0.0.41\n"
    assert parse_formats_output(listed) == ("v0.0.40", "v0.0.41", "v0.0.42")
    assert parse_formats_output("") == ()


@pytest.mark.parametrize(
    ("version", "listed", "chosen", "argument"),
    [
        # 22.05: --json takes no argument and prints v0.0.38
        ((22, 5, 8), (), "v0.0.38", None),
        # 24.11 offers three; the newest dispatch reads is asked for by name
        ((24, 11, 7), ("v0.0.40", "v0.0.41", "v0.0.42"), "v0.0.42", "v0.0.42"),
        # 25.11 offers two that dispatch reads and two it does not
        ((25, 11, 7), ("v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"), "v0.0.42", "v0.0.42"),
    ],
)
def test_the_newest_format_dispatch_reads_is_chosen(
    version: tuple[int, int, int], listed: tuple[str, ...], chosen: str, argument: str | None
) -> None:
    found = with_version(version, listed)
    assert (found.json_format, found.json_argument, found.has_squeue_json) == (
        chosen,
        argument,
        True,
    )
    assert json_refusal(found) is None
    slurm = {a.name: a for a in answers(found, "auto")}["slurm"]
    assert slurm.supported
    assert chosen in slurm.reason


@pytest.mark.parametrize(
    ("version", "listed", "offered"),
    [
        ((23, 2, 7), ("v0.0.39",), "v0.0.39"),  # 23.02's only format, never seen here
        ((26, 5, 3), ("v0.0.43", "v0.0.44", "v0.0.45"), "v0.0.43, v0.0.44, v0.0.45"),
        ((21, 8, 8), (), "v0.0.37"),  # implied by the release, as for 22.05
        ((24, 11, 7), (), "none"),  # squeue --json=list listed nothing
    ],
)
def test_an_installation_offering_no_known_format_is_refused_naming_both(
    version: tuple[int, int, int], listed: tuple[str, ...], offered: str
) -> None:
    found = with_version(version, listed)
    assert (found.json_format, found.has_squeue_json) == (None, False)  # scontrol show job
    refused = refusals(found, spec(), None)  # type: ignore[arg-type]
    assert [r.rule for r in refused] == ["slurm-json-format"]
    message = refused[0].message
    assert f"Slurm {found.version_text} offers" in message
    assert f"(data_parser) {offered};" in message
    assert "v0.0.38 (Slurm 22.05)" in message and "v0.0.42 (Slurm 24.11 to 26.05)" in message
    slurm = {a.name: a for a in answers(found, "auto")}["slurm"]
    assert (slurm.supported, slurm.reason) == (False, message)


def test_before_squeue_json_scontrol_is_read_and_nothing_is_refused() -> None:
    found = with_version((20, 11, 9))
    assert (found.json_format, found.has_squeue_json, json_refusal(found)) == (None, False, None)
    assert "scontrol show job" in {a.name: a for a in answers(found, "auto")}["slurm"].reason

"""What a Slurm installation offers, parsed from its own tools, and what that means for a spec.

``ClusterFacts`` is built from four outputs (``sinfo --version``, ``scontrol show config``,
``scontrol -o show partition``, ``scontrol -o show node``), and from 23.02 on a fifth:
``squeue --json=list``, the JSON formats (data_parser versions) the build offers. The status
reads use the newest of those that dispatch reads (``formats``); an installation offering
none is refused (``slurm-json-format``). ``answers`` and ``refusals`` are pure
functions of the facts (and a spec), each with its reason. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from dispatch.adapters.slurm.formats import (
    JSON_CHOICE_SINCE,
    chosen_format,
    format_refusal,
    offered_formats,
)
from dispatch.adapters.slurm.native import expand_hostlist
from dispatch.adapters.slurm.parsers import SlurmOutputError, parse_key_values
from dispatch.adapters.slurm.script import layout
from dispatch.model import Capability, JobSpec, Reason

NO_ACCOUNTING = "accounting_storage/none"
#: how ``scontrol show config`` shows that there is no accounting: 22.05 names the plugin,
#: 24.11 (which reads that setting as "unset") prints ``(null)``
NO_ACCOUNTING_SHOWN = frozenset({"", "(null)", NO_ACCOUNTING})
JOBCOMP_FILE = "jobcomp/filetxt"


@dataclass(frozen=True, slots=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    max_nodes: int | None  # None: unlimited
    max_minutes: int | None  # None: unlimited
    default: bool
    state: str


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    cpus: int
    memory_mib: int
    gpus: int
    state: str


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    version: tuple[int, int, int]
    config: Mapping[str, str]
    partitions: tuple[Partition, ...]
    nodes: tuple[Node, ...]
    #: what ``squeue --json=list`` listed (23.02 and later; empty before)
    json_formats: tuple[str, ...] = ()

    @property
    def version_text(self) -> str:
        major, minor, micro = self.version
        return f"{major}.{minor:02d}.{micro}"

    @property
    def accounting_storage(self) -> str:
        return self.config.get("AccountingStorageType", NO_ACCOUNTING)

    @property
    def has_accounting(self) -> bool:
        return self.accounting_storage not in NO_ACCOUNTING_SHOWN

    @property
    def jobcomp_file(self) -> str | None:
        """The job completion file, when Slurm writes one (``jobcomp/filetxt``)."""
        if self.config.get("JobCompType") == JOBCOMP_FILE and self.config.get("JobCompLoc"):
            return self.config["JobCompLoc"]
        return None

    @property
    def offered_json_formats(self) -> tuple[str, ...]:
        """The ``squeue --json`` formats this installation can print (oldest first)."""
        return offered_formats(self.version, self.json_formats)

    @property
    def json_format(self) -> str | None:
        """The newest offered format that dispatch reads; None when there is none."""
        return chosen_format(self.offered_json_formats)

    @property
    def json_argument(self) -> str | None:
        """What ``squeue --json=`` is given; None where ``--json`` takes no argument."""
        return self.json_format if self.version >= JSON_CHOICE_SINCE else None

    @property
    def has_squeue_json(self) -> bool:
        """Whether job states are read with ``squeue --json`` (else ``scontrol show job``)."""
        return self.json_format is not None

    def partition(self, name: str | None) -> Partition | None:
        """The named partition, or the default one when ``name`` is None."""
        if name is None:
            return next((p for p in self.partitions if p.default), None)
        return next((p for p in self.partitions if p.name == name), None)

    def nodes_of(self, partition: Partition) -> list[Node]:
        return [n for n in self.nodes if n.name in partition.nodes]


def parse_version_output(text: str) -> tuple[int, int, int]:
    """``slurm 22.05.8`` (or ``slurm-wlm 22.05.8``) -> (22, 5, 8)."""
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        raise SlurmOutputError(f"no Slurm version in {text.strip()[:100]!r}")
    return (int(match.group(1)), int(match.group(2)), int(match.group(3)))


def json_refusal(facts: ClusterFacts) -> Reason | None:
    """Why dispatch refuses this installation's JSON output (``formats.format_refusal``)."""
    return format_refusal(facts.version, facts.version_text, facts.offered_json_formats)


def parse_config_output(text: str) -> dict[str, str]:
    """``scontrol show config``: ``Key = value`` lines -> dict."""
    config = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            config[key.strip()] = value.strip()
    return config


def parse_slurm_minutes(text: str) -> int | None:
    """A Slurm time limit in minutes: ``UNLIMITED``/``INFINITE`` -> None, ``30``, ``1:00:00``,
    ``2-00:00:00``. Seconds round up."""
    value = text.strip().upper()
    if value in ("UNLIMITED", "INFINITE", "NONE", ""):
        return None
    days, _, clock = value.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:
        hours, minutes, seconds = [*parts, 0, 0, 0][:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    elif len(parts) == 2:
        hours, minutes, seconds = 0, parts[0], parts[1]
    else:
        hours, minutes, seconds = 0, parts[0], 0
    total = (int(days or 0) * 24 + hours) * 60 + minutes
    return total + (1 if seconds else 0)


def parse_partitions_output(text: str) -> tuple[Partition, ...]:
    partitions = []
    for line in text.splitlines():
        fields = parse_key_values(line)
        if "PartitionName" not in fields:
            continue
        max_nodes = fields.get("MaxNodes", "UNLIMITED")
        partitions.append(
            Partition(
                name=fields["PartitionName"],
                nodes=tuple(expand_hostlist(fields.get("Nodes", ""))),
                max_nodes=int(max_nodes) if max_nodes.isdigit() else None,
                max_minutes=parse_slurm_minutes(fields.get("MaxTime", "UNLIMITED")),
                default=fields.get("Default") == "YES",
                state=fields.get("State", "UP"),
            )
        )
    return tuple(partitions)


def _gpus(gres: str) -> int:
    """GPUs in a node's Gres: ``gpu:4``, ``gpu:a100:2(S:0-1),gpu:v100:1`` -> 4, 3."""
    total = 0
    for item in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = item.split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def parse_nodes_output(text: str) -> tuple[Node, ...]:
    nodes = []
    for line in text.splitlines():
        fields = parse_key_values(line)
        if "NodeName" not in fields:
            continue
        nodes.append(
            Node(
                name=fields["NodeName"],
                cpus=int(fields.get("CPUTot", "0") or 0),
                memory_mib=int(fields.get("RealMemory", "0") or 0),
                gpus=_gpus(fields.get("Gres", "")),
                state=fields.get("State", ""),
            )
        )
    return tuple(nodes)


def answers(facts: ClusterFacts, accounting_mode: str) -> tuple[Capability, ...]:
    """The cluster's yes/no answers, each with the reason."""
    refused = json_refusal(facts)
    found = [
        Capability(
            "slurm",
            refused is None,
            refused.message if refused is not None else _version_reason(facts),
        ),
        Capability(
            "accounting",
            uses_sacct(facts, accounting_mode),
            _accounting_reason(facts, accounting_mode),
        ),
        Capability(
            "gpus",
            any(n.gpus for n in facts.nodes),
            f"{sum(n.gpus for n in facts.nodes)} GPUs in the nodes' Gres"
            if any(n.gpus for n in facts.nodes)
            else "no node has a gpu Gres",
        ),
        Capability("procsPerNode", True, "srun starts procsPerNode tasks per node"),
        Capability("hold", True, "sbatch --hold, scontrol hold and scontrol release"),
        Capability(
            "identity",
            True,
            "jobs are submitted with --no-requeue: Slurm never reruns a rank inside an attempt",
        ),
    ]
    for partition in facts.partitions:
        limit = "unlimited" if partition.max_minutes is None else f"{partition.max_minutes} min"
        found.append(
            Capability(
                f"partition:{partition.name}",
                partition.state == "UP",
                f"{len(partition.nodes)} nodes, MaxNodes "
                f"{partition.max_nodes or 'unlimited'}, MaxTime {limit}, state {partition.state}"
                + (" (default)" if partition.default else ""),
            )
        )
    return tuple(found)


def _version_reason(facts: ClusterFacts) -> str:
    reason = f"Slurm {facts.version_text} (sinfo --version)"
    if facts.json_argument is not None:
        offered = ", ".join(facts.offered_json_formats)
        return f"{reason}; squeue --json={facts.json_argument} (offered: {offered})"
    if facts.json_format is not None:
        return f"{reason}; squeue --json prints data_parser {facts.json_format}"
    return f"{reason}; no squeue --json before 21.08: scontrol show job"


def uses_sacct(facts: ClusterFacts, accounting_mode: str) -> bool:
    if accounting_mode == "none":
        return False
    return accounting_mode == "sacct" or facts.has_accounting


def _accounting_reason(facts: ClusterFacts, accounting_mode: str) -> str:
    fallback = "squeue --json" if facts.has_squeue_json else "scontrol show job"
    if facts.jobcomp_file:
        fallback += " and the jobcomp file"
    if accounting_mode == "none":
        return f"disabled by the cluster setting accounting: none; outcomes from {fallback}"
    if uses_sacct(facts, accounting_mode):
        return f"AccountingStorageType={facts.accounting_storage}: outcomes from sacct"
    return f"AccountingStorageType={facts.accounting_storage}: outcomes from {fallback}"


def refusals(facts: ClusterFacts, spec: JobSpec, partition_name: str | None) -> tuple[Reason, ...]:
    """Every reason this spec cannot run in this partition (empty when it can); an
    installation whose JSON format dispatch does not read is refused whatever the spec."""
    refused = json_refusal(facts)
    found = _spec_refusals(facts, spec, partition_name)
    return (refused, *found) if refused is not None else found


def _spec_refusals(
    facts: ClusterFacts, spec: JobSpec, partition_name: str | None
) -> tuple[Reason, ...]:
    partition = facts.partition(partition_name)
    if partition is None:
        known = ", ".join(p.name for p in facts.partitions) or "none"
        what = f"no partition {partition_name!r}" if partition_name else "no default partition"
        return (
            Reason(
                "slurm-partition-unknown",
                f"{what} on this cluster (partitions: {known}); set queue or the cluster's "
                "partition",
            ),
        )
    reasons = []
    nodes = facts.nodes_of(partition)
    shape = layout(spec)
    if spec.nodes > len(partition.nodes):
        reasons.append(
            Reason(
                "slurm-too-many-nodes",
                f"the job asks for {spec.nodes} nodes; partition {partition.name} has "
                f"{len(partition.nodes)}",
            )
        )
    elif partition.max_nodes is not None and spec.nodes > partition.max_nodes:
        reasons.append(
            Reason(
                "slurm-too-many-nodes",
                f"the job asks for {spec.nodes} nodes; partition {partition.name} allows at "
                f"most {partition.max_nodes} per job (MaxNodes)",
            )
        )
    if shape.gpus_per_node:
        most = max((n.gpus for n in nodes), default=0)
        if most == 0:
            reasons.append(
                Reason(
                    "slurm-no-gpus",
                    f"the job asks for {shape.gpus_per_node} GPUs per node; no node of "
                    f"partition {partition.name} has a gpu Gres",
                )
            )
        elif shape.gpus_per_node > most:
            reasons.append(
                Reason(
                    "slurm-too-many-gpus",
                    f"the job asks for {shape.gpus_per_node} GPUs per node; nodes of "
                    f"partition {partition.name} have at most {most}",
                )
            )
    cpus_needed = shape.tasks_per_node * (shape.cpus_per_task or 1)
    if nodes and cpus_needed > max(n.cpus for n in nodes):
        reasons.append(
            Reason(
                "slurm-too-many-cpus",
                f"the job needs {cpus_needed} CPUs per node; nodes of partition "
                f"{partition.name} have at most {max(n.cpus for n in nodes)}",
            )
        )
    if shape.memory_mib and nodes and shape.memory_mib > max(n.memory_mib for n in nodes):
        reasons.append(
            Reason(
                "slurm-too-much-memory",
                f"the job asks for {shape.memory_mib} MiB per node; nodes of partition "
                f"{partition.name} have at most {max(n.memory_mib for n in nodes)} MiB",
            )
        )
    if (
        shape.minutes
        and partition.max_minutes is not None
        and shape.minutes > partition.max_minutes
    ):
        reasons.append(
            Reason(
                "slurm-time-limit",
                f"timeLimit is {shape.minutes} min; partition {partition.name} allows at most "
                f"{partition.max_minutes} min (MaxTime)",
            )
        )
    return tuple(reasons)

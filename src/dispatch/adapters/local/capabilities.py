"""What the local scheduler can do on this machine (probed once) and what it refuses.

``probe_machine`` does the I/O; ``report`` is a pure function of the probe and a spec.
Decisions recorded here:

* GPUs: counted from ``/proc/driver/nvidia/gpus``; a spec asking for more per node than the
  machine has is refused (``local-gpu``). Nothing pins GPUs to ranks yet.
* Memory (``resources.memory``, per node): a cgroup per node where this process may create
  memory cgroups, else a watchdog summing the RSS of the node's processes every 0.25 s
  (RSS counts shared pages once per process, so it over-estimates). Either way a node over
  its limit ends the attempt as ``out_of_memory``. The cluster setting
  ``memoryEnforcement: cgroup`` makes a missing cgroup a refusal instead (``local-memory``).
* ``image``, ``queue`` and ``runtime`` are ignored with a note: local processes run on this
  machine's software. ``resources.cpu`` is not enforced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dispatch.adapters.local import cgroups
from dispatch.model import Capability, CapabilityReport, JobSpec, Reason

NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


@dataclass(frozen=True, slots=True)
class Probe:
    """What was found on this machine."""

    gpus: int
    memory_mode: str  # "cgroup-v1", "cgroup-v2" or "watchdog"
    memory_reason: str
    cpus: int


def probe_machine(setting: str = "auto") -> Probe:
    """Count GPUs and CPUs, and find how per-node memory limits can be enforced here.

    ``setting`` is the cluster's ``memoryEnforcement``: ``auto`` (default), ``cgroup``
    (require cgroups) or ``watchdog`` (never use cgroups).
    """
    try:
        gpus = len(list(NVIDIA_GPUS.iterdir()))
    except OSError:
        gpus = 0
    cpus = os.cpu_count() or 1
    if setting == "watchdog":
        return Probe(gpus, "watchdog", "memoryEnforcement: watchdog (RSS sum every 0.25 s)", cpus)
    parent = cgroups.find_memory_parent()
    problem = cgroups.probe(parent)
    if parent is None or problem is not None:
        reason = f"{problem}; a watchdog sums the RSS of each node's processes every 0.25 s"
        return Probe(gpus, "watchdog", reason, cpus)
    return Probe(gpus, f"cgroup-v{parent.version}", parent.describe(), cpus)


def report(
    cluster: str,
    probe: Probe,
    spec: JobSpec | None,
    *,
    setting: str = "auto",
    probed_at: float | None = None,
) -> CapabilityReport:
    """The cluster's answers and, for ``spec``, the refusals that apply to it."""
    answers = (
        Capability(
            "ProcsPerNode",
            True,
            "dispatch starts procsPerNode processes per node, or torchrun does for torchrun commands",
        ),
        Capability(
            "MultiNode",
            True,
            "each node is a process group on this machine; nodes meet on 127.0.0.1",
        ),
        Capability(
            "GPU",
            probe.gpus > 0,
            f"{probe.gpus} NVIDIA GPU(s) found"
            if probe.gpus
            else "no NVIDIA GPU found on this machine",
        ),
        Capability("MemoryLimit", True, f"{probe.memory_mode}: {probe.memory_reason}"),
        Capability("TimeLimit", True, "the attempt runner stops the attempt when timeLimit passes"),
        Capability("Cancel", True, "SIGTERM to every process, SIGKILL after the grace period"),
        Capability("Hold", False, "local attempts start at once"),
        Capability("Image", False, "processes run on this machine's software; image is ignored"),
        Capability("Queue", False, "there is no queue; queue is ignored"),
        Capability("CpuLimit", False, "resources.cpu is not enforced"),
    )
    refusals: list[Reason] = []
    if spec is not None:
        if spec.resources.gpu > probe.gpus:
            refusals.append(
                Reason(
                    "local-gpu",
                    f"resources.gpu asks for {spec.resources.gpu} GPU(s) per node; this machine "
                    f"has {probe.gpus}. Set gpu: 0 or use a cluster with GPUs",
                )
            )
        if spec.resources.memory and setting == "cgroup" and probe.memory_mode == "watchdog":
            refusals.append(
                Reason(
                    "local-memory",
                    f"memoryEnforcement is cgroup but {probe.memory_reason}",
                )
            )
    return CapabilityReport(
        cluster=cluster,
        adapter="local",
        answers=answers,
        refusals=tuple(refusals),
        probed_at=probed_at,
    )


def notes(spec: JobSpec) -> tuple[str, ...]:
    """What the local scheduler ignores in ``spec``, said in the plan."""
    found = []
    if spec.image:
        found.append(f"image {spec.image!r} is ignored: local processes run in this environment")
    if spec.queue:
        found.append(f"queue {spec.queue!r} is ignored: the local scheduler has no queues")
    if spec.runtime:
        found.append("runtime is ignored: it applies to Kubeflow clusters only")
    if spec.resources.cpu:
        found.append(f"resources.cpu {spec.resources.cpu!r} is not enforced locally")
    return tuple(found)

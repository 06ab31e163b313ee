"""Per-node memory limits with Linux memory cgroups (v1 or v2). Standard library only.

A node's group is created beside nothing else, under the cgroup the runner itself is in, so
no privileges beyond write access to that cgroup are needed. Where that is not possible
(no memory controller, read-only cgroupfs, v2 without delegation) ``find_memory_parent``
returns None and the runner falls back to its RSS watchdog. The kernel counts OOM kills per
group (``oom_kill`` in ``memory.oom_control`` on v1, ``memory.events`` on v2): that counter is
the evidence that turns a SIGKILL into ``out_of_memory``.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from dispatch.adapters.local.launchfile import AttemptLaunch

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the runner starts faster
if TYPE_CHECKING:
    from typing import Any

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, slots=True)
class MemoryParent:
    """The cgroup under which node groups are made, and the cgroup version it belongs to."""

    version: int
    path: Path

    def describe(self) -> str:
        return f"cgroup v{self.version} memory controller under {self.path}"


@dataclass(frozen=True, slots=True)
class NodeCgroup:
    """One node's memory cgroup."""

    version: int
    path: Path

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this group for exceeding its limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self.procs_file.read_text().split()]
        except OSError:
            return []

    def remove(self) -> None:
        """Remove the group once it is empty; a busy or missing group is left alone."""
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _own_paths() -> tuple[str | None, str | None]:
    """This process's cgroup path in the v1 memory hierarchy and in the v2 hierarchy."""
    v1 = v2 = None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None, None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if "memory" in controllers.split(","):
            v1 = path
        elif parts[0] == "0" and controllers == "":
            v2 = path
    return v1, v2


def _mounts() -> list[tuple[str, str, set[str]]]:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 4:
            found.append((fields[2], fields[1], set(fields[3].split(","))))
    return found


def find_memory_parent() -> MemoryParent | None:
    """Where this process may create memory cgroups, or None when it cannot."""
    v1_path, v2_path = _own_paths()
    for fstype, mount, options in _mounts():
        if fstype == "cgroup" and "memory" in options and v1_path is not None:
            candidate = Path(mount) / v1_path.lstrip("/")
            if candidate.is_dir() and os.access(candidate, os.W_OK):
                return MemoryParent(1, candidate)
    for fstype, mount, _ in _mounts():
        if fstype == "cgroup2" and v2_path is not None:
            candidate = Path(mount) / v2_path.lstrip("/")
            try:
                controllers = (candidate / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if "memory" in controllers and os.access(candidate, os.W_OK):
                return MemoryParent(2, candidate)
    return None


def create_node_cgroup(parent: MemoryParent, name: str, limit_bytes: int) -> NodeCgroup:
    """A fresh group named ``name`` limited to ``limit_bytes`` (swap included where the kernel
    allows). Raises ``OSError`` when the group cannot be made or limited; nothing is left."""
    path = parent.path / _SAFE.sub("-", name)
    if path.exists():
        # a leftover of a runner that died: it is empty or its processes are strays to stop
        path.rmdir()
    if parent.version == 2:
        subtree = parent.path / "cgroup.subtree_control"
        if "memory" not in subtree.read_text().split():
            subtree.write_text("+memory")
    path.mkdir()
    group = NodeCgroup(parent.version, path)
    try:
        if parent.version == 1:
            (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
            with contextlib.suppress(OSError):  # no swap accounting: the limit above suffices
                (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        else:
            (path / "memory.max").write_text(str(limit_bytes))
            with contextlib.suppress(OSError):
                (path / "memory.swap.max").write_text("0")
    except OSError:
        group.remove()
        raise
    return group


def probe(parent: MemoryParent | None) -> str | None:
    """None when node groups can be made and limited under ``parent``, else why not."""
    if parent is None:
        return "no writable memory cgroup found for this process"
    try:
        group = create_node_cgroup(parent, f"dispatch-probe-{os.getpid()}", 64 << 20)
    except OSError as exc:
        return f"cannot create a memory cgroup under {parent.path}: {exc.strerror or exc}"
    group.remove()
    return None


def setup_node_groups(
    launch: AttemptLaunch,
) -> tuple[dict[int, NodeCgroup], dict[str, Any]]:
    """Node groups when the launch asks for a memory limit and cgroups can be made, with the
    enforcement mode for ``status.json``; ``watchdog`` mode (no groups) otherwise."""
    limit = launch.memory_bytes
    if limit is None:
        return {}, {"mode": "none", "limitBytes": None}
    if launch.memory_mode != "watchdog":
        parent = find_memory_parent()
        groups: dict[int, NodeCgroup] = {}
        try:
            if parent is None:
                raise OSError("no writable memory cgroup")
            base = f"dispatch-{launch.job_id}-a{launch.attempt}"
            for node in range(launch.nodes):
                groups[node] = create_node_cgroup(parent, f"{base}-node{node}", limit)
            return groups, {"mode": f"cgroup-v{parent.version}", "limitBytes": limit}
        except OSError as exc:
            for group in groups.values():
                group.remove()
            note = f"cgroups unavailable ({exc}); using the RSS watchdog"
            return {}, {"mode": "watchdog", "limitBytes": limit, "note": note}
    return {}, {"mode": "watchdog", "limitBytes": limit}

"""Per-rank output of an attempt, read from its log files (``OutputReader``).

Per-rank mode writes one log per rank (``logs/rank-<r>.log``). Under torchrun, dispatch starts
one process per node and torchrun multiplexes the node's ranks into it, so the ranks of a node
share ``logs/node-<k>.log``: asking for rank ``r`` yields its node's log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from dispatch.adapters.local.launchfile import AttemptLaunch
from dispatch.model import NotFound


def log_files(launch: AttemptLaunch, root: Path, rank: int | None) -> list[tuple[str, Path]]:
    """(prefix, file) for one rank, or for every log of the attempt when ``rank`` is None."""
    world = launch.nodes * launch.procs_per_node
    if rank is not None and not 0 <= rank < world:
        raise NotFound(f"attempt {launch.attempt} of {launch.job_id} has ranks 0..{world - 1}")
    files = []
    for process in launch.processes:
        if rank is not None:
            owns = (
                process.rank == rank
                if process.rank is not None
                else (process.node == rank // launch.procs_per_node)
            )
            if owns:
                return [("", root / process.log)]
            continue
        label = f"rank {process.rank}" if process.rank is not None else f"node {process.node}"
        files.append((f"[{label}] ", root / process.log))
    return files


async def read_lines(
    files: list[tuple[str, Path]],
    *,
    follow: bool,
    ended: Callable[[], bool],
    sleep: Callable[[float], Awaitable[None]],
    interval: float = 0.2,
) -> AsyncIterator[str]:
    """Complete lines of ``files``, prefixed; with ``follow``, until ``ended()`` and drained."""
    offsets = dict.fromkeys((path for _, path in files), 0)
    partial = dict.fromkeys(offsets, b"")
    while True:
        done = ended() if follow else True  # decide before reading, so nothing is missed
        for prefix, path in files:
            try:
                with open(path, "rb") as handle:
                    handle.seek(offsets[path])
                    data = handle.read()
            except FileNotFoundError:
                continue
            offsets[path] += len(data)
            lines = (partial[path] + data).split(b"\n")
            partial[path] = lines.pop()
            for line in lines:
                yield prefix + line.decode("utf-8", errors="replace")
            if done and partial[path]:
                yield prefix + partial[path].decode("utf-8", errors="replace")
                partial[path] = b""
        if done:
            return
        await sleep(interval)

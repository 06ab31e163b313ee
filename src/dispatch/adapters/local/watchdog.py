"""The runner's watchdog: a forked process that stops an attempt's leftovers if the runner dies.

Standard library and psutil only. The runner forks it first thing and keeps the write end of
a pipe; the watchdog blocks reading the other end. The runner writes ``DONE`` when it has
finished (every process of the attempt stopped and reaped). End of file without ``DONE``
means the runner died (SIGKILL, crash): the runner's direct children die with it through
their parent-death signal, and the watchdog kills whatever else carries the attempt's tag or
sits in its node cgroups, then records ``lost.json`` so observers learn what happened.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence

from dispatch.adapters.local import procs
from dispatch.adapters.local.cgroups import NodeCgroup
from dispatch.adapters.local.files import AttemptPaths, create_json, touch
from dispatch.adapters.local.launchfile import TAG_ENV

DONE = b"d"


def fork_watchdog(
    paths: AttemptPaths, tag: str, cgroups: Sequence[NodeCgroup], close: Sequence[int] = ()
) -> tuple[int, int]:
    """Fork the watchdog; returns (its pid, the fd to write ``DONE`` to). The watchdog closes
    the fds in ``close`` (the runner's, which must end with the runner)."""
    read_end, write_end = os.pipe()
    runner_pid = os.getpid()
    pid = os.fork()
    if pid != 0:
        os.close(read_end)
        return pid, write_end
    # --- the watchdog ---
    code = 0
    try:
        os.close(write_end)
        for fd in close:
            os.close(fd)
        os.setpgid(0, 0)  # not stopped by a kill aimed at the runner's process group
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        if os.read(read_end, 1) != DONE:
            _clean_up(paths, tag, cgroups, runner_pid)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _clean_up(
    paths: AttemptPaths, tag: str, cgroups: Sequence[NodeCgroup], runner_pid: int
) -> None:
    """Kill everything left of the attempt; record what was done."""
    at = time.time()
    killed: set[int] = set()
    for _ in range(3):  # processes may fork while being killed; sweep until quiet
        victims = {p.pid for p in procs.tagged(tag, TAG_ENV)}
        for group in cgroups:
            victims.update(group.pids())
        victims.discard(os.getpid())
        if not victims:
            break
        procs.signal_pids(victims, signal.SIGKILL)
        killed |= victims
        time.sleep(0.1)
    create_json(
        paths.lost,
        {"at": at, "runnerPid": runner_pid, "killed": sorted(killed), "by": "watchdog"},
    )
    touch(paths.changed)
    for _ in range(20):
        for group in cgroups:
            group.remove()
        if not any(g.path.exists() for g in cgroups):
            break
        time.sleep(0.1)

"""Process control for the attempt runner: parent-death signals, subreaping, group kills.

Standard library and psutil only. Guarantees the runner builds on:

* every process the runner starts gets ``PR_SET_PDEATHSIG=SIGKILL``: it dies with the runner;
* the runner is a child subreaper, so processes its ranks start and abandon (torchrun's
  workers, which torchrun puts in sessions of their own) are re-parented to the runner and
  stay in its process tree, where ``descendants`` finds them;
* every such process carries ``DISPATCH_LOCAL_TAG``, so ``tagged`` finds leftovers of an
  attempt even after its runner was killed;
* a number is acted on only while it still names the attempt's process: a process group is
  signalled only while one of the runner's descendants is in it (``signal_group``: once a
  group is empty, the system may give its id to another program's group), and the runner is
  signalled through a pidfd opened before checking it is the runner (``signal_runner``), so
  a pid reused in between is never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    return int(_libc.prctl(option, value, 0, 0, 0)) == 0


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process. False where Linux refuses."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def child_setup(parent_pid: int, cgroup_procs: Path | None) -> Callable[[], None]:
    """A ``preexec_fn``: die with the parent, and join the node's cgroup when there is one.

    Runs in the forked child before exec; the runner is single-threaded, so this is safe.
    """

    def setup() -> None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before the signal was armed
            os._exit(1)
        if cgroup_procs is not None:
            with open(cgroup_procs, "w") as handle:
                handle.write(str(os.getpid()))

    return setup


def descendants(pid: int) -> list[psutil.Process]:
    """Every live process below ``pid`` (children, grandchildren, …)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def tagged(tag: str, env_name: str) -> list[psutil.Process]:
    """Every live process whose environment has ``env_name=tag`` (slow: reads each environ)."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(env_name) == tag:
                found.append(process)
    return found


def signal_group(pgid: int, sig: int, *, owner: int) -> bool:
    """Send ``sig`` to a process group while it still holds a descendant of ``owner`` (the
    runner); True when sent. A group that is gone, or whose id now names another program's
    group, is left alone."""
    ours = False
    for process in descendants(owner):
        with contextlib.suppress(ProcessLookupError, PermissionError, psutil.Error):
            ours = ours or os.getpgid(process.pid) == pgid
    if not ours:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    return True


def signal_runner(pid: int, attempt_dir: Path, module: str, sig: int) -> bool:
    """Send ``sig`` to ``pid`` only if it is the runner of ``attempt_dir``; True when sent.
    The process is pinned (a pidfd) before it is checked, so a pid reused meanwhile is never
    signalled; where pidfds are missing, it is checked and then signalled by number."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except (AttributeError, OSError):  # no pidfd here (old kernel, other systems)
        if not is_runner(pid, attempt_dir, module):
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        return True
    try:
        if not is_runner(pid, attempt_dir, module):
            return False
        with contextlib.suppress(ProcessLookupError):  # it just ended
            signal.pidfd_send_signal(pidfd, sig)
        return True
    finally:
        os.close(pidfd)


def signal_pids(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def rss_total(pids: Iterable[int]) -> int:
    """Sum of resident set sizes (over-counts pages shared between the processes)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_info().rss
    return total


def is_runner(pid: int, attempt_dir: Path, module: str) -> bool:
    """True when ``pid`` is the runner of ``attempt_dir`` (guards against a reused pid).

    A process whose command line reads empty is taken to be in the middle of ``exec`` (Linux
    shows an empty ``/proc/<pid>/cmdline`` for a moment right after a spawn) and counts.
    """
    try:
        process = psutil.Process(pid)
        cmdline = process.cmdline()
        if not cmdline:
            return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
    return module in cmdline and str(attempt_dir) in cmdline

"""A pid or process group id is acted on only while it still names the attempt's process:
numbers are reused once their process (or every process of the group) ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from dispatch.adapters.local import procs

MODULE = "dispatch.adapters.local.runner"


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def foreign() -> Iterator[int]:
    """Another program's process group (its leader is no descendant of this process)."""
    shell = "setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!"
    pid = int(subprocess.run(["sh", "-c", shell], capture_output=True, check=True).stdout)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_group_holding_no_process_of_the_runner_is_not_signalled(foreign: int) -> None:
    assert foreign not in {p.pid for p in procs.descendants(os.getpid())}
    assert os.getpgid(foreign) == foreign
    assert procs.signal_group(foreign, signal.SIGTERM, owner=os.getpid()) is False
    assert not _gone(foreign)


def test_a_group_of_the_runner_is_signalled() -> None:
    rank = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert procs.signal_group(rank.pid, signal.SIGTERM, owner=os.getpid()) is True
        assert rank.wait(timeout=10) == -signal.SIGTERM
    finally:
        rank.kill()
        rank.wait()


def test_a_pid_that_is_not_the_runner_is_not_signalled(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "60"])
    try:
        for _ in range(500):  # past exec: an empty command line counts as a runner starting
            if psutil.Process(other.pid).cmdline():
                break
            time.sleep(0.01)
        assert procs.signal_runner(other.pid, tmp_path, MODULE, signal.SIGTERM) is False
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_the_runner_is_signalled(tmp_path: Path) -> None:
    # a stand-in with the runner's command line: the module and the attempt's folder
    wait = "import sys, time; time.sleep(60)"
    runner = subprocess.Popen([sys.executable, "-c", wait, MODULE, str(tmp_path)])
    try:
        for _ in range(500):  # until its command line reads as the runner's
            if (
                procs.is_runner(runner.pid, tmp_path, MODULE)
                and psutil.Process(runner.pid).cmdline()
            ):
                break
            time.sleep(0.01)
        assert procs.signal_runner(runner.pid, tmp_path, MODULE, signal.SIGTERM) is True
        assert runner.wait(timeout=10) == -signal.SIGTERM
    finally:
        runner.kill()
        runner.wait()

"""Fixtures for the local scheduler's tests: real processes, tiny torch-free scripts."""

from __future__ import annotations

import asyncio
import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.local import LocalAdapter
from dispatch.config import ClusterConfig
from dispatch.model import AttemptHandle, Job, Observation, parse_spec

#: a rank script: records its pid, pgid and parent, then behaves as the env asks
RANK_SCRIPT = """
import os, signal, subprocess, sys, time
rank = os.environ.get("RANK", "n" + os.environ["PET_NODE_RANK"])
out = os.environ["OUT"]
with open(os.path.join(out, f"pid-{rank}"), "w") as f:
    f.write(f"{os.getpid()} {os.getpgid(0)} {os.getppid()}")
with open(os.path.join(out, "starts"), "a") as f:
    f.write(f"{rank}\\n")
if os.environ.get("GRANDCHILD"):
    # like torchrun's workers: a child in a session of its own
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             start_new_session=True)
    with open(os.path.join(out, f"grandchild-{rank}"), "w") as f:
        f.write(str(child.pid))
print(f"rank {rank} of {os.environ.get('WORLD_SIZE')} attempt {os.environ['DISPATCH_ATTEMPT']}",
      flush=True)
if rank == os.environ.get("FAIL_RANK"):
    time.sleep(float(os.environ.get("FAIL_AFTER", "0.3")))
    with open(os.path.join(out, "failed-at"), "w") as f:
        f.write(repr(time.time()))
    sys.exit(int(os.environ.get("FAIL_CODE", "3")))
if os.environ.get("GROW"):
    blocks = []
    while True:
        blocks.append(bytearray(20 * 1024 * 1024))
        time.sleep(0.05)
time.sleep(float(os.environ.get("SLEEP", "0.2")))
"""


def rank_pids(out: Path) -> dict[str, int]:
    """rank name -> pid, from what the ranks recorded."""
    return {p.name[4:]: int(p.read_text().split()[0]) for p in out.glob("pid-*")}


def rank_info(out: Path, rank: str) -> tuple[int, int, int]:
    pid, pgid, ppid = (int(x) for x in (out / f"pid-{rank}").read_text().split())
    return pid, pgid, ppid


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


class Harness:
    """A local adapter over a temporary state dir, and a job factory writing scripts there."""

    def __init__(self, root: Path, settings: dict[str, Any] | None = None) -> None:
        self.root = root
        self.state = root / "state" / "local"
        self.out = root / "out"
        self.out.mkdir(parents=True, exist_ok=True)
        (root / "rank.py").write_text(textwrap.dedent(RANK_SCRIPT))
        self.settings = {"killGrace": 2.0, **(settings or {})}
        self.adapter = self.new_adapter()

    def new_adapter(self) -> LocalAdapter:
        """A fresh instance, as another process would make it."""
        cluster = ClusterConfig("local", "local", self.settings)
        return LocalAdapter(cluster, AdapterContext(state_dir=self.state))

    def job(self, job_id: str = "job-1", **fields: Any) -> Job:
        env = {"OUT": str(self.out), **fields.pop("env", {})}
        spec = {
            "name": "t",
            "nodes": 1,
            "procsPerNode": 2,
            "command": ["python", "rank.py"],
            "workingDir": str(self.root),
            "env": env,
            **fields,
        }
        return Job(job_id, parse_spec(spec), 0.0)

    def run(self, coroutine: Any) -> Any:
        return asyncio.run(coroutine)

    def start(self, job: Job, attempt: int = 1) -> AttemptHandle:
        return self.run(self.adapter.start(job, attempt))

    def observe(self, handle: AttemptHandle, adapter: LocalAdapter | None = None) -> Observation:
        return self.run((adapter or self.adapter).observe(handle))

    def wait_end(self, handle: AttemptHandle, timeout: float = 45.0) -> Observation:
        deadline = time.monotonic() + timeout
        while True:
            observation = self.observe(handle)
            if observation.outcome.is_terminal or time.monotonic() > deadline:
                return observation
            time.sleep(0.05)

    def wait_files(self, names: list[str], timeout: float = 30.0) -> None:
        assert wait_until(lambda: all((self.out / n).exists() for n in names), timeout), names


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def no_process_left(pids: list[int], timeout: float = 10.0) -> bool:
    return wait_until(lambda: not any(alive(p) for p in pids), timeout)


def env_without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}

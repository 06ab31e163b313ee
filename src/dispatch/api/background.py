"""The background supervisor that keeps submitted jobs moving after the terminal is gone.

``ensure_supervisor`` starts ``main`` of this module in a new Python process, detached (a new
session, no terminal, output to ``<state>/supervisor.log``); with ``-c``, not ``-m``: the
package imports this module first, and runpy would warn of that in every log. At most one
background supervisor runs per
state directory: each one waits for an exclusive lock on ``<state>/supervisor.lock`` before
supervising, and exits once no job is left to drive (a held job waits for ``dispatch release``,
which starts a supervisor again). A process started while another holds
the lock waits for it, then makes at least one pass, so a job submitted while the previous
supervisor was about to exit is never left pending.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from dispatch import aio
from dispatch.api.environment import Environment
from dispatch.supervise import Supervisor, fold, load_history

#: what the background process runs
MAIN = "from dispatch.api.background import main; main()"
LOCK_NAME = "supervisor.lock"
LOG_NAME = "supervisor.log"
POLL_INTERVAL = 1.0
#: seconds between checks whether only held jobs (waiting for ``dispatch release``) remain
IDLE_CHECK_INTERVAL = 5.0


def ensure_supervisor(env: Environment) -> int:
    """Start a detached background supervisor for ``env``'s state directory; returns its pid."""
    env.state_dir.mkdir(parents=True, exist_ok=True)
    # the supervisor's own environment (its adapters read e.g. KUBECONFIG); the ranks never
    # see it: theirs was captured with each job at submit (model.environ)
    variables = dict(os.environ)
    variables["DISPATCH_STATE_DIR"] = str(env.state_dir)
    if env.config.source is not None:
        variables["DISPATCH_CONFIG"] = str(env.config.source)
    log_fd = os.open(env.state_dir / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(log_fd, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", MAIN],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=variables,
            start_new_session=True,
            close_fds=True,
        )
    return process.pid


async def supervise_until_idle(env: Environment) -> None:
    """Drive every open job of ``env`` until none is left, then return."""
    records = env.open_records()
    owner = f"{socket.gethostname()}-{os.getpid()}-background"
    here = [c.name for c in env.config.clusters.values() if c.supervised_here]
    supervisor = Supervisor(
        records, env.adapter, env.clock, owner, poll_interval=POLL_INTERVAL, clusters=here
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)

    def idle() -> bool:
        return all(
            fold(load_history(records, r.id)).held
            for r in records.list_jobs(open_only=True)
            if r.job.cluster in here
        )

    async def stop_when_only_held_jobs_remain() -> None:
        while not stop.is_set():
            await env.clock.sleep(IDLE_CHECK_INTERVAL)
            if idle():
                stop.set()

    watcher = asyncio.create_task(stop_when_only_held_jobs_remain())
    try:
        await supervisor.run(stop, until_idle=True)
    finally:
        await aio.stop(watcher)
        records.close()


def main() -> None:
    env = Environment.load()
    env.state_dir.mkdir(parents=True, exist_ok=True)
    lock = os.open(env.state_dir / LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # wait for a running background supervisor, if any
    try:
        asyncio.run(supervise_until_idle(env))
    finally:
        os.close(lock)


def lock_path(state_dir: Path) -> Path:
    return state_dir / LOCK_NAME


if __name__ == "__main__":
    main()

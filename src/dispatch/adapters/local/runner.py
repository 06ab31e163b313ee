"""The attempt runner: ``python -m dispatch.adapters.local.runner ATTEMPT_DIR``.

One detached process per attempt. It owns the attempt's processes and records facts in
``status.json``; it never interprets them (``causes.derive_outcome`` does, in whoever observes).
Standard library and psutil only, so it starts in a few tens of milliseconds.

Guarantees:

* **At most once.** The runner takes ``runner.lock`` and then creates ``claim`` exclusively;
  a runner that finds the claim taken exits without starting anything. No process of an
  attempt is ever restarted.
* **Gang.** The first process to fail (non-zero exit, or a signal we did not send) ends the
  attempt: every other process gets SIGTERM (its node's process group and every descendant),
  and SIGKILL after ``killGrace`` seconds. The same teardown follows a cancel request
  (``cancel.json`` or SIGTERM to the runner), the time limit, and a node over its memory limit.
* **No orphans.** Children die with the runner (parent-death signal); the runner is a child
  subreaper and kills every descendant before it exits; if the runner itself is killed, its
  forked watchdog kills what carries the attempt's tag or sits in its cgroups.
* **Facts first.** Exits are recorded with wall-clock times and whether dispatch had signalled
  the process (``stoppedBy``); kill-type signals we did not send wait up to ``SETTLE``
  seconds for the rest of their node, so a node killed from outside is seen as one event.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dispatch.adapters.local import cgroups, procs
from dispatch.adapters.local.files import (
    AttemptPaths,
    open_private_log,
    private_dirs,
    read_json,
    record_fault,
    reserve_fault,
    say_claimed,
    take_lock,
    take_ready_fd,
    touch,
    write_json,
)
from dispatch.adapters.local.launchfile import AttemptLaunch, ProcessLaunch
from dispatch.adapters.local.watchdog import DONE, fork_watchdog

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the runner starts faster
if TYPE_CHECKING:
    from typing import Any

TICK = 0.25  # seconds between checks of limits and cancel requests when nothing happens
SETTLE = 0.5  # seconds to let a node killed from outside finish dying before teardown
KILL_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


class Runner:
    """Drives one attempt from launch to the last reaped process."""

    def __init__(
        self,
        launch: AttemptLaunch,
        paths: AttemptPaths,
        groups: dict[int, cgroups.NodeCgroup],
        memory: dict[str, Any],
        watchdog_pid: int,
        fault_fd: int | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.launch, self.paths, self.groups = launch, paths, groups
        self.wall, self.mono = wall, monotonic
        self.watchdog_pid = watchdog_pid
        self.fault_fd = fault_fd
        self.write_error: str | None = None
        self.records: list[dict[str, Any]] = [
            {
                "index": p.index,
                "node": p.node,
                "rank": p.rank,
                "localRank": p.local_rank,
                "pid": None,
                "startedAt": None,
                "endedAt": None,
                "exitCode": None,
                "signal": None,
                "stoppedBy": None,
            }
            for p in launch.processes
        ]
        self.by_pid: dict[int, int] = {}
        self.pgids: dict[int, int] = {}  # node -> process group id
        self.popens: dict[int, subprocess.Popen[bytes]] = {}
        self.events: list[dict[str, Any]] = []
        self.status: dict[str, Any] = {
            "job": launch.job_id,
            "attempt": launch.attempt,
            "mode": launch.mode,
            "runnerPid": os.getpid(),
            "phase": "starting",
            "startedAt": None,
            "endedAt": None,
            "memory": memory,
            "processes": self.records,
            "events": self.events,
        }
        self.oom_seen: dict[int, int] = dict.fromkeys(groups, 0)
        self.cancel_signalled = False
        self.teardown_at: float | None = None
        self.killed = False
        self.settle_until: float | None = None
        self.deadline: float | None = None
        self.next_memory_check = 0.0
        self.wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        os.set_blocking(self.wake_read, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    # --- recording ---------------------------------------------------------------------

    def _on_term(self, *_: object) -> None:
        self.cancel_signalled = True

    def event(self, kind: str, **data: Any) -> None:
        self.events.append({"kind": kind, "at": data.pop("at", None) or self.wall(), **data})

    def write(self) -> None:
        try:
            write_json(self.paths.status, self.status)
        except OSError as exc:
            self.cannot_record(exc)
            return
        touch(self.paths.changed)

    def cannot_record(self, exc: OSError) -> None:
        """``status.json`` cannot be written (a full disk, most often): an attempt whose facts
        cannot be recorded cannot be supervised, so it is ended, and why is written in place
        into the room ``fault.json`` reserved at claim, for the observer to report."""
        if self.write_error is not None:
            return
        self.write_error = f"cannot write {self.paths.status}: {exc.strerror or exc}"
        self.event("runner_error", error=self.write_error, errno=exc.errno)
        if self.fault_fd is not None:
            record_fault(
                self.fault_fd,
                {"at": self.wall(), "error": self.write_error, "errno": exc.errno},
            )
        print(self.write_error, file=sys.stderr, flush=True)
        self.begin_teardown()

    # --- the attempt ---------------------------------------------------------------------

    def run(self) -> None:
        cancel = read_json(self.paths.cancel)
        cwd = self.launch.processes[0].cwd
        if cancel is not None:
            self.event("cancel", actor=cancel.get("actor"), reason=cancel.get("reason"))
        elif self.write_error is not None:
            pass  # nothing can be recorded: start nothing
        elif not os.path.isdir(cwd):
            self.event("start_failure", error=f"working directory {cwd} does not exist", cwd=cwd)
        else:
            self.status["startedAt"] = self.wall()
            if self.launch.time_limit is not None:
                self.deadline = self.mono() + self.launch.time_limit
            for process in self.launch.processes:
                if not self.spawn(process):
                    self.begin_teardown()
                    break
            else:
                self.status["phase"] = "running"
            self.write()
            self.loop()
        self.finish()

    def spawn(self, process: ProcessLaunch) -> bool:
        env = self.launch.process_env(process, os.environ)
        program = process.argv[0]
        found = shutil.which(program, path=env.get("PATH")) if "/" not in program else program
        problem = None
        if found is None:
            problem = f"command {program!r} not found on PATH"
        record = self.records[process.index]
        if problem is None:
            group = self.groups.get(process.node)
            log = self.paths.root / process.log
            private_dirs(log.parent)
            try:
                with os.fdopen(open_private_log(log), "ab") as out:
                    popen = subprocess.Popen(
                        process.argv,
                        env=env,
                        cwd=process.cwd,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        process_group=self.pgids.get(process.node, 0),
                        preexec_fn=procs.child_setup(
                            os.getpid(), group.procs_file if group else None
                        ),
                    )
            except (OSError, subprocess.SubprocessError) as exc:
                problem = f"cannot start {program!r}: {getattr(exc, 'strerror', None) or exc}"
        if problem is not None:
            self.event(
                "start_failure",
                node=process.node,
                rank=process.rank,
                index=process.index,
                error=problem,
                program=program,
            )
            return False
        self.popens[process.index] = popen
        self.by_pid[popen.pid] = process.index
        self.pgids.setdefault(process.node, popen.pid)
        record.update(pid=popen.pid, startedAt=self.wall())
        return True

    def loop(self) -> None:
        while True:
            busy = self.teardown_at is not None or self.settle_until is not None
            self.wait(0.05 if busy else TICK)
            changed = self.reap()
            now = self.mono()
            if self.teardown_at is None:
                changed |= self.check_triggers(now)
            grace_over = (
                self.teardown_at is not None and now >= self.teardown_at + self.launch.kill_grace
            )
            if grace_over and not self.killed:
                self.signal_all(signal.SIGKILL)
                self.killed = True
            if changed:
                self.write()
            if all(r["endedAt"] is not None or r["pid"] is None for r in self.records):
                return

    def check_triggers(self, now: float) -> bool:
        """Start the teardown when something ends the attempt; True when facts changed."""
        if all(r["endedAt"] is not None for r in self.records if r["pid"]):
            return False  # everything already ended on its own: nothing left to stop
        if self.cancel_signalled or self.paths.cancel.exists():
            cancel = read_json(self.paths.cancel) or {}
            self.event(
                "cancel",
                actor=cancel.get("actor", "signal"),
                reason=cancel.get("reason", "SIGTERM"),
            )
            self.begin_teardown()
            return True
        if self.deadline is not None and now >= self.deadline:
            self.event("timeout", limit=self.launch.time_limit)
            self.begin_teardown()
            return True
        if self.check_memory(now):
            self.begin_teardown()
            return True
        failed = [r for r in self.records if _failed(r) and r["stoppedBy"] is None]
        if not failed:
            return False
        first = min(failed, key=lambda r: r["endedAt"])
        oom_on_node = any(
            e["kind"] == "oom_kill" and e["node"] == first["node"] for e in self.events
        )
        if first["signal"] in KILL_SIGNALS and not oom_on_node:
            node_alive = any(
                r["node"] == first["node"] and r["pid"] and r["endedAt"] is None
                for r in self.records
            )
            if self.settle_until is None:
                self.settle_until = now + SETTLE
            if node_alive and now < self.settle_until:
                return False
        self.begin_teardown()
        return True

    def check_memory(self, now: float) -> bool:
        limit = self.launch.memory_bytes
        if limit is None or self.groups or now < self.next_memory_check:
            return False
        self.next_memory_check = now + TICK
        for node in range(self.launch.nodes):
            pids = self.node_pids(node)
            rss = procs.rss_total(pids)
            if rss > limit:
                self.event("memory_limit", node=node, rssBytes=rss, limitBytes=limit)
                for record in self.records:
                    if record["node"] == node and record["endedAt"] is None:
                        record["stoppedBy"] = "memory"
                procs.signal_group(self.pgids[node], signal.SIGKILL, owner=os.getpid())
                procs.signal_pids(pids, signal.SIGKILL)
                return True
        return False

    def node_pids(self, node: int) -> set[int]:
        pids: set[int] = set()
        for record in self.records:
            if record["node"] == node and record["pid"] and record["endedAt"] is None:
                pids.add(record["pid"])
                pids.update(p.pid for p in procs.descendants(record["pid"]))
        return pids

    def begin_teardown(self) -> None:
        if self.teardown_at is not None:
            return
        self.teardown_at = self.mono()
        self.status["phase"] = "stopping"
        for record in self.records:
            if record["pid"] and record["endedAt"] is None and record["stoppedBy"] is None:
                record["stoppedBy"] = "dispatch"
        self.signal_all(signal.SIGTERM)

    def signal_all(self, sig: int) -> None:
        for pgid in self.pgids.values():  # only groups that still hold processes of ours
            procs.signal_group(pgid, sig, owner=os.getpid())
        procs.signal_pids(self.leftovers(), sig)

    def leftovers(self) -> set[int]:
        return {p.pid for p in procs.descendants(os.getpid())} - {self.watchdog_pid}

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(InterruptedError):
            select.select([self.wake_read], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_read, 512):
                pass

    def reap(self) -> bool:
        changed = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return changed
            if pid == 0:
                return changed
            index = self.by_pid.get(pid)
            if index is None:
                continue  # an adopted orphan, now gone
            record = self.records[index]
            record["endedAt"] = self.wall()
            if os.WIFSIGNALED(status):
                record["signal"] = os.WTERMSIG(status)
            else:
                record["exitCode"] = os.waitstatus_to_exitcode(status)
            self.popens[index].returncode = os.waitstatus_to_exitcode(status)
            self.check_oom(record["node"], record["endedAt"])
            changed = True

    def check_oom(self, node: int, at: float) -> None:
        group = self.groups.get(node)
        if group is None:
            return
        count = group.oom_kills()
        if count > self.oom_seen[node]:
            self.oom_seen[node] = count
            self.event("oom_kill", node=node, count=count, at=at, cgroup=str(group.path))

    def finish(self) -> None:
        """Stop and reap every leftover, record the end, release the cgroups."""
        for _ in range(50):
            left = self.leftovers()
            if not left:
                break
            procs.signal_pids(left, signal.SIGKILL)
            self.wait(0.05)
            self.reap()
        for node in self.groups:
            self.check_oom(node, self.wall())
        self.status["phase"] = "ended"
        self.status["endedAt"] = self.wall()
        self.write()
        for group in self.groups.values():
            group.remove()


def _failed(record: dict[str, Any]) -> bool:
    return record["endedAt"] is not None and (record["signal"] is not None or record["exitCode"])


def main(argv: list[str]) -> int:
    ready = take_ready_fd()
    paths = AttemptPaths(Path(argv[1]))
    raw = read_json(paths.launch)
    if raw is None:
        print(f"no launch.json in {paths.root}", file=sys.stderr)
        return 2
    launch = AttemptLaunch.from_json(raw)
    groups, memory = cgroups.setup_node_groups(launch)
    inherited = () if ready is None else (ready,)
    watchdog_pid, done = fork_watchdog(paths, launch.tag, list(groups.values()), inherited)
    try:
        if take_lock(paths.runner_lock, block=False) is None:
            return 0  # another runner holds this attempt
        try:
            fd = os.open(paths.claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            return 0  # the attempt was already executed (or is being executed): never twice
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        fault_fd = reserve_fault(paths.fault)
        say_claimed(ready)  # start returns now; the ranks start below, without that fd
        procs.become_subreaper()
        runner = Runner(launch, paths, groups, memory, watchdog_pid, fault_fd)
        runner.write()
        try:
            runner.run()
        except BaseException:
            runner.event("runner_error", error=repr(sys.exc_info()[1]))
            runner.begin_teardown()
            runner.signal_all(signal.SIGKILL)
            runner.finish()
            raise
        return 0
    finally:
        for group in groups.values():
            group.remove()
        os.write(done, DONE)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""``LocalAdapter``: the embedded scheduler. A job's nodes run as process groups on this machine.

``start`` spawns one detached attempt runner per attempt (``runner.py``) and returns once the
runner has claimed the attempt (it says so on a pipe, so ``start`` wakes at once); the runner
owns the processes, so the attempt survives the process that called ``start`` (``dispatch
submit`` returns at once) and any process can observe or cancel it later through the attempt
directory (``files.py``). Differences from the SPI's general text:

* ``start`` refuses (``Unsupported``) what ``capabilities`` refuses; it adopts an attempt
  whose runner was already spawned or has already claimed it, and never runs it twice.
* A runner that died without recording the end is reported as ``node_lost``: its processes
  died with it. One that could not write its facts (a full disk) stops the attempt and says
  why in ``fault.json``: ``unknown`` with that error as evidence.
* Cluster settings: ``killGrace`` (seconds from SIGTERM to SIGKILL, default 5),
  ``memoryEnforcement`` (``auto``, ``cgroup`` or ``watchdog``), ``startTimeout`` (seconds to
  wait for the runner to claim the attempt, default 30).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.local import capabilities as caps
from dispatch.adapters.local import causes, output, procs
from dispatch.adapters.local.changes import Changes, readable
from dispatch.adapters.local.files import (
    CLAIMED,
    READY_FD_ENV,
    RUNNER_MODULE,
    AttemptPaths,
    create_json,
    lock_held,
    open_private_log,
    private_dirs,
    read_fault,
    read_json,
    take_lock,
    write_json,
)
from dispatch.adapters.local.launch import build_launch
from dispatch.adapters.local.launchfile import AttemptLaunch
from dispatch.adapters.secrets import HIDDEN
from dispatch.config import ClusterConfig
from dispatch.model import (
    Artifact,
    AttemptHandle,
    CapabilityReport,
    Cause,
    ConfigError,
    InvalidSpec,
    Job,
    JobSpec,
    NotFound,
    Observation,
    Outcome,
    OutcomeUnknown,
    Plan,
    SpecProblem,
    State,
    resolve_working_dir,
)
from dispatch.model.environ import base_environment
from dispatch.model.shown import show

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
WATCH_INTERVAL = 0.05  # seconds between checks of the change marker where inotify is missing
WATCH_REFRESH = 1.0  # seconds between full re-reads even without a change (runner deaths)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalAdapter:
    """The local scheduler, bound to one configured cluster (usually ``local``)."""

    kind = "local"

    def __init__(self, cluster: ClusterConfig, context: AdapterContext) -> None:
        self.cluster = cluster
        self.context = context
        self.kill_grace = cluster.number("killGrace", 5.0)
        self.memory_setting = cluster.setting("memoryEnforcement", "auto")
        if self.memory_setting not in ("auto", "cgroup", "watchdog"):
            raise ConfigError(
                f"cluster {cluster.name!r}: memoryEnforcement is {show(self.memory_setting)}; "
                "write auto, cgroup or watchdog"
            )
        self.start_timeout = cluster.number("startTimeout", 30.0, minimum=0.001)
        self._probe: caps.Probe | None = None
        self._probed_at: float | None = None

    # --- capabilities and plan -------------------------------------------------------------

    async def capabilities(self, spec: JobSpec | None = None) -> CapabilityReport:
        if self._probe is None:
            self._probe = await asyncio.to_thread(caps.probe_machine, self.memory_setting)
            self._probed_at = self.context.clock.now()
        return caps.report(
            self.cluster.name,
            self._probe,
            spec,
            setting=self.memory_setting,
            probed_at=self._probed_at,
        )

    def _launch(self, job: Job, attempt: int, port: int | None) -> AttemptLaunch:
        if not _SAFE_ID.match(job.id):
            raise InvalidSpec([SpecProblem("job id", f"{job.id!r} cannot name a folder")])
        spec = job.spec
        working_dir = spec.working_dir
        if working_dir is None or not Path(working_dir).is_absolute():
            working_dir = resolve_working_dir(spec, None).working_dir
        return build_launch(
            job,
            attempt,
            working_dir=str(working_dir),
            master_port=port,
            inherited=(
                job.environment if job.environment is not None else base_environment(os.environ)
            ),
            python_dir=str(Path(sys.executable).parent),
            kill_grace=self.kill_grace,
            memory_mode=self.memory_setting,
        )

    def paths(self, job_id: str, attempt: int) -> AttemptPaths:
        return AttemptPaths.of(self.context.state_dir, job_id, attempt)

    async def plan(self, job: Job, attempt: int) -> Plan:
        report = await self.capabilities(job.spec)
        launch = self._launch(job, attempt, None)
        paths = self.paths(job.id, attempt)
        runner = Artifact(
            "process",
            "attempt-runner",
            {
                "argv": [sys.executable, "-m", RUNNER_MODULE, str(paths.root)],
                "detached": True,
                "log": str(paths.runner_log),
            },
        )
        processes = tuple(
            Artifact(
                "process",
                p.name,
                {
                    "argv": list(p.argv),
                    "env": dict(p.env),
                    "inheritedEnv": sorted(launch.environment or {}),
                    "secretEnv": dict.fromkeys(job.spec.secret_env, HIDDEN),
                    "cwd": p.cwd,
                    "log": str(paths.root / p.log),
                    "processGroup": f"node-{p.node}",
                },
            )
            for p in launch.processes
        )
        mode = (
            "torchrun runs once per node and starts the node's ranks"
            if launch.mode == "torchrun"
            else "dispatch starts every rank as its own process"
        )
        notes = (
            mode,
            "each process's environment is exactly inheritedEnv (values captured at submit), "
            "secretEnv (values never shown) and env (the spec's and what dispatch adds)",
            *caps.notes(job.spec),
        )
        return Plan(
            identity=job.identity(attempt),
            adapter=self.kind,
            capabilities=report,
            artifacts=(runner, *processes),
            notes=notes,
        )

    # --- start -----------------------------------------------------------------------------

    def handle(
        self, job_id: str, attempt: int, launch: AttemptLaunch | None = None
    ) -> AttemptHandle:
        data = {"mode": launch.mode, "processes": len(launch.processes)} if launch else {}
        return AttemptHandle(
            job_id, attempt, self.cluster.name, f"{job_id}/attempt-{attempt}", data
        )

    async def start(self, job: Job, attempt: int) -> AttemptHandle:
        (await self.capabilities(job.spec)).raise_if_refused()
        launch = self._launch(job, attempt, None)  # validates before anything is created
        secrets = self.context.secret_values(job)  # likewise: InvalidSpec names what is missing
        paths = self.paths(job.id, attempt)
        private_dirs(paths.root)
        lock = await asyncio.to_thread(take_lock, paths.start_lock, block=True)
        if lock is None:  # pragma: no cover - a blocking lock is always taken
            raise OutcomeUnknown("could not lock the attempt directory")
        try:
            ready = None
            if not paths.claim.exists() and not self._spawned_runner_alive(paths):
                if read_json(paths.launch) is None:
                    write_json(paths.launch, self._launch(job, attempt, free_port()).to_json())
                ready = self._spawn_runner(paths, secrets)
            if ready is None:  # adopting a runner another start spawned
                await self._wait_for_claim(paths)
            else:
                await self._hear_claim(paths, ready)
        finally:
            os.close(lock)
        return self.handle(job.id, attempt, launch)

    def _spawned_runner_alive(self, paths: AttemptPaths) -> bool:
        spawn = read_json(paths.spawn)
        return spawn is not None and procs.is_runner(int(spawn["pid"]), paths.root, RUNNER_MODULE)

    def _spawn_runner(self, paths: AttemptPaths, secrets: dict[str, str]) -> int:
        """Spawn the runner; returns the fd on which it says it claimed the attempt. The
        values of ``secretEnv`` reach it in its environment only (``launch.json`` names them)."""
        ready, told = os.pipe()
        try:
            with os.fdopen(open_private_log(paths.runner_log), "ab") as log:
                runner = subprocess.Popen(
                    [sys.executable, "-m", RUNNER_MODULE, str(paths.root)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **secrets, READY_FD_ENV: str(told)},
                    pass_fds=(told,),
                    start_new_session=True,  # not stopped by the terminal's Ctrl-C or hang-up
                )
        except BaseException:
            os.close(ready)
            raise
        finally:
            os.close(told)
        write_json(paths.spawn, {"pid": runner.pid, "at": self.context.clock.now()})
        # reap it when it ends, so a long-lived caller does not collect zombies
        threading.Thread(target=runner.wait, daemon=True).start()
        return ready

    async def _hear_claim(self, paths: AttemptPaths, ready: int) -> None:
        """Wait, without polling, for the runner just spawned to claim the attempt (it writes
        ``CLAIMED`` on ``ready``) or to end without claiming it (end of file)."""
        try:
            said = (
                os.read(ready, 1)
                if await readable(ready, asyncio.sleep(self.start_timeout))
                else None
            )
        finally:
            os.close(ready)
        if paths.claim.exists():
            return
        if said is not None and said != CLAIMED:
            raise OutcomeUnknown(
                f"the attempt runner ended before claiming the attempt; see {paths.runner_log}"
            )
        raise OutcomeUnknown(f"the attempt runner did not claim {paths.root} in time")

    async def _wait_for_claim(self, paths: AttemptPaths) -> None:
        waited = 0.0
        while not paths.claim.exists():
            if not self._spawned_runner_alive(paths) and not paths.claim.exists():
                raise OutcomeUnknown(
                    f"the attempt runner ended before claiming the attempt; see {paths.runner_log}"
                )
            if waited >= self.start_timeout:
                raise OutcomeUnknown(f"the attempt runner did not claim {paths.root} in time")
            await asyncio.sleep(0.01)
            waited += 0.01

    # --- observe, watch, cancel --------------------------------------------------------

    async def observe(self, handle: AttemptHandle) -> Observation:
        paths = self.paths(handle.job_id, handle.attempt)
        now = self.context.clock.now()
        if not paths.root.is_dir():
            text = "no trace of this attempt in the local state directory"
            outcome = Outcome(State.FAILED, Cause.UNKNOWN, text)
            return Observation(handle, outcome, observed_at=now, gone=True)
        if not paths.claim.exists():
            return self._unclaimed(handle, paths, now)
        alive = lock_held(paths.runner_lock)  # before reading status: see runner.py
        status, lost = read_json(paths.status), read_json(paths.lost)
        fault = read_fault(paths.fault)
        outcome = causes.derive_outcome(status, lost, runner_alive=alive, now=now, fault=fault)
        found = causes.evidence(status, lost, now, fault)
        return Observation(handle, outcome, found, observed_at=now)

    def _unclaimed(self, handle: AttemptHandle, paths: AttemptPaths, now: float) -> Observation:
        if self._spawned_runner_alive(paths) or lock_held(paths.start_lock):
            return Observation(handle, Outcome(State.QUEUED), observed_at=now)
        cancel = read_json(paths.cancel)
        if cancel is not None:
            text = f"cancelled by {cancel.get('actor')} before it started: {cancel.get('reason')}"
            outcome = Outcome(State.CANCELLED, Cause.CANCELLED, text)
            return Observation(handle, outcome, observed_at=now)
        text = "start did not finish and no runner claimed the attempt; nothing ran"
        return Observation(
            handle, Outcome(State.FAILED, Cause.UNKNOWN, text), observed_at=now, gone=True
        )

    async def watch(self, handles: Sequence[AttemptHandle]) -> AsyncIterator[Observation]:
        """One loop for all handles: it waits for the shared change marker to move (woken by
        inotify at once, ``changes.py``; else a stat every ``WATCH_INTERVAL`` s) and re-reads
        the attempts only when some runner recorded a change, or every ``WATCH_REFRESH`` s,
        which catches runners that died without a word."""
        seen: dict[tuple[str, int], tuple[object, ...]] = {}
        clock = self.context.clock
        marker = self.context.state_dir / "jobs" / ".changed"
        changes = Changes(marker.parent, clock, fallback=WATCH_INTERVAL)
        last_mark: int | None = -1
        refreshed_at = clock.now()
        try:
            while True:
                try:
                    mark: int | None = marker.stat().st_mtime_ns
                except FileNotFoundError:
                    mark = None
                if mark != last_mark or clock.now() - refreshed_at >= WATCH_REFRESH:
                    last_mark, refreshed_at = mark, clock.now()
                    for handle in handles:
                        observation = await self.observe(handle)
                        key = (handle.job_id, handle.attempt)
                        signature = (
                            observation.outcome.state,
                            observation.outcome.cause,
                            observation.gone,
                            tuple(e.key for e in observation.evidence),
                        )
                        if seen.get(key) != signature:
                            seen[key] = signature
                            yield observation
                await changes.wait(max(0.0, WATCH_REFRESH - (clock.now() - refreshed_at)))
        finally:
            changes.close()

    async def cancel(self, handle: AttemptHandle, actor: str, reason: str) -> None:
        paths = self.paths(handle.job_id, handle.attempt)
        if not paths.root.is_dir():
            return
        create_json(
            paths.cancel, {"actor": actor, "reason": reason, "at": self.context.clock.now()}
        )
        spawn = read_json(paths.spawn)
        # SIGTERM only once the runner has installed its handler (it writes status.json
        # after); before that, it finds cancel.json itself within a tick.
        if spawn is not None and paths.status.exists() and lock_held(paths.runner_lock):
            # only the attempt's runner: a pid reused by another program is left alone
            procs.signal_runner(int(spawn["pid"]), paths.root, RUNNER_MODULE, signal.SIGTERM)

    # --- output -------------------------------------------------------------------------------

    async def read_output(
        self, handle: AttemptHandle, rank: int | None = None, follow: bool = False
    ) -> AsyncIterator[str]:
        paths = self.paths(handle.job_id, handle.attempt)
        raw = read_json(paths.launch)
        if raw is None:
            raise NotFound(f"no attempt {handle.attempt} of {handle.job_id} here")
        launch = AttemptLaunch.from_json(raw)

        def ended() -> bool:
            status = read_json(paths.status) or {}
            return status.get("phase") == "ended" or (
                paths.claim.exists() and not lock_held(paths.runner_lock)
            )

        files = output.log_files(launch, paths.root, rank)
        async for line in output.read_lines(
            files, follow=follow, ended=ended, sleep=self.context.clock.sleep
        ):
            yield line

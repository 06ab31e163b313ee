"""Team supervision on PostgreSQL: reliability under supervisor kills and database restarts,
and the records' throughput on PostgreSQL against SQLite.

    python -m bench.team                       # 3 supervisors, 500 jobs, 6 kills, 2 restarts
    python -m bench.team --jobs 60 --kills 2   # a quick run
    python -m bench.team --throughput-only

**Reliability.** A PostgreSQL server (Debian's binaries, a temporary data directory, loopback)
and the Kubernetes API emulator (Trainer, JobSet, Job, scheduler, kubelet) run in this process.
``--jobs`` jobs of the scale benchmark's mix (success, exit code 3, OOMKilled, a longer success;
``bench/scale.py``) are submitted into the shared records, as ``dispatch submit`` does for a
cluster with ``supervision: remote``. Three ``dispatch supervise --cluster kf`` processes (the
real CLI, each with its own state directory, as on three hosts) drive them. During the run a
random supervisor is SIGKILLed ``--kills`` times and a new one started under a new name, and
PostgreSQL is restarted twice (``pg_ctl restart -m fast``). Figures: jobs lost (not ended by
the deadline), duplicated (more than one attempt or TrainJob per job), wrong (state or cause
not the scenario's), and for every job whose lease a killed supervisor held, the seconds until
another supervisor held it (p50, p99), against the lease TTL.

**Throughput.** Submissions per second (``create_job``, one process) and supervisor passes per
second (``Supervisor.step`` over N open jobs on the memory scheduler: every job leased,
folded and decided once), on PostgreSQL and on SQLite, same machine, same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.scale import ServerTimes, emulator_config, percentile, prepare, scenario
from bench.scale_dispatch import CLUSTER, job_spec
from dispatch.clock import SystemClock
from dispatch.model import parse_spec
from dispatch.records import Records, open_records
from dispatch.testing.k8s import Emulator
from dispatch.testing.postgres import PostgresServer

ROOT = Path(__file__).resolve().parents[1]
#: the scenario kind -> the (state, cause) the job must end with
EXPECTED = {
    "success": ("succeeded", None),
    "long-success": ("succeeded", None),
    "exit-3": ("failed", "app_error"),
    "oom": ("failed", "out_of_memory"),
}


class Supervisors:
    """``dispatch supervise`` processes over one records URL, started and killed by name."""

    def __init__(self, tmp: Path, url: str, config: Path, lease_ttl: float, poll: float) -> None:
        self.tmp, self.url, self.config = tmp, url, config
        self.lease_ttl, self.poll = lease_ttl, poll
        self.live: dict[str, subprocess.Popen[bytes]] = {}
        self.started = 0

    def start(self) -> str:
        self.started += 1
        owner = f"sup-{self.started}"
        env = {
            **os.environ,
            "DISPATCH_RECORDS": self.url,
            "DISPATCH_CONFIG": str(self.config),
            "DISPATCH_STATE_DIR": str(self.tmp / owner),
        }
        log = open(self.tmp / f"{owner}.log", "wb")  # noqa: SIM115 - closed with the process
        self.live[owner] = subprocess.Popen(
            [sys.executable, "-m", "dispatch", "supervise", "--cluster", CLUSTER, "--owner",
             owner, "--lease-ttl", str(self.lease_ttl), "--poll-interval", str(self.poll)],
            env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT,
        )  # fmt: skip
        return owner

    def kill(self, owner: str) -> None:
        process = self.live.pop(owner)
        process.kill()
        process.wait()

    def stop_all(self) -> list[str]:
        """SIGTERM every live one; the names of those that had died on their own."""
        died = [o for o, p in self.live.items() if p.poll() is not None]
        for process in self.live.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.live.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        self.live.clear()
        return died


def _leases(records_url: str) -> dict[str, tuple[str, float]]:
    import psycopg

    with psycopg.connect(records_url) as conn:
        rows = conn.execute("SELECT job_id, owner, expires_at FROM leases").fetchall()
    return {job: (owner, expires) for job, owner, expires in rows}


def reliability(
    jobs: int, kills: int, restarts: int, lifetime: float, scale: float, lease_ttl: float,
    poll: float, deadline: float, seed: int = 0,
) -> dict[str, Any]:  # fmt: skip
    rng = random.Random(seed)
    times = ServerTimes()
    with (
        tempfile.TemporaryDirectory(prefix="dispatch-team-") as folder,
        PostgresServer() as server,
        Emulator(emulator_config(jobs, scale), kubeconfig=Path(folder) / "kubeconfig") as emu,
    ):
        tmp = Path(folder)
        prepare(emu, times)
        url = server.create_database("team")
        config = tmp / "config.yaml"
        config.write_text(
            yaml.safe_dump(
                {"clusters": [{"name": CLUSTER, "adapter": "kubeflow", "supervision": "remote",
                               "kubeconfig": str(emu.kubeconfig), "namespace": "default"}]}
            )
        )  # fmt: skip
        records: Records = open_records(url, clock=SystemClock())
        kinds: dict[str, str] = {}
        began = time.time()
        for i in range(jobs):
            kind, text = scenario(i, lifetime, scale)
            job = records.create_job(
                parse_spec(job_spec(f"team-{i:05d}", text)), submitted_by="bench"
            )
            kinds[job.id] = kind
        submitted = time.time() - began
        supervisors = Supervisors(tmp, url, config, lease_ttl, poll)
        for _ in range(3):
            supervisors.start()
        # kills and restarts spread over the first half of the jobs' expected lifetime
        window = max(10.0, lifetime * 1.5)
        events = sorted(
            [(rng.uniform(2.0, window), "kill") for _ in range(kills)]
            + [(window * (k + 1) / (restarts + 1), "restart") for k in range(restarts)]
        )
        takeovers: list[float] = []
        pending: dict[str, tuple[str, float]] = {}  # job -> (dead owner, killed at)
        done_events: list[dict[str, Any]] = []
        start = time.time()
        finished = False
        while time.time() - start < deadline:
            now = time.time() - start
            while events and events[0][0] <= now:
                _, what = events.pop(0)
                if what == "kill" and supervisors.live:
                    victim = rng.choice(sorted(supervisors.live))
                    open_ids = {r.id for r in records.list_jobs(open_only=True)}
                    held = [
                        j
                        for j, (o, until) in _leases(url).items()
                        if o == victim and until > time.time() and j in open_ids
                    ]
                    supervisors.kill(victim)
                    at = time.time()
                    for job in held:
                        pending[job] = (victim, at)
                    replacement = supervisors.start()
                    done_events.append({"at": round(now, 1), "kill": victim, "held": len(held),
                                        "startedInstead": replacement})  # fmt: skip
                elif what == "restart":
                    began_restart = time.time()
                    server.restart()
                    done_events.append({"at": round(now, 1), "restart": "postgresql",
                                        "seconds": round(time.time() - began_restart, 2)})  # fmt: skip
            if pending:
                try:
                    leases = _leases(url)
                except Exception:  # the server restarting: look again next round
                    leases = None
                if leases is not None:
                    for job, (dead, at) in list(pending.items()):
                        holder = leases.get(job)
                        if holder is not None and holder[0] != dead:
                            takeovers.append(time.time() - at)
                            del pending[job]
                        elif records.get_job(job).state.is_terminal:
                            if holder is None:  # another supervisor finished it
                                takeovers.append(time.time() - at)
                            del pending[job]  # else it ended before anyone had to act
            try:
                open_jobs = records.list_jobs(open_only=True)
            except Exception:
                open_jobs = [None]  # type: ignore[list-item]
            if not open_jobs and not pending:
                finished = True
                break
            time.sleep(0.1)
        elapsed = time.time() - start
        died = supervisors.stop_all()
        results = {r.id: r for r in records.list_jobs()}
        lost = [j for j, r in results.items() if not r.state.is_terminal]
        wrong = [
            j
            for j, r in results.items()
            if r.state.is_terminal
            and (r.state.value, r.cause.value if r.cause else None) != EXPECTED[kinds[j]]
        ]
        attempts = {j: len(records.attempts(j)) for j in results}
        trainjobs = emu.call(lambda: list(emu.cluster.store.objects(times.rtype)))
        per_job: dict[str, int] = {}
        for obj in trainjobs:
            job = (obj["metadata"].get("labels") or {}).get("dispatch.dev/job", "")
            per_job[job] = per_job.get(job, 0) + 1
        duplicated = sorted(
            {j for j, n in attempts.items() if n != 1} | {j for j, n in per_job.items() if n > 1}
        )
        records.close()
        return {
            "jobs": jobs,
            "supervisors": 3,
            "kills": kills,
            "postgresRestarts": restarts,
            "leaseTtl": lease_ttl,
            "pollInterval": poll,
            "timeScale": scale,
            "finished": finished,
            "seconds": round(elapsed, 1),
            "submitSeconds": round(submitted, 2),
            "lost": len(lost),
            "duplicated": len(duplicated),
            "wrong": len(wrong),
            "wrongSamples": [_sample(results[j], EXPECTED[kinds[j]]) for j in wrong[:5]],
            "trainJobs": len(trainjobs),
            "takeovers": len(takeovers),
            "takeoverP50": round(percentile(takeovers, 0.5) or 0.0, 2),
            "takeoverP99": round(percentile(takeovers, 0.99) or 0.0, 2),
            "takeoverMax": round(max(takeovers, default=0.0), 2),
            "notTakenOver": len(pending),
            "supervisorsDiedOnTheirOwn": died,
            "events": done_events,
        }


def _sample(record: Any, expected: tuple[str, str | None]) -> dict[str, Any]:
    cause = record.cause.value if record.cause else None
    return {"job": record.id, "expected": list(expected), "got": [record.state.value, cause],
            "summary": record.summary}  # fmt: skip


def throughput(jobs: int) -> list[dict[str, Any]]:
    """Submissions, starts (the first pass) and supervisor passes per second on each store
    (memory scheduler)."""
    from tests.supervise.world import World

    rows = []
    with tempfile.TemporaryDirectory(prefix="dispatch-team-tp-") as folder, PostgresServer() as pg:
        for store in ("sqlite", "postgresql"):
            location = (
                str(Path(folder) / "r.sqlite3") if store == "sqlite" else pg.create_database()
            )
            world = World()
            world.store = open_records(location, clock=world.clock)  # type: ignore[assignment]
            began = time.perf_counter()
            for _ in range(jobs):
                world.submit("succeeded@100000")
            submit = time.perf_counter() - began
            supervisor = world.supervisor("tp", lease_ttl=1e9)
            began = time.perf_counter()
            asyncio.run(supervisor.step())  # first pass: every job starts
            starts = time.perf_counter() - began
            passes, began = 0, time.perf_counter()
            while time.perf_counter() - began < 5.0:
                asyncio.run(supervisor.step())
                passes += 1
            per_pass = (time.perf_counter() - began) / passes
            rows.append(
                {
                    "store": store,
                    "jobs": jobs,
                    "submissionsPerSecond": round(jobs / submit, 1),
                    "startsPerSecond": round(jobs / starts, 1),
                    "passSeconds": round(per_pass, 3),
                    "jobTicksPerSecond": round(jobs / per_pass, 1),
                }
            )
            world.store.close()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument(
        "--lifetime", type=float, default=40.0, help="mean real seconds a job lives"
    )
    parser.add_argument("--time-scale", type=float, default=10.0)
    parser.add_argument("--lease-ttl", type=float, default=10.0)
    parser.add_argument("--poll-interval", type=float, default=2.0)
    parser.add_argument("--deadline", type=float, default=900.0)
    parser.add_argument("--throughput-jobs", type=int, default=500)
    parser.add_argument("--throughput-only", action="store_true")
    parser.add_argument("--out", type=Path, help="write the JSON here too")
    args = parser.parse_args(argv)
    found: dict[str, Any] = {}
    if not args.throughput_only:
        found["reliability"] = reliability(
            args.jobs, args.kills, args.restarts, args.lifetime, args.time_scale,
            args.lease_ttl, args.poll_interval, args.deadline,
        )  # fmt: skip
        print(json.dumps(found["reliability"], indent=1), flush=True)
    found["throughput"] = throughput(args.throughput_jobs)
    print(json.dumps(found["throughput"], indent=1))
    if args.out:
        args.out.write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()

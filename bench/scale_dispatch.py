"""Child process of the scale benchmark: dispatch's real Supervisor + KubeflowAdapter, one
process, driving N jobs on the emulated cluster until every one has ended.

    python -m bench.scale_dispatch PLAN.json OUT.json

PLAN: {"kubeconfig", "namespace", "state", "pollInterval", "leaseTtl", "owner", "create",
"jobs": [{"name", "scenario"}]}; with ``create`` false the jobs already in the records are
supervised (a supervisor restarted after a kill). With ``"memory": FILE`` (``bench.scale
--memory FILE``) the Python heap is traced (``tracemalloc``) and, at the largest traced size
seen (sampled every ``MEMORY_EVERY`` s), the top allocation sites and live object counts by
type are written to FILE with the RSS and traced-size series, and, once every job has ended,
the sites still holding memory (slows the run down).
OUT: per job the TrainJob name, final state and cause, and when the supervisor recorded the
attempt's end (the records' log time, wall clock); plus this process's CPU seconds and peak
RSS, its CPU seconds and RSS sampled over the run (``cpuSeries``, ``rssSeries``), and the
pauses of Python's cyclic garbage collector per generation while it supervised (``gc``: how
many, their seconds in all, the longest). The
jobs are put in the records first (as ``dispatch submit`` does), then one supervisor starts
and supervises them all (as ``dispatch supervise --exit-when-idle`` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import gc
import json
import os
import resource
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.peak_rss import peak_rss_mib
from dispatch.adapters.base import AdapterContext
from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.clock import SystemClock
from dispatch.config import ClusterConfig
from dispatch.model import parse_spec
from dispatch.records import SqliteRecords, database_path
from dispatch.supervise import Supervisor

CLUSTER = "kf"
#: seconds between memory samples (``"memory"`` in the plan)
MEMORY_EVERY = 2.0
#: seconds between samples of this process's CPU time (``cpuSeries``)
CPU_EVERY = 0.25
#: frames kept per traced allocation, and allocation sites reported
TRACE_FRAMES, TOP_SITES = 8, 40
RUNTIME = {"kind": "ClusterTrainingRuntime", "name": "dispatch-kind"}


def job_spec(name: str, scenario: str) -> dict[str, Any]:
    return {
        "name": name,
        "cluster": CLUSTER,
        "runtime": RUNTIME,
        "nodes": 1,
        "command": ["python", "train.py"],
        "env": {"EMULATOR_SCENARIO": scenario},
        "recovery": {"rules": [], "unmatched": "fail"},
    }


def ended_at(records: SqliteRecords, job_id: str) -> float | None:
    """When the supervisor first recorded a terminal outcome of the job's attempt."""
    for entry in records.log(job_id):
        if entry.kind == "attempt" and entry.data.get("state") in (
            "succeeded",
            "failed",
            "cancelled",
        ):
            return entry.at
    return None


def rss_mib() -> float:
    """This process's resident set now (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def heap_sites() -> dict[str, Any]:
    """The traced heap's top allocation sites now: by line (``lines``) and by traceback
    (``sites``)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__),)
    )
    return {
        "lines": [
            f"{s.size / 2**20:8.2f} MiB {s.count:8d} {s.traceback[0]}"
            for s in snapshot.statistics("lineno")[:TOP_SITES]
        ],
        "sites": [
            {"MiB": round(s.size / 2**20, 2), "count": s.count, "at": s.traceback.format()}
            for s in snapshot.statistics("traceback")[:TOP_SITES]
        ],
    }


class MemoryProbe:
    """Samples RSS and the traced heap; keeps the allocation sites at the largest heap."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.series: list[tuple[float, float, float]] = []  # (s since start, RSS, traced MiB)
        self.peak: dict[str, Any] = {}
        self.end: dict[str, Any] = {}
        self.began = time.time()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(MEMORY_EVERY)
            self.sample()

    def sample(self) -> None:
        traced = tracemalloc.get_traced_memory()[0] / 2**20
        self.series.append(
            (round(time.time() - self.began, 1), round(rss_mib(), 1), round(traced, 1))
        )
        if traced < self.peak.get("tracedMiB", 0.0) * 1.05:
            return
        types: dict[str, int] = {}
        for obj in gc.get_objects():
            name = type(obj).__qualname__
            types[name] = types.get(name, 0) + 1
        self.peak = {
            "at": self.series[-1][0],
            "rssMiB": self.series[-1][1],
            "tracedMiB": traced,
            **heap_sites(),
            "types": sorted(types.items(), key=lambda kv: -kv[1])[:40],
        }
        self.write()

    def retained(self) -> None:
        """What is still held once every job has ended: the allocation sites that grow with the
        number of jobs ever followed (the adapter and its capture are still alive here)."""
        gc.collect()
        self.end = {
            "tracedMiB": round(tracemalloc.get_traced_memory()[0] / 2**20, 1),
            "rssMiB": round(rss_mib(), 1),
            **heap_sites(),
        }
        self.write()

    def write(self) -> None:
        """Written at every new peak, so a run killed at its deadline still leaves it."""
        found = {"series": self.series, "peak": self.peak, "end": self.end}
        self.out.write_text(json.dumps(found, indent=1))


async def sample_cpu(series: list[tuple[float, float]], rss: list[tuple[float, float]]) -> None:
    """(wall clock, this process's CPU seconds) every ``CPU_EVERY`` s, into ``series``: what the
    supervisor spent between two moments of the run (``bench.scale``: while it submitted);
    and (wall clock, its RSS in MiB) into ``rss`` where ``/proc`` tells it: how many attempts
    were open at once, and the RSS then."""
    while True:
        now = time.time()
        series.append((now, time.process_time()))
        with contextlib.suppress(OSError):
            rss.append((now, rss_mib()))
        await asyncio.sleep(CPU_EVERY)


class GcPauses:
    """The cyclic garbage collector's collections while ``on``: per generation, how many,
    their seconds in all, the longest, and the objects they freed (``gc.callbacks``)."""

    def __init__(self) -> None:
        #: per generation: collections, seconds in all, the longest, objects collected
        self.by_generation: dict[int, list[float]] = {g: [0, 0.0, 0.0, 0] for g in range(3)}
        self._began = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        took = time.perf_counter() - self._began
        entry = self.by_generation[info["generation"]]
        entry[0] += 1
        entry[1] += took
        entry[2] = max(entry[2], took)
        entry[3] += info["collected"]

    @contextlib.contextmanager
    def on(self) -> Iterator[None]:
        gc.callbacks.append(self._callback)
        try:
            yield
        finally:
            gc.callbacks.remove(self._callback)

    def to_json(self) -> dict[str, dict[str, float]]:
        return {
            str(g): {
                "collections": int(n),
                "seconds": round(total, 3),
                "longest": round(most, 4),
                "collected": int(collected),
            }
            for g, (n, total, most, collected) in self.by_generation.items()
        }


async def supervise(plan: dict[str, Any]) -> dict[str, Any]:
    clock = SystemClock()
    state = Path(plan["state"])
    records = SqliteRecords(database_path(state), clock=clock)
    settings = {"kubeconfig": plan["kubeconfig"], "namespace": plan["namespace"]}
    adapter = KubeflowAdapter(
        ClusterConfig(name=CLUSTER, adapter="kubeflow", settings=settings),
        AdapterContext(state_dir=state / "clusters" / CLUSTER, clock=clock),
    )
    if plan.get("create", True):
        for j in plan["jobs"]:
            records.create_job(parse_spec(job_spec(j["name"], j["scenario"])))
    # names and ids only: the parsed jobs would stay in this process's memory for the whole run
    jobs = sorted((r.job.spec.name, r.id) for r in records.list_jobs())
    supervisor = Supervisor(
        records,
        lambda _: adapter,
        clock,
        plan.get("owner", "bench"),
        poll_interval=plan["pollInterval"],
        lease_ttl=plan.get("leaseTtl", 30.0),
    )
    passes = 0

    def count(_: object) -> None:
        nonlocal passes
        passes += 1

    probe = MemoryProbe(Path(plan["memory"])) if plan.get("memory") else None
    sampling = asyncio.ensure_future(probe.run()) if probe else None
    cpu: list[tuple[float, float]] = []
    rss: list[tuple[float, float]] = []
    timing = asyncio.ensure_future(sample_cpu(cpu, rss))
    began = time.time()
    pauses = GcPauses()
    with pauses.on():
        await supervisor.run(asyncio.Event(), on_step=count, until_idle=True)
    finished = time.time()
    timing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await timing
    cpu.append((time.time(), time.process_time()))
    if probe is not None and sampling is not None:
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
        probe.sample()
        probe.retained()
    out = []
    for name, job_id in jobs:
        record = records.get_job(job_id)
        attempts = records.attempts(job_id)
        out.append(
            {
                "name": name,
                "trainJob": attempts[0].handle.native if attempts and attempts[0].handle else None,
                "attempts": len(attempts),
                "state": record.state.value,
                "cause": record.cause.value if record.cause else None,
                "reportedAt": ended_at(records, job_id),
            }
        )
    records.close()
    return {
        "began": began,
        "finished": finished,
        "passes": passes,
        "jobs": out,
        "cpuSeries": cpu,
        "rssSeries": rss,
        "gc": pauses.to_json(),
    }


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    if plan.get("memory"):
        tracemalloc.start(TRACE_FRAMES)
    profiler = cProfile.Profile() if plan.get("profile") else None
    if profiler is not None:
        profiler.enable()
    result = asyncio.run(supervise(plan))
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(plan["profile"])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpuSeconds"] = usage.ru_utime + usage.ru_stime
    result["peakRssMiB"] = peak_rss_mib(usage)
    Path(sys.argv[2]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()

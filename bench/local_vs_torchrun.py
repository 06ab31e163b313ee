"""Benchmark: dispatch's local scheduler against ``torchrun --standalone``, 1 node x 4 processes.

Launchers: ``torchrun`` alone; ``dispatch+torchrun`` (the job's command is torchrun, which
dispatch runs once for the node: the like-for-like measure of what dispatch adds); and
``dispatch`` (per-rank mode: dispatch starts the 4 ranks itself, no torchrun).

Four figures, each the median of ``--repeat`` runs (runs of the launchers alternate, so load
from elsewhere on the machine hits them alike):

* wall time to completion of a trivial gloo script (``init_process_group``, one all_reduce,
  ``destroy_process_group``), measured from outside: from spawning the launcher's process to
  its exit. For dispatch that process is the real ``dispatch run JOB.yaml --output json``
  (fresh state directory, the embedded local cluster): it parses the spec, records the job,
  supervises it in process (claim, start, follow) and prints the final object.
* submission latency, in the same runs: from spawning the launcher to the first rank's first
  line of Python (each rank records the time before ``import torch``).
* time to notice the end, in the same runs: from the last rank's exit (every rank pid gone or
  a zombie, polled every 2 ms) to the launcher's exit, the moment a script that waits on it
  learns the job ended.
* time from one rank's failure (rank 1 exits 3 after the all_reduce; it records the time just
  before exiting) to all ranks stopped (every rank pid gone or a zombie, polled every 2 ms).

Usage:  python bench/local_vs_torchrun.py [--repeat 7]
Needs torch (pip install -e '.[torch]').

``--trivial N`` measures dispatch's own share without torch, robust to a busy machine: N runs
of the dispatch process with ``python -c pass`` as the job (1 node x 1 process), then N runs
where rank 1 of 2 exits 3 while rank 0 sleeps. Medians of wall phases (spawn to the rank's
exec, import, ``start``, the rank's end to the observed outcome, outcome to exit), of the
dispatch process's own CPU time and of the CPU time of every process of a run (dispatch,
runner, watchdog, rank), and, for failures, the runner's time from reaping the failed rank
to reaping the last stopped one.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

SCRIPT = """
import os, sys, time
out = os.environ["BENCH_OUT"]
rank = int(os.environ["RANK"])
with open(os.path.join(out, f"started-{rank}"), "w") as f:
    f.write(repr(time.time()))
import torch
import torch.distributed as dist
with open(os.path.join(out, f"pid-{rank}"), "w") as f:
    f.write(str(os.getpid()))
dist.init_process_group("gloo")
t = torch.ones(4) * rank
dist.all_reduce(t)
assert t[0].item() == sum(range(dist.get_world_size()))
if os.environ.get("BENCH_FAIL") == "1":
    if rank == 1:
        with open(os.path.join(out, "failed-at"), "w") as f:
            f.write(repr(time.time()))
        os._exit(3)
    time.sleep(120)
dist.destroy_process_group()
"""


#: trivial jobs (``--trivial``): no torch, so only dispatch's own work is measured
TRIVIAL = ["python", "-c", "pass"]
TRIVIAL_FAIL = [
    "python",
    "-c",
    "import os, time\nif os.environ['RANK'] == '1':\n    time.sleep(0.2)\n    os._exit(3)\n"
    "time.sleep(60)",
]


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def drive(workdir: str, state: str, fail: bool, mode: str) -> int:
    """Act as the dispatch process: start the attempt, follow it to its outcome.

    ``mode``: ``torchrun``, ``per-rank`` or ``trivial``; with ``BENCH_REPORT`` set, the times
    and CPU of each phase are written there as JSON.
    """
    marks: dict[str, float] = {"enter": time.time(), "cpuEnter": _cpu_self()}
    from dispatch.adapters.base import AdapterContext
    from dispatch.adapters.local import LocalAdapter
    from dispatch.config import ClusterConfig
    from dispatch.model import Job, parse_spec

    marks.update(imported=time.time(), cpuImported=_cpu_self())
    env = {"BENCH_OUT": workdir, "BENCH_FAIL": "1" if fail else "0"}
    if mode == "trivial":
        command, procs = TRIVIAL_FAIL if fail else TRIVIAL, 2 if fail else 1
    else:
        command = ["torchrun", "trivial.py"] if mode == "torchrun" else ["python", "trivial.py"]
        procs = 4
    spec = parse_spec(
        {
            "name": "bench",
            "nodes": 1,
            "procsPerNode": procs,
            "command": command,
            "workingDir": workdir,
            "env": env,
        }
    )
    adapter = LocalAdapter(ClusterConfig("local", "local"), AdapterContext(Path(state)))

    async def run() -> bool:
        marks.update(parsed=time.time(), cpuParsed=_cpu_self())
        handle = await adapter.start(Job("bench-1", spec, 0.0), 1)
        marks.update(started=time.time(), cpuStarted=_cpu_self())
        async for observation in adapter.watch([handle]):
            if observation.outcome.is_terminal:
                marks.update(outcome=time.time(), cpuOutcome=_cpu_self())
                return observation.outcome.cause is None
        return False

    ok = asyncio.run(run())
    report = os.environ.get("BENCH_REPORT")
    if report:
        Path(report).write_text(json.dumps(marks))
    return 0 if ok else 1


def launch(kind: str, workdir: Path, fail: bool) -> subprocess.Popen[bytes]:
    """Start one launcher: torchrun alone, or the real ``dispatch run JOB.yaml`` (a fresh
    state directory each time, no configuration file: the embedded local cluster); for
    ``trivial``, this script's :func:`drive`."""
    env = {**os.environ, "BENCH_OUT": str(workdir), "BENCH_FAIL": "1" if fail else "0"}
    env["TMPDIR"] = str(workdir)
    if kind == "torchrun":
        argv = [torchrun(), "--standalone", "--nproc-per-node", "4", "trivial.py"]
    elif kind == "trivial":  # the phases of dispatch's own work, timed from inside (drive)
        state = str(workdir / "state")
        argv = [sys.executable, __file__, "--drive", str(workdir), state, str(int(fail)), kind]
    else:
        command = (
            ["torchrun", "trivial.py"] if kind == "dispatch+torchrun" else ["python", "trivial.py"]
        )
        spec = {
            "name": "bench",
            "nodes": 1,
            "procsPerNode": 4,
            "command": command,
            "workingDir": str(workdir),
            "env": {"BENCH_OUT": str(workdir), "BENCH_FAIL": "1" if fail else "0"},
        }
        (workdir / "job.yaml").write_text(json.dumps(spec))  # JSON is YAML
        env["DISPATCH_STATE_DIR"] = str(workdir / "state")
        (workdir / "clusters.yaml").write_text("{}\n")  # no cluster but the embedded local
        env["DISPATCH_CONFIG"] = str(workdir / "clusters.yaml")
        # torchrun is found beside this interpreter, as `pip install` puts it
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        argv = [sys.executable, "-m", "dispatch", "run", "job.yaml", "--output", "json"]
    return subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def torchrun() -> str:
    """torchrun of this interpreter's environment (its folder need not be on PATH)."""
    beside = Path(sys.executable).parent / "torchrun"
    return str(beside) if beside.exists() else "torchrun"


def fresh_dir(base: Path, name: str) -> Path:
    folder = base / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "trivial.py").write_text(SCRIPT)
    return folder


def _pids(folder: Path) -> list[int]:
    """Pids the ranks wrote so far (a file may be seen before its content)."""
    return [int(text) for p in folder.glob("pid-*") if (text := p.read_text())]


def wall_time(kind: str, base: Path) -> dict[str, float]:
    """One successful run: wall time, submission latency and time to notice the end."""
    folder = fresh_dir(base, kind.replace("+", "-"))
    spawned, began = time.time(), time.perf_counter()
    process = launch(kind, folder, fail=False)
    pids: list[int] = []
    ranks_gone: float | None = None
    while process.poll() is None:
        if len(pids) < 4:
            pids = _pids(folder)
        elif ranks_gone is None and all(_gone(pid) for pid in pids):
            ranks_gone = time.time()
        time.sleep(0.002)
    exited, took = time.time(), time.perf_counter() - began
    if process.returncode != 0:
        raise SystemExit(f"{kind} failed with exit code {process.returncode}")
    if ranks_gone is None:  # the launcher exited within one poll of its last rank
        ranks_gone = exited
    started = min(float(p.read_text()) for p in folder.glob("started-*"))
    return {"wall": took, "submit": started - spawned, "notice": exited - ranks_gone}


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def stop_time(kind: str, base: Path) -> float:
    folder = fresh_dir(base, kind.replace("+", "-"))
    process = launch(kind, folder, fail=True)
    pids: list[int] = []
    while not (folder / "failed-at").exists() or len(pids) < 4:
        pids = _pids(folder)
        if process.poll() is not None:
            raise SystemExit(f"{kind} ended before the failure was recorded")
        time.sleep(0.002)
    while not all(_gone(pid) for pid in pids):
        time.sleep(0.002)
    stopped = time.time()
    failed = float((folder / "failed-at").read_text())
    process.wait()
    return stopped - failed


KINDS = ("torchrun", "dispatch+torchrun", "dispatch")


def _become_subreaper() -> None:
    """Orphans (the attempt runner, once the dispatch process has exited) become our children,
    so their CPU time is counted in RUSAGE_CHILDREN."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def trivial_run(base: Path, fail: bool) -> dict[str, float]:
    """One run of the dispatch process with a trivial job; its phases in seconds."""
    folder = fresh_dir(base, "trivial")
    report = folder / "report.json"
    os.environ["BENCH_REPORT"] = str(report)
    cpu_before = _cpu_children()
    spawned = time.time()
    process = launch("trivial", folder, fail)
    _, code, _ = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(code)
    exited = time.time()
    while True:  # the runner and its watchdog, re-parented to us
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            break
    if process.returncode != (1 if fail else 0):
        raise SystemExit(f"trivial run exited {process.returncode}")
    marks = json.loads(report.read_text())
    status = json.loads(next((folder / "state").glob("jobs/*/attempt-1/status.json")).read_text())
    records = status["processes"]
    figures = {
        "spawn to rank started": records[0]["startedAt"] - spawned,
        "spawn to dispatch code": marks["enter"] - spawned,
        "import (wall)": marks["imported"] - marks["enter"],
        "import (cpu)": marks["cpuImported"] - marks["cpuEnter"],
        "start() (wall)": marks["started"] - marks["parsed"],
        "start() (cpu)": marks["cpuStarted"] - marks["cpuParsed"],
        "outcome to exit": exited - marks["outcome"],
        "dispatch process cpu": marks["cpuOutcome"],
        "all processes cpu": _cpu_children() - cpu_before,
        "wall": exited - spawned,
    }
    if fail:
        failed = next(r for r in records if r["exitCode"] == 3)
        stopped = [r["endedAt"] for r in records if r["stoppedBy"]]
        figures["failure reaped to all stopped"] = max(stopped) - failed["endedAt"]
        figures["failure reaped to outcome"] = marks["outcome"] - failed["endedAt"]
    else:
        figures["rank ended to outcome"] = marks["outcome"] - records[0]["endedAt"]
    return figures


def trivial(runs: int) -> None:
    """Print medians (min-max) of ``runs`` trivial successful runs, then of failing ones."""
    _become_subreaper()
    base = Path(tempfile.mkdtemp(prefix="dispatch-bench-"))
    try:
        for fail in (False, True):
            samples = [trivial_run(base, fail) for _ in range(runs)]
            print(f"{'failing' if fail else 'succeeding'} trivial job, {runs} runs, ms:")
            for name in samples[0]:
                values = [s[name] * 1000 for s in samples]
                print(
                    f"  {name:32s} {statistics.median(values):8.1f} "
                    f"({min(values):.1f}-{max(values):.1f})"
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)


FIGURES = ("wall", "submit", "notice", "stop")


def measure(repeat: int) -> dict[str, Any]:
    """``repeat`` rounds of every launcher (a successful run, then a failing one); medians and
    ranges of each figure, as ``<figure>Median``, ``Min`` and ``Max``."""
    base = Path(tempfile.mkdtemp(prefix="dispatch-bench-"))
    samples: dict[str, dict[str, list[float]]] = {k: {f: [] for f in FIGURES} for k in KINDS}
    try:
        for _ in range(repeat):
            for kind in KINDS:
                for figure, value in wall_time(kind, base).items():
                    samples[kind][figure].append(value)
                samples[kind]["stop"].append(stop_time(kind, base))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rows = []
    torchrun_wall = statistics.median(samples["torchrun"]["wall"])
    for kind in KINDS:
        row: dict[str, Any] = {"launcher": kind, "runs": repeat}
        for figure, values in samples[kind].items():
            row[f"{figure}Median"] = statistics.median(values)
            row[f"{figure}Min"], row[f"{figure}Max"] = min(values), max(values)
        row["wallOverhead"] = row["wallMedian"] / torchrun_wall - 1
        rows.append(row)
    return {"rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--trivial", type=int, metavar="N", help="dispatch's own share, N runs")
    parser.add_argument("--drive", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        workdir, state, fail, mode = args.drive
        sys.exit(drive(workdir, state, fail == "1", mode))
    if args.trivial:
        trivial(args.trivial)
        return
    rows = measure(args.repeat)["rows"]
    print(
        f"runs per figure: {args.repeat}; CPUs: {os.cpu_count()}; python {sys.version.split()[0]}"
    )
    names = {
        "wall": "wall time",
        "submit": "spawn to first rank",
        "notice": "ranks exited to launcher exit",
        "stop": "failure to all stopped",
    }
    print("| launcher | " + " | ".join(f"{names[f]} median (min-max) s" for f in FIGURES) + " |")
    print("|---|" + "---|" * len(FIGURES))
    for r in rows:
        cells = [f"{r[f + 'Median']:.3f} ({r[f + 'Min']:.3f}-{r[f + 'Max']:.3f})" for f in FIGURES]
        print(f"| {r['launcher']} | " + " | ".join(cells) + " |")
    for r in rows[1:]:
        print(f"{r['launcher']} wall-time overhead vs torchrun: {r['wallOverhead']:+.1%}")


if __name__ == "__main__":
    main()

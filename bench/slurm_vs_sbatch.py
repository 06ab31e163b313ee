"""dispatch's Slurm adapter against ``sbatch`` + ``squeue`` by hand, on the real two-node
Slurm the tests start (tests/slurm/realslurm.py; needs the Slurm packages and root).

Two figures per run, each the median of ``--repeat`` runs, launchers alternating:

* submission latency: from the call to its return with a job id (``SlurmAdapter.start``,
  which also probes the cluster on first use, renders the script and adopts if it exists;
  ``sbatch --parsable``);
* time to notice the end: from the job's last command (it writes the time to a file just
  before exiting) to the tool reporting the end (``SlurmAdapter.watch`` yielding a terminal
  observation; a shell-style loop of ``squeue -h -j ID -o %T`` every ``--poll`` seconds until
  the job is no longer listed or shows a terminal state).

Both follow at the same interval (``--poll``, default 1 s; the adapter's own default
``pollInterval`` is 10 s).

    python -m bench.slurm_vs_sbatch [--repeat 3] [--poll 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.slurm import SlurmAdapter
from dispatch.config import ClusterConfig
from dispatch.model import Job, parse_spec

ROOT = Path(__file__).resolve().parents[1]
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}


def realslurm() -> Any:
    sys.path.insert(0, str(ROOT))
    from tests.slurm import realslurm as module

    return module


def job_command(marker: Path) -> str:
    return f"sleep 1; date +%s.%N > {marker}"


def by_hand(cluster: Any, folder: Path, poll: float) -> tuple[float, float]:
    marker = folder / "hand-ended"
    began = time.time()
    done = cluster.run(
        "sbatch", "--parsable", "-N", "1", "-o", str(folder / "hand-%j.out"),
        "--wrap", job_command(marker),
    )  # fmt: skip
    submitted = time.time() - began
    job_id = done.stdout.strip().split(";")[0]
    while True:
        state = cluster.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False).stdout.strip()
        if not state or state in TERMINAL:
            break
        time.sleep(poll)
    noticed = time.time()
    return submitted, noticed - float(marker.read_text())


def with_dispatch(cluster: Any, folder: Path, poll: float, n: int) -> tuple[float, float]:
    marker = folder / f"dispatch-ended-{n}"
    config = ClusterConfig(
        name="bench",
        adapter="slurm",
        settings={
            "slurmConf": str(cluster.conf),
            "outputDir": str(folder / "out"),
            "pollInterval": poll,
            "commandTimeout": 60,
        },
    )
    adapter = SlurmAdapter(config, AdapterContext(state_dir=folder / "state"))
    spec = parse_spec(
        {
            "name": "bench",
            "cluster": "bench",
            "nodes": 1,
            "command": ["sh", "-c", job_command(marker)],
        }
    )
    job = Job(id=f"bench-{n:04d}", spec=spec, created_at=time.time())

    async def go() -> tuple[float, float]:
        began = time.time()
        handle = await adapter.start(job, 1)
        submitted = time.time() - began
        async for seen in adapter.watch([handle]):
            if seen.outcome.is_terminal:
                break
        return submitted, time.time() - float(marker.read_text())

    return asyncio.run(go())


def run(repeat: int, poll: float) -> dict[str, Any]:
    module = realslurm()
    why = module.why_unavailable()
    if why:
        return {"skipped": why}
    cluster = module.start(tag=f"b{int(time.time()) % 1000}")
    figures: dict[str, dict[str, list[float]]] = {
        k: {"submit": [], "notice": []} for k in ("sbatch+squeue", "dispatch")
    }
    try:
        folder = Path(tempfile.mkdtemp(prefix="bench-slurm-", dir=cluster.scratch))
        for n in range(repeat):
            for kind in figures:
                if kind == "dispatch":
                    submitted, noticed = with_dispatch(cluster, folder, poll, n)
                else:
                    submitted, noticed = by_hand(cluster, folder, poll)
                figures[kind]["submit"].append(submitted)
                figures[kind]["notice"].append(noticed)
    finally:
        module.stop(cluster)
    rows = []
    for kind, values in figures.items():
        row: dict[str, Any] = {"tool": kind, "runs": repeat, "poll": poll}
        for key, numbers in values.items():
            row[f"{key}Median"] = statistics.median(numbers)
            row[f"{key}Min"], row[f"{key}Max"] = min(numbers), max(numbers)
        rows.append(row)
    return {"rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args()
    print(json.dumps(run(args.repeat, args.poll), indent=1))


if __name__ == "__main__":
    main()

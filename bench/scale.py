"""Supervision at scale on the Kubernetes API emulator: dispatch against the Kubeflow SDK.

N TrainJobs (1 node each) run through a mix of scenarios carried in their own environment
(``EMULATOR_SCENARIO``: success, exit code 3, OOMKilled, a longer success), on an emulated
cluster in this process (API server, Trainer, JobSet, Job, scheduler, kubelet). The tool under
test runs in a child process, so its CPU time and memory are its own:

* ``dispatch``: the real ``Supervisor`` + ``KubeflowAdapter`` (``bench/scale_dispatch.py``),
  which starts the N jobs and supervises them until every one has ended;
* ``sdk``: the Kubeflow SDK's ``TrainerClient.wait_for_job_status``, one waiter per job with
  the SDK's default polling interval (2 real seconds), in the SDK's own virtual environment
  (``tests/emulator/sdk_venv.py``); the TrainJobs are created directly in the emulator's store,
  so every request the emulator counts is a waiter's.

Figures: API requests served per job per minute of job lifetime (the emulator's accounting,
over the sum of every TrainJob's lifetime from creation to its terminal condition), open
watch streams (the most seen at once, sampled every 0.1 s), time from the TrainJob's
terminal condition appearing in the store to the tool reporting the end (p50, p99), the
child's CPU seconds and peak RSS. Emulated time runs ``time_scale`` times faster (job
lifetimes are chosen in real seconds); every tool's intervals stay in real seconds.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dispatch.testing.k8s import ClusterConfig, Emulator, FaultRule
from dispatch.testing.k8s.controllers import standard_controllers
from dispatch.testing.k8s.runtimes import torch_strict

ROOT = Path(__file__).resolve().parents[1]
PLAIN_RUNTIME = ROOT / "examples" / "kubeflow" / "runtimes" / "plain.yaml"
TRAINER = "trainer.kubeflow.org/v1alpha1"
NAMESPACE = "default"
#: the mix: (kind, share of the mean lifetime, pod behaviour); jobs take them in turn
MIX: tuple[tuple[str, float, dict[str, Any]], ...] = (
    ("success", 1.0, {}),
    ("exit-3", 0.6, {"exitCode": 3}),
    ("oom", 0.8, {"oomKilled": True}),
    ("long-success", 1.5, {}),
)


def scenario(index: int, lifetime: float, scale: float) -> tuple[str, str]:
    """The kind and ``EMULATOR_SCENARIO`` text of job ``index``: a deterministic mix, each
    lifetime spread over 0.5-1.5x its share of ``lifetime`` (real seconds)."""
    kind, share, extra = MIX[index % len(MIX)]
    spread = 0.5 + ((index * 37) % 101) / 100
    run_for = round(lifetime * share * spread * scale, 1)
    return kind, json.dumps({"default": {"startAfter": 1, "runFor": run_for, **extra}})


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


@dataclass
class ServerTimes:
    """Wall-clock times the store saw each TrainJob created and first terminal (loop thread)."""

    created: dict[str, float] = field(default_factory=dict)
    terminal: dict[str, float] = field(default_factory=dict)
    terminal_type: dict[str, str] = field(default_factory=dict)
    rtype: Any = None  # the TrainJob resource type, once known

    def hook(self, change: Any) -> None:
        if change.rtype.kind != "TrainJob":
            return
        name = change.obj["metadata"]["name"]
        self.created.setdefault(name, time.time())
        if name in self.terminal:
            return
        for c in (change.obj.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                self.terminal[name] = time.time()
                self.terminal_type[name] = c["type"]


class WatchSampler(threading.Thread):
    def __init__(self, emu: Emulator) -> None:
        super().__init__(daemon=True)
        self.emu, self.peak, self.stop = emu, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            self.peak = max(self.peak, self.emu.requests().open_watch_total)


def emulator_config(jobs: int, scale: float) -> ClusterConfig:
    nodes = max(2, math.ceil(jobs / 200))
    return ClusterConfig(
        namespaces=(NAMESPACE, "kubeflow-system"),
        nodes=tuple(f"node-{i}" for i in range(nodes)),
        node_capacity={"cpu": "1000", "memory": "4Ti", "pods": "400"},
        time_scale=scale,
        compaction_window=1e9,
        controllers=standard_controllers(),
    )


def prepare(emu: Emulator, times: ServerTimes) -> None:
    emu.create(yaml.safe_load(PLAIN_RUNTIME.read_text()))
    emu.create(torch_strict())  # the SDK needs a framework label; fails on the first exit
    emu.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kubeflow-trainer-public", "namespace": "kubeflow-system"},
            "data": {"kubeflow_trainer_version": "v2.3.0"},
        }
    )
    cluster = emu.cluster
    times.rtype = cluster.rtype(TRAINER, "TrainJob")
    emu.call(lambda: cluster.store.on_change(times.hook))
    emu.cluster.accounting.reset()


def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def run_child(argv: list[str], deadline: float) -> tuple[bool, str]:
    """Run a child to its end or ``deadline`` real seconds; (finished, stderr tail)."""
    process = spawn(argv)
    try:
        _, err = process.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        return False, f"killed after {deadline:.0f} s"
    if process.returncode != 0:
        return False, err.decode(errors="replace")[-2000:]
    return True, ""


#: single-object reads dispatch makes to submit (the probe and each start), not to follow
SUBMISSION_GETS = ("clustertrainingruntimes", "trainingruntimes", "configmaps", "discovery",
                   "namespaces")  # fmt: skip


def following_requests(counts: Any, jobs: int) -> int:
    """dispatch's requests that follow jobs: every list and watch, and every GET except the
    submission's (``SUBMISSION_GETS`` and one GET of its TrainJob per start)."""
    reads = sum(n for (verb, _), n in counts.requests.items() if verb in ("list", "watch"))
    gets = {resource: n for (verb, resource), n in counts.requests.items() if verb == "get"}
    adoption = min(gets.get("trainjobs", 0), jobs)
    return reads + sum(n for r, n in gets.items() if r not in SUBMISSION_GETS) - adoption


def summarise(
    tool: str,
    jobs: int,
    times: ServerTimes,
    reported: dict[str, float],
    counts: Any,
    peak_watches: int,
    child: dict[str, Any],
) -> dict[str, Any]:
    lifetimes = [times.terminal[n] - times.created[n] for n in times.terminal if n in times.created]
    job_minutes = sum(lifetimes) / 60
    delays = [reported[n] - times.terminal[n] for n in reported if n in times.terminal]
    # jobs that ended once every TrainJob existed: supervision alone, not the submission
    submitted = max(times.created.values(), default=0.0)
    settled = [
        reported[n] - times.terminal[n]
        for n in reported
        if n in times.terminal and times.terminal[n] > submitted
    ]
    # following the jobs, without submitting them: all of the SDK run's requests (it submits
    # nothing); dispatch's lists and watches of every kind and its reads of single objects,
    # except the submission's (the cluster probe, each runtime read, and the one GET per
    # start that is its adoption check)
    following = counts.total if tool == "sdk" else following_requests(counts, jobs)
    by_kind: dict[str, int] = {}
    for (verb, resource), n in sorted(counts.requests.items()):
        by_kind[f"{verb} {resource}"] = n
    return {
        "tool": tool,
        "jobs": jobs,
        "ended": len(times.terminal),
        "reported": len(reported),
        "requests": counts.total,
        "requestsByKind": by_kind,
        "requestsPerJob": round(counts.total / jobs, 1),
        "meanLifetimeSeconds": round(statistics.mean(lifetimes), 1) if lifetimes else None,
        "requestsPerJobMinute": round(counts.total / job_minutes, 2) if job_minutes else None,
        "followingPerJobMinute": round(following / job_minutes, 2) if job_minutes else None,
        "peakOpenWatches": peak_watches,
        "watchesStarted": counts.watches_started,
        "detectP50": percentile(delays, 0.5),
        "detectP99": percentile(delays, 0.99),
        "detectMax": max(delays) if delays else None,
        "submissionSeconds": round(submitted - min(times.created.values(), default=0.0), 1),
        "endedAfterSubmission": len(settled),
        "detectP50AfterSubmission": percentile(settled, 0.5),
        "detectP99AfterSubmission": percentile(settled, 0.99),
        "cpuSeconds": round(child.get("cpuSeconds", 0.0), 2),
        "peakRssMiB": round(child.get("peakRssMiB", 0.0), 1),
        "wallSeconds": round(child.get("finished", 0) - child.get("began", 0), 1),
    }


def run_dispatch(
    jobs: int,
    lifetime: float,
    scale: float,
    deadline: float,
    profile: Path | None = None,
    *,
    memory: Path | None = None,
    faults: tuple[FaultRule, ...] = (),
    kills: int = 0,
) -> dict[str, Any]:
    """dispatch's supervisor over ``jobs`` jobs. With ``faults``, those rules are active on
    the emulator for the whole run; with ``kills``, the supervisor is SIGKILLed that many
    times (once 1/(kills+1), 2/(kills+1)... of the TrainJobs exist) and restarted under a new owner name against
    the same records (lease TTL 5 s, so a restarted one takes over quickly)."""
    times = ServerTimes()
    with (
        tempfile.TemporaryDirectory(prefix="dispatch-scale-") as tmp,
        Emulator(emulator_config(jobs, scale), kubeconfig=Path(tmp) / "kubeconfig") as emu,
    ):
        prepare(emu, times)
        for rule in faults:
            emu.faults.add(rule)
        plan = {
            "kubeconfig": str(emu.kubeconfig),
            "namespace": NAMESPACE,
            "state": str(Path(tmp) / "state"),
            "pollInterval": 5.0,
            "jobs": [
                {"name": f"scale-{i:05d}", "scenario": scenario(i, lifetime, scale)[1]}
                for i in range(jobs)
            ],
            "profile": str(profile) if profile else None,
            "memory": str(memory) if memory else None,
            "leaseTtl": 5.0 if kills else 30.0,
        }
        out = Path(tmp) / "out.json"
        argv = [
            sys.executable,
            "-m",
            "bench.scale_dispatch",
            str(Path(tmp) / "plan.json"),
            str(out),
        ]
        sampler = WatchSampler(emu)
        sampler.start()
        killed_at: list[int] = []  # TrainJobs created when each kill landed on a live supervisor
        for kill in range(kills):
            (Path(tmp) / "plan.json").write_text(
                json.dumps({**plan, "owner": f"bench-{kill}", "create": kill == 0})
            )
            process = spawn(argv)
            wanted = (kill + 1) * jobs / (kills + 1)  # killed while it is starting jobs
            until = time.time() + lifetime * 3
            while len(times.created) < wanted and time.time() < until:
                time.sleep(0.02)
            if process.poll() is None:
                killed_at.append(len(times.created))
            process.kill()
            process.communicate()
        plan.update(owner=f"bench-{kills}", create=kills == 0)
        (Path(tmp) / "plan.json").write_text(json.dumps(plan))
        finished, why = run_child(argv, deadline)
        sampler.stop.set()
        counts = emu.requests()
        if not finished:
            return {"tool": "dispatch", "jobs": jobs, "error": why}
        child = json.loads(out.read_text())
        reported = {j["trainJob"]: j["reportedAt"] for j in child["jobs"] if j["reportedAt"]}
        result = summarise("dispatch", jobs, times, reported, counts, sampler.peak, child)
        result["passes"] = child["passes"]
        result["killedAt"] = killed_at
        result["lost"] = sum(1 for j in child["jobs"] if j["state"] not in ("succeeded", "failed"))
        trainjobs = emu.call(lambda: list(emu.cluster.store.objects(times.rtype)))
        per_job: dict[str, int] = {}
        for obj in trainjobs:
            job = (obj["metadata"].get("labels") or {}).get("dispatch.dev/job", "")
            per_job[job] = per_job.get(job, 0) + 1
        result["duplicated"] = sum(1 for j in child["jobs"] if j["attempts"] != 1) + sum(
            1 for n in per_job.values() if n > 1
        )
        result["trainJobs"] = len(trainjobs)
        expected = {f"scale-{i:05d}": scenario(i, lifetime, scale)[0] for i in range(jobs)}
        result["wrongState"] = sum(
            1
            for j in child["jobs"]
            if (j["state"] == "succeeded") != (expected[j["name"]] in ("success", "long-success"))
        )
        return result


def sdk_python() -> tuple[Path | None, str]:
    sys.path.insert(0, str(ROOT))
    from tests.emulator.sdk_venv import ensure_sdk_venv

    return ensure_sdk_venv()


def run_sdk(jobs: int, lifetime: float, scale: float, deadline: float) -> dict[str, Any]:
    python, why = sdk_python()
    if python is None:
        return {"tool": "sdk", "jobs": jobs, "error": f"skipped: {why}"}
    times = ServerTimes()
    with (
        tempfile.TemporaryDirectory(prefix="dispatch-scale-") as tmp,
        Emulator(emulator_config(jobs, scale), kubeconfig=Path(tmp) / "kubeconfig") as emu,
    ):
        prepare(emu, times)
        names = [f"sdk-{i:05d}" for i in range(jobs)]
        plan = {"kubeconfig": str(emu.kubeconfig), "namespace": NAMESPACE, "names": names}
        (Path(tmp) / "plan.json").write_text(json.dumps(plan))
        out = Path(tmp) / "out.json"
        sampler = WatchSampler(emu)
        holder: dict[str, tuple[bool, str]] = {}
        child = threading.Thread(
            target=lambda: holder.setdefault(
                "done",
                run_child([str(python), str(ROOT / "bench" / "scale_sdk.py"), str(Path(tmp) / "plan.json"), str(out)], deadline),
            )
        )  # fmt: skip
        child.start()
        ready = Path(str(out) + ".clients")
        while not ready.exists() and child.is_alive():
            time.sleep(0.05)
        trainjob = emu.cluster.rtype(TRAINER, "TrainJob")
        for i, name in enumerate(names):
            body = {
                "apiVersion": TRAINER,
                "kind": "TrainJob",
                "metadata": {"name": name},
                "spec": {
                    "runtimeRef": {"name": "torch-strict"},
                    "trainer": {
                        "numNodes": 1,
                        "env": [{"name": "EMULATOR_SCENARIO", "value": scenario(i, lifetime, scale)[1]}],
                    },
                },
            }  # fmt: skip
            emu.call(lambda body=body: emu.cluster.store.create(trainjob, NAMESPACE, body))
        emu.cluster.accounting.reset()  # the clients' start-up reads are not the waiting
        sampler.start()
        Path(str(out) + ".go").touch()
        child.join()
        sampler.stop.set()
        counts = emu.requests()
        finished, why = holder.get("done", (False, "the child did not report"))
        if not finished:
            return {"tool": "sdk", "jobs": jobs, "error": why}
        data = json.loads(out.read_text())
        reported = {n: j["reportedAt"] for n, j in data["jobs"].items()}
        result = summarise("sdk", jobs, times, reported, counts, sampler.peak, data)
        said: dict[str, int] = {}
        for j in data["jobs"].values():
            key = j["said"].split(":")[0]
            said[key] = said.get(key, 0) + 1
        if data.get("stuck"):
            said["no answer"] = len(data["stuck"])
        result["said"] = said
        result["lost"] = jobs - len(reported)
        return result


def run(
    sizes: list[int],
    lifetime: float,
    scale: float,
    tools: list[str],
    profile: Path | None = None,
    memory: Path | None = None,
) -> list[dict[str, Any]]:
    results = []
    for n in sizes:
        deadline = (120 + n * 0.6 + lifetime * 3) * (4 if memory else 1)  # tracing is slow
        for tool in tools:
            began = time.time()
            if tool == "dispatch":
                result = run_dispatch(n, lifetime, scale, deadline, profile, memory=memory)
            else:
                result = run_sdk(n, lifetime, scale, deadline)
            result["benchSeconds"] = round(time.time() - began, 1)
            result["lifetime"] = lifetime
            results.append(result)
            print(json.dumps(result), file=sys.stderr)
    return results


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[100])
    parser.add_argument("--lifetime", type=float, default=20.0, help="mean real seconds")
    parser.add_argument("--time-scale", type=float, default=10.0)
    parser.add_argument("--tools", nargs="+", default=["dispatch", "sdk"])
    parser.add_argument("--profile", type=Path, help="cProfile the supervisor into this file")
    parser.add_argument(
        "--memory", type=Path, help="trace the supervisor's heap; its peak sites into this file"
    )
    args = parser.parse_args()
    found = run(args.jobs, args.lifetime, args.time_scale, args.tools, args.profile, args.memory)
    print(json.dumps(found, indent=1))

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

Watch bookmarks come as a real API server sends them: kube-apiserver's watch cache sends each
watcher that asked for them (``allowWatchBookmarks``) a bookmark about once a minute of real
time (and shortly before the watch's timeout). The emulator's ``bookmark_interval`` is in
emulated seconds, so it is set to ``60 * time_scale``: once a real minute here too, not once
every 6 real seconds (its default of 60 emulated seconds at 10x), which would prove quiet
streams caught up ten times more often than a real server allows.

Following requests (dispatch's, ``following_requests``): every list and watch, and every GET
except the submission's. A start creates its runtime copy and its TrainJob and reads nothing
of the TrainJob (it reads only after a ``409 AlreadyExists``: a start made again, e.g. by a
supervisor restarted after a kill); the runtime is read once per ~2 s burst of starts
(``SUBMISSION_GETS``, as is the cluster probe). So a GET of a TrainJob is following: the
reads when an attempt is retired, or when a snapshot is taken (as are a failed pod's log
reads). A GET after a 409 would be submission yet counts as following here: the figure can
only overstate dispatch's following, never hide any.

With ``flow_control`` (``run_dispatch``; ``bench/scale_submission.py``) the emulator answers
429 as API Priority and Fairness does; the requests it rejected are counted apart
(``throttled``): ``requests`` holds only those it served.

The SDK's run has a deadline; when it is killed there, its row says where it stopped
answering (``stopped``): how many waiters had returned and when, and the emulator's request
rate in the last minute, from the child's progress line and the parent's samples.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dispatch.testing.k8s import ClusterConfig, Emulator, FaultRule
from dispatch.testing.k8s.controllers import standard_controllers
from dispatch.testing.k8s.flowcontrol import FlowControl
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


def cpu_at(series: list[tuple[float, float]], when: float) -> float | None:
    """CPU seconds at wall-clock ``when``, linearly between the samples around it (None:
    outside the series)."""
    for (t0, c0), (t1, c1) in itertools.pairwise(series):
        if t0 <= when <= t1:
            return c0 if t1 == t0 else c0 + (c1 - c0) * (when - t0) / (t1 - t0)
    return None


def cpu_per_job(
    series: list[tuple[float, float]], first: float, last: float, jobs: int
) -> float | None:
    """Milliseconds of CPU per job between wall-clock ``first`` and ``last`` (None: unknown)."""
    began, ended = cpu_at(series, first), cpu_at(series, last)
    if began is None or ended is None or not jobs:
        return None
    return round((ended - began) / jobs * 1000, 2)


def open_at_most(
    series: list[tuple[float, float]],
    created: Mapping[str, float],
    reported: Mapping[str, float],
) -> dict[str, float] | None:
    """Over the RSS samples (wall clock, MiB): the most attempts open at one of them (their
    TrainJob created, their end not reported yet), the RSS then, and the first RSS sampled;
    None without samples. What one open attempt costs, so the peaks of runs that submit at
    different speeds (and so keep different numbers open at once) can be compared."""
    if not series:
        return None
    starts = sorted(created.values())
    ends = sorted(reported[name] for name in created if name in reported)
    most, _, rss = max(
        (bisect.bisect_right(starts, t) - bisect.bisect_right(ends, t), t, r) for t, r in series
    )
    return {"attempts": most, "rssMiB": round(rss, 1), "firstRssMiB": round(series[0][1], 1)}


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


#: seconds between the samples of requests served kept by ``WatchSampler``
RATE_EVERY = 1.0
#: real seconds between the bookmarks a real API server's watch cache sends a watcher
BOOKMARK_EVERY = 60.0


class WatchSampler(threading.Thread):
    """The most watch streams open at once (every 0.1 s), and the requests served so far
    (every ``RATE_EVERY`` s: ``served``, wall-clock time and total), with this process's CPU
    seconds then (``cpu``: the emulator's threads, which answer and run the controllers, and
    the bench's own samplers, which are a small part)."""

    def __init__(self, emu: Emulator) -> None:
        super().__init__(daemon=True)
        self.emu, self.peak, self.stop = emu, 0, threading.Event()
        self.served: list[tuple[float, int]] = []
        self.cpu: list[tuple[float, float]] = []

    def run(self) -> None:
        while not self.stop.wait(0.1):
            counts = self.emu.requests()
            self.peak = max(self.peak, counts.open_watch_total)
            now = time.time()
            if not self.served or now - self.served[-1][0] >= RATE_EVERY:
                self.served.append((now, counts.total))
                self.cpu.append((now, time.process_time()))

    def served_since(self, since: float) -> tuple[int, float]:
        """Requests served from ``since`` (wall clock; the first sample at the earliest) to
        the last sample, and the seconds between those samples."""
        if not self.served:
            return 0, 0.0
        first = [s for s in self.served if s[0] <= since][-1:] or self.served[:1]
        (began, before), (ended, total) = first[0], self.served[-1]
        return total - before, ended - began


def emulator_config(
    jobs: int, scale: float, flow_control: FlowControl | None = None
) -> ClusterConfig:
    """The emulated cluster for ``jobs`` jobs; bookmarks once a real minute (see above)."""
    nodes = max(2, math.ceil(jobs / 200))
    return ClusterConfig(
        namespaces=(NAMESPACE, "kubeflow-system"),
        nodes=tuple(f"node-{i}" for i in range(nodes)),
        node_capacity={"cpu": "1000", "memory": "4Ti", "pods": "400"},
        time_scale=scale,
        compaction_window=1e9,
        controllers=standard_controllers(),
        bookmark_interval=BOOKMARK_EVERY * scale,
        flow_control=flow_control,
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


#: single-object reads dispatch makes to submit (the cluster probe, and the runtime read once
#: per burst of starts), not to follow; a GET of a TrainJob is not among them (see above)
SUBMISSION_GETS = ("clustertrainingruntimes", "trainingruntimes", "configmaps", "discovery",
                   "namespaces")  # fmt: skip


def following_requests(counts: Any) -> int:
    """dispatch's requests that follow jobs: every list and watch, and every GET except the
    submission's (``SUBMISSION_GETS``); GETs of TrainJobs count (retirement reads)."""
    return sum(
        n
        for (verb, resource), n in counts.requests.items()
        if verb in ("list", "watch") or (verb == "get" and resource not in SUBMISSION_GETS)
    )


def summarise(
    tool: str,
    jobs: int,
    times: ServerTimes,
    reported: dict[str, float],
    counts: Any,
    peak_watches: int,
    child: dict[str, Any],
    server_cpu: list[tuple[float, float]] | None = None,
) -> dict[str, Any]:
    """One tool's row. ``server_cpu``: the bench process's CPU samples (``WatchSampler.cpu``),
    for the emulator's share of the machine while the jobs were submitted."""
    lifetimes = [times.terminal[n] - times.created[n] for n in times.terminal if n in times.created]
    job_minutes = sum(lifetimes) / 60
    delays = [reported[n] - times.terminal[n] for n in reported if n in times.terminal]
    # jobs that ended once every TrainJob existed: supervision alone, not the submission
    first = min(times.created.values(), default=0.0)
    submitted = max(times.created.values(), default=0.0)
    settled = [
        reported[n] - times.terminal[n]
        for n in reported
        if n in times.terminal and times.terminal[n] > submitted
    ]
    # following the jobs, without submitting them: all of the SDK run's requests (it submits
    # nothing); dispatch's lists and watches of every kind and its reads of single objects,
    # except the submission's (the cluster probe and the runtime reads)
    following = counts.total if tool == "sdk" else following_requests(counts)
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
        "throttled": counts.throttled_total,
        "throttledByKind": {f"{v} {r}": n for (v, r), n in sorted(counts.throttled.items())},
        "requestsPerJob": round(counts.total / jobs, 1),
        "meanLifetimeSeconds": round(statistics.mean(lifetimes), 1) if lifetimes else None,
        "requestsPerJobMinute": round(counts.total / job_minutes, 2) if job_minutes else None,
        "followingPerJobMinute": round(following / job_minutes, 2) if job_minutes else None,
        # of which the failed ranks' last output, read once per failed attempt (evidence the
        # SDK does not keep): a GET of pods/log
        "lastWordsPerJobMinute": (
            round(counts.requests.get(("get", "pods/log"), 0) / job_minutes, 2)
            if job_minutes
            else None
        ),
        "peakOpenWatches": peak_watches,
        "watchesStarted": counts.watches_started,
        "detectP50": percentile(delays, 0.5),
        "detectP99": percentile(delays, 0.99),
        "detectMax": max(delays) if delays else None,
        "submissionSeconds": round(submitted - first, 1),
        "endedAfterSubmission": len(settled),
        "detectP50AfterSubmission": percentile(settled, 0.5),
        "detectP99AfterSubmission": percentile(settled, 0.99),
        "cpuSeconds": round(child.get("cpuSeconds", 0.0), 2),
        # the supervisor's CPU from the first TrainJob created to the last, per job: what a
        # start costs it (the streams' and judgements' work meanwhile included)
        "submissionCpuMsPerJob": cpu_per_job(child.get("cpuSeries", []), first, submitted, jobs),
        # the emulator's CPU over the same span, per job: on a machine of two cores the two
        # processes share them, so together they bound how fast submission can go here
        "emulatorSubmissionCpuMsPerJob": cpu_per_job(server_cpu or [], first, submitted, jobs),
        "peakRssMiB": round(child.get("peakRssMiB", 0.0), 1),
        # the most attempts open at once and the RSS then (dispatch only)
        "openAtMost": open_at_most(child.get("rssSeries", []), times.created, reported),
        "wallSeconds": round(child.get("finished", 0) - child.get("began", 0), 1),
        # the supervisor's cyclic garbage collections, per generation (dispatch only)
        "gcPauses": child.get("gc"),
    }


def job_times(times: ServerTimes, reported: dict[str, float]) -> list[dict[str, Any]]:
    """Each job's creation, terminal condition and report, in real seconds after the first
    creation (None: not seen), by creation: where detection waited, over the run."""
    start = min(times.created.values(), default=0.0)

    def at(t: float | None) -> float | None:
        return None if t is None else round(t - start, 3)

    return [
        {
            "trainJob": n,
            "created": at(created),
            "terminal": at(times.terminal.get(n)),
            "reported": at(reported.get(n)),
        }
        for n, created in sorted(times.created.items(), key=lambda item: item[1])
    ]


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
    flow_control: FlowControl | None = None,
    delays: Path | None = None,
) -> dict[str, Any]:
    """dispatch's supervisor over ``jobs`` jobs. With ``delays``, each job's times (created,
    terminal, reported; real seconds after the first creation) are written there as JSON. With ``faults``, those rules are active on
    the emulator for the whole run; with ``flow_control``, the emulator answers 429 beyond
    that limit (its rejections in ``throttled``); with ``kills``, the supervisor is SIGKILLed that many
    times (once 1/(kills+1), 2/(kills+1)... of the TrainJobs exist) and restarted under a new owner name against
    the same records (lease TTL 5 s, so a restarted one takes over quickly)."""
    times = ServerTimes()
    with (
        tempfile.TemporaryDirectory(prefix="dispatch-scale-") as tmp,
        Emulator(
            emulator_config(jobs, scale, flow_control), kubeconfig=Path(tmp) / "kubeconfig"
        ) as emu,
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
        result = summarise(
            "dispatch", jobs, times, reported, counts, sampler.peak, child, sampler.cpu
        )
        if delays is not None:
            delays.write_text(json.dumps(job_times(times, reported)))
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


#: real seconds between the parent's reads of the SDK child's progress line
PROGRESS_EVERY = 1.0
#: the window of the emulator's request rate when the SDK was stopped, in real seconds
LAST_MINUTE = 60.0


class Progress:
    """The SDK child's progress (``bench/scale_sdk.py`` rewrites one line, ``<s> s: <n>
    waiters still waiting``, every 10 s), read as it changes: when each count was first seen."""

    def __init__(self, path: Path, go: float) -> None:
        self.path, self.go = path, go
        #: (seconds since go, as the child wrote; waiters still waiting) at each change
        self.changes: list[tuple[float, int]] = []
        self.last: tuple[float, int] | None = None

    def read(self) -> None:
        try:
            text = self.path.read_text().strip()
            seconds, rest = text.split(" s: ", 1)
            found = (float(seconds), int(rest.split()[0]))
        except (OSError, ValueError, IndexError):  # not written yet, or caught mid-write
            return
        if not self.changes or self.changes[-1][1] != found[1]:
            self.changes.append(found)
        self.last = found

    def stopped(self, jobs: int, sampler: WatchSampler, ended: int) -> dict[str, Any]:
        """Where a run killed at its deadline had got to: waiters returned (from the child's
        last line), since when none had, and the emulator's requests in the last minute."""
        at = time.time()
        waiting = self.last[1] if self.last else jobs
        served, seconds = sampler.served_since(at - LAST_MINUTE)
        return {
            "killedAfterGoSeconds": round(at - self.go, 1),
            "trainJobsEnded": ended,
            "waitersReturned": jobs - waiting,
            "waitersWaiting": waiting,
            # the child's clock, to its 10 s line: when the last return was first seen
            "lastReturnSeconds": self.changes[-1][0] if len(self.changes) > 1 else None,
            "lastProgressSeconds": self.last[0] if self.last else None,
            "requestsLastMinute": served,  # over ``lastMinuteSeconds``, if the run was shorter
            "lastMinuteSeconds": round(seconds, 1),
            "requestsPerSecondLastMinute": round(served / seconds, 1) if seconds else None,
            "requestsServed": sampler.served[-1][1] if sampler.served else 0,
            # (seconds since go, waiters returned) at each change, at most 60 of them
            "returned": [
                (s, jobs - n) for s, n in self.changes[:: max(1, len(self.changes) // 60)]
            ],
        }


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
        go = time.time()
        Path(str(out) + ".go").touch()
        progress = Progress(Path(str(out) + ".progress"), go)
        while child.is_alive():
            child.join(PROGRESS_EVERY)
            progress.read()
        sampler.stop.set()
        counts = emu.requests()
        finished, why = holder.get("done", (False, "the child did not report"))
        if not finished:
            stopped = progress.stopped(jobs, sampler, len(times.terminal))
            return {"tool": "sdk", "jobs": jobs, "error": why, "stopped": stopped}
        data = json.loads(out.read_text())
        reported = {n: j["reportedAt"] for n, j in data["jobs"].items()}
        result = summarise("sdk", jobs, times, reported, counts, sampler.peak, data, sampler.cpu)
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
    sdk_deadline: float | None = None,
    delays: Path | None = None,
) -> list[dict[str, Any]]:
    """Each tool at each size. ``sdk_deadline``: real seconds the SDK's child may take (by
    default as long as dispatch's); killed there, its row says where it stopped answering."""
    results = []
    for n in sizes:
        deadline = (120 + n * 0.6 + lifetime * 3) * (4 if memory else 1)  # tracing is slow
        for tool in tools:
            began = time.time()
            if tool == "dispatch":
                result = run_dispatch(
                    n, lifetime, scale, deadline, profile, memory=memory, delays=delays
                )
            else:
                result = run_sdk(n, lifetime, scale, sdk_deadline or deadline)
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
    parser.add_argument("--sdk-deadline", type=float, help="real seconds the SDK may take")
    parser.add_argument(
        "--delays", type=Path, help="write each dispatch job's created/terminal/reported times"
    )
    args = parser.parse_args()
    found = run(
        args.jobs,
        args.lifetime,
        args.time_scale,
        args.tools,
        args.profile,
        args.memory,
        args.sdk_deadline,
        args.delays,
    )
    print(json.dumps(found, indent=1))

"""bench/results.md from the results dict (bench/results.json): a table per benchmark."""

from __future__ import annotations

from typing import Any

from bench import targets


def _f(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_f(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _head(title: str, found: dict[str, Any]) -> list[str]:
    lines = [
        f"## {title}",
        "",
        f"Took {found['seconds']} s; load average {found['loadAverage']}.",
        "",
    ]
    if "rerun" in found:
        rerun = found["rerun"]
        lines += [f"Run again on its own, {rerun['date']}: `{rerun['command']}`.", ""]
    if "skipped" in found:
        lines += [f"**Not run:** {found['skipped']}", ""]
    return lines


def _scale(found: dict[str, Any]) -> list[str]:
    lines = _head("Supervision at scale (emulator): dispatch vs Kubeflow SDK", found)
    lines += [
        f"Mean job lifetime asked: {found['lifetime']} real s (emulator time scale "
        f"{found['timeScale']}x; the SDK polls every 2 real seconds, its default; dispatch's "
        "supervisor poll interval is 5 real seconds, its watch is what reports).",
        "",
    ]
    if found.get("longer"):
        longer = found["longer"]
        sizes = ", ".join(f"{n:,}" for n in longer["jobs"])
        lines += [
            f"N = {sizes} again, with jobs living {longer['lifetime']:g} real s on average "
            "(rows marked by their mean lifetime): dispatch's following requests are paid per "
            "job end, the SDK's per minute of polling, so their ratio depends on how long "
            "jobs live.",
            "",
        ]
    sdk_at = {r["jobs"] for r in found["rows"] if r["tool"] == "sdk" and not r.get("longer")}
    alone = [n for n in found.get("dispatchOnly") or [] if n not in sdk_at]
    if alone:
        sizes = ", ".join(f"{n:,}" for n in alone)
        lines += [
            f"N = {sizes}: dispatch alone. The SDK runs one polling thread per job; at "
            "N = 1,000 those threads already take the machine's CPU (see its detection times "
            "there), so a larger N would measure this machine, not the SDK.",
            "",
        ]
    if found.get("sdkOnly"):
        sdk_only = found["sdkOnly"]
        sizes = ", ".join(f"{n:,}" for n in sdk_only["jobs"])
        lines += [
            f"N = {sizes}: the SDK on its own run (one polling thread per job), killed after "
            f"{sdk_only['deadline']:g} real s if it has not finished; a row killed there says "
            "where it stopped answering (below the table). Run alone: `python bench/run.py "
            "--only scale --merge --scale-tools sdk --scale-jobs --scale-dispatch-only "
            f"--scale-longer --scale-submission --scale-sdk-only {sizes.replace(',', '')}`.",
            "",
        ]
    reruns = [r for r in found["rows"] if "rerun" in r]
    rows = []
    for r in found["rows"]:
        tool = r["tool"] + (" †" if "rerun" in r else "")
        if "error" in r:
            rows.append([tool, r["jobs"], None, f"not finished: {r['error'][:120]}"] + [None] * 10)
            continue
        rows.append(
            [
                tool,
                r["jobs"],
                r.get("meanLifetimeSeconds"),
                f"{r['ended']}/{r['reported']}",
                r["requestsPerJobMinute"],
                r["followingPerJobMinute"],
                r["requestsPerJob"],
                f"{r['peakOpenWatches']} ({r['watchesStarted']} opened)",
                r["detectP50"],
                r["detectP99"],
                r.get("detectP99AfterSubmission"),
                r["cpuSeconds"],
                r["peakRssMiB"],
                r["wallSeconds"],
            ]
        )
    lines += _table(
        [
            "tool", "N", "mean lifetime s", "ended/reported", "requests per job-minute",
            "following only, per job-minute", "requests per job", "open watches, peak",
            "detect p50 s", "detect p99 s", "detect p99 s, after submission",
            "CPU s", "peak RSS MiB", "wall s",
        ],
        rows,
    )  # fmt: skip
    for r in reruns:
        again = r["rerun"]
        lines += [
            f"† {_run_of(r)} was run again on its own, {again['date']}, in {again['seconds']} "
            f"s (load average {again['loadAverage']}): `{again['command']}`.",
            "",
        ]
    lines += ["Requests by verb and resource:", ""]
    for r in found["rows"]:
        if "requestsByKind" in r:
            kinds = ", ".join(f"{k} {v}" for k, v in r["requestsByKind"].items())
            lines.append(f"- {_run_of(r)}: {kinds}")
    lines.append("")
    for r in found["rows"]:
        if r["tool"] == "dispatch" and "lost" in r:
            lines.append(
                f"- {_run_of(r)}: lost {r['lost']}, duplicated {r['duplicated']}, "
                f"wrong final state {r['wrongState']}; {r['passes']} supervisor passes; "
                f"submission (first to last TrainJob created) {r['submissionSeconds']} s"
            )
        if r["tool"] == "sdk" and "said" in r:
            lines.append(f"- {_run_of(r)}: the waiters said {r['said']}; lost {r['lost']}")
        if r["tool"] == "sdk" and "stopped" in r:
            point = targets.stopping_point(r["stopped"], r["jobs"])
            lines.append(f"- {_run_of(r)}: stopped answering: {point}")
            returned = ", ".join(f"{n:,} by {s:g} s" for s, n in r["stopped"]["returned"])
            lines.append(f"  - waiters returned (seconds after go, the child's clock): {returned}")
    lines.append("")
    lines += _submission(found.get("submission") or [])
    if "submission" in found:  # a run with issue 31's rows: its targets
        judged = targets.judge_issue31(_newest_run(found["rows"]), found["submission"])
        title = (
            "Issue 31's targets (they replace issue 10's where they overlap), judged on the "
            "newest run's rows alone"
        )
    else:  # results recorded before issue 31's rows existed
        judged = targets.judge(found["rows"])
        title = "Issue 10's targets for dispatch, judged"
    lines += [f"{title} from the rows above:", ""]
    for j in judged:
        verdict = {True: "met", False: "**not met**", None: "not judged"}[j.met]
        measured = j.measured.removeprefix("not judged: ") if j.met is None else j.measured
        lines.append(f"- {j.target}: {verdict} ({measured})")
    lines += ["", "Where a target is not met, bench/README.md gives the profile that explains it."]
    return [*lines, ""]


def _newest_run(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the newest run: those merged by the latest ``--merge`` run (``rerun``),
    or every row when none was merged (one run made them all). Targets are judged on one
    run: rows of older code beside them would judge two versions at once."""
    dates = [r["rerun"]["date"] for r in rows if isinstance(r.get("rerun"), dict)]
    if not dates:
        return rows
    newest = max(dates)
    return [r for r in rows if isinstance(r.get("rerun"), dict) and r["rerun"]["date"] == newest]


def _submission(rows: list[dict[str, Any]]) -> list[str]:
    """The submission rows: dispatch starting N jobs with the emulator answering 429."""
    if not rows:
        return []
    lines = [
        "### Submission under overload (`bench/scale_submission.py`)",
        "",
        "dispatch starts N jobs (up to 32 ticked at once, 32 requests in flight) while the "
        "emulator's API Priority and Fairness is configured below that load and answers 429 "
        "with Retry-After, as kube-apiserver does. Submission: the first TrainJob created to "
        "the last, in the store. 429s: the requests the emulator rejected (not among the "
        "requests served).",
        "",
    ]
    table = []
    for r in rows:
        limit = (r.get("flowControl") or {}).get("text", "—")
        if "error" in r:
            table.append([r["jobs"], limit, f"not finished: {r['error'][:120]}"] + [None] * 6)
            continue
        table.append(
            [
                r["jobs"],
                limit,
                r["submissionSeconds"],
                r.get("throttled"),
                r["requests"],
                r["requestsPerJob"],
                r.get("trainJobs"),
                f"{r['lost']} / {r['duplicated']} / {r['wrongState']}",
                r["wallSeconds"],
            ]
        )
    lines += _table(
        ["N", "flow control", "submission s", "429s sent", "requests served",
         "requests per job", "TrainJobs", "lost / duplicated / wrong", "wall s"],
        table,
    )  # fmt: skip
    for r in rows:
        if "rerun" in r:
            again = r["rerun"]
            lines += [f"N = {r['jobs']:,} was run again on its own, {again['date']}: "
                      f"`{again['command']}`.", ""]  # fmt: skip
    sizes = " ".join(str(r["jobs"]) for r in rows)
    lines += [
        "Run alone: `python bench/run.py --only scale --merge --scale-jobs "
        f"--scale-dispatch-only --scale-longer --scale-sdk-only --scale-submission {sizes}`.",
        "",
    ]
    for r in rows:
        if "requestsByKind" in r:
            kinds = ", ".join(f"{k} {v}" for k, v in r["requestsByKind"].items())
            lines.append(f"- served, N={r['jobs']}: {kinds}")
        if r.get("throttledByKind"):
            kinds = ", ".join(f"{k} {v}" for k, v in r["throttledByKind"].items())
            lines.append(f"- refused with 429, N={r['jobs']}: {kinds}")
    return [*lines, ""]


def _run_of(row: dict[str, Any]) -> str:
    """``tool N=...``, and the mean lifetime asked when it is not the run's main one."""
    extra = f", lifetime {row['lifetime']:g} s" if row.get("longer") else ""
    return f"{row['tool']} N={row['jobs']}{extra}"


def _causes(found: dict[str, Any]) -> list[str]:
    lines = _head("Cause accuracy over tests/dumps: dispatch vs the SDK's status", found)
    rows = [
        [
            r["dump"],
            f"{r['expectedState']} / {r['expectedCause']}",
            f"{r['dispatchState']} / {r['dispatchCause']}",
            "yes" if r["dispatchCorrect"] else "**no**",
            r.get("failedPods"),
            f"{r['eventsRemovedCause']} ({'yes' if r['eventsRemovedCorrect'] else 'no'})",
            r["sdkStatus"],
            "yes" if r["sdkStateCorrect"] else "no",
        ]
        for r in found["rows"]
    ]
    lines += _table(
        ["dump", "expected state / cause", "dispatch", "dispatch correct", "failed pods",
         "dispatch, Events removed", "SDK status", "SDK state right"],
        rows,
    )  # fmt: skip
    n = found["dumps"]
    lines += [
        f"Share correct: dispatch cause {found['dispatchCorrect']}/{n}; dispatch with every "
        f"Event removed {found['eventsRemovedCorrect']}/{n}; SDK coarse state "
        f"{found['sdkStateCorrect']}/{n}; SDK cause {found['sdkCauseCorrect']}/{n} (it names "
        "none, so only the success counts).",
        "",
    ]
    reports = found.get("reports")
    if reports:
        lines += [
            "### The report corpus (tests/dumps/reports, examples/kubeflow/dumps): every workload kind",
            "",
            "What the workload's own status tells a kubectl user (its true terminal condition, "
            "`Type/Reason`) next to dispatch. `kubectl cause right` counts a reason that names "
            "the cause by itself (only `DeadlineExceeded` does), or a success. Run: "
            "`python bench/run.py --only causes --merge`.",
            "",
        ]
        rows = [
            [
                r["dump"],
                r["kind"],
                r["source"] or "-",
                f"{r['expectedState']} / {r['expectedCause']}",
                f"{r['dispatchState']} / {r['dispatchCause']}",
                "yes" if r["dispatchCorrect"] else "**no**",
                r["kubectlStatus"],
                "yes" if r["kubectlStateCorrect"] else "no",
                "yes" if r["kubectlCauseCorrect"] else "no",
            ]
            for r in reports["rows"]
        ]
        lines += _table(
            ["dump", "kind", "modelled on", "expected state / cause", "dispatch",
             "dispatch correct", "kubectl status", "kubectl state right", "kubectl cause right"],
            rows,
        )  # fmt: skip
        n = reports["dumps"]
        lines += [
            f"Share correct over {n} dumps of {len(reports['kinds'])} kinds: dispatch "
            f"{reports['dispatchCorrect']}/{n}; the workload's status, coarse state "
            f"{reports['kubectlStateCorrect']}/{n}, cause {reports['kubectlCauseCorrect']}/{n}.",
            "",
        ]
    if "peersFailedDumps" in found:
        lines += [
            f"Noise: in {found['peersFailedDumps']} dumps more than one pod failed (peers "
            "crashed after the first failure, or all were stopped together), so the cause "
            "has to be told apart from the peers' exits; dispatch named it in "
            f"{found['peersFailedCorrect']}/{found['peersFailedDumps']} of them.",
            "",
        ]
    return lines


def _local(found: dict[str, Any]) -> list[str]:
    lines = _head("Local scheduler vs torchrun --standalone (1 node x 4 processes)", found)
    if "rows" in found:
        lines += [
            "Medians (min-max) in seconds. Submission: from spawning the launcher to the first "
            "rank's first line of Python. End: from the last rank's exit to the launcher's "
            "exit, when whoever waits on it learns the job ended. Both in the successful runs "
            "that give the wall time.",
            "",
        ]
        lines += _table(
            ["launcher", "runs", "wall", "submission: spawn to first rank", "end: ranks exited to launcher exit", "failure to all stopped", "wall vs torchrun"],
            [
                [
                    r["launcher"], r["runs"],
                    _spread(r, "wall"),
                    _spread(r, "submit"),
                    _spread(r, "notice"),
                    _spread(r, "stop"),
                    f"{r['wallOverhead']:+.1%}",
                ]
                for r in found["rows"]
            ],
        )  # fmt: skip
    return lines


def _spread(row: dict[str, Any], name: str) -> str:
    """``median (min-max)`` of a figure recorded as ``<name>Median``/``Min``/``Max``; a dash
    where the run predates the figure."""
    if name + "Median" not in row:
        return "—"
    return f"{row[name + 'Median']:.3f} ({row[name + 'Min']:.3f}-{row[name + 'Max']:.3f})"


def _slurm(found: dict[str, Any]) -> list[str]:
    lines = _head("Slurm adapter vs sbatch + squeue by hand (real 2-node Slurm)", found)
    if "rows" in found:
        lines += _table(
            ["tool", "runs", "poll s", "submit median s (min-max)", "notice end median s (min-max)"],
            [
                [
                    r["tool"], r["runs"], r["poll"],
                    _spread(r, "submit"),
                    _spread(r, "notice"),
                ]
                for r in found["rows"]
            ],
        )  # fmt: skip
    return lines


def _sim_row(s: dict[str, Any]) -> list[Any]:
    return [
        f"{s['seeds']} x {s['stepsPerSeed']}", s["steps"], s["violations"], s["wallSeconds"],
        s["stepsPerSecond"], s["stepsPerCpuSecond"], s["load"],
    ]  # fmt: skip


SIM_HEADER = [
    "seeds x steps",
    "steps run",
    "invariant violations",
    "wall s",
    "steps/s",
    "steps per CPU s",
    "load",
]


def _kills(killed_at: list[int] | None) -> str:
    """``2 (at 17, 34)``: kills of a live supervisor and the TrainJobs created by then."""
    if killed_at is None:
        return "—"
    if not killed_at:
        return "0"
    return f"{len(killed_at)} (at {', '.join(str(n) for n in killed_at)})"


def _reliability(found: dict[str, Any]) -> list[str]:
    lines = _head("Reliability", found)
    lines += ["Simulator (real fold/next/records/supervisor, memory adapter, seeded faults):", ""]
    lines += _table(SIM_HEADER, [_sim_row(found["sim"])])
    lines += ["Emulator with injected faults (dispatch supervisor + Kubeflow adapter):", ""]
    lines += _table(
        ["run", "jobs", "ended", "lost", "duplicated", "wrong final state", "TrainJobs", "API faults injected", "supervisor kills (TrainJobs created at each)", "error"],
        [
            [r["run"], r["jobs"], r["ended"], r["lost"], r["duplicated"], r["wrongState"],
             r["trainJobs"], r["faultsInjected"], _kills(r.get("killedAt")), r["error"]]
            for r in found["faults"]
        ],
    )  # fmt: skip
    z = found["fuzz"]
    value_crashes = z.get("valueCrashes", z["crashes"])
    lines += ["Fuzzing values (hypothesis, derandomized):", ""]
    lines += _table(
        ["target", "tried", "accepted", "crashes"],
        [
            ["parse_spec (InvalidSpec is not a crash)", z["specs"], z["specsAccepted"], value_crashes],
            ["check_runtime", z["runtimes"], z["runtimesAccepted"], value_crashes],
        ],
    )  # fmt: skip
    if "inputs" in z:
        lines += _fuzz_text(z["inputs"])
    if z["crashSamples"]:
        lines += ["Crashes: " + "; ".join(z["crashSamples"]), ""]
    return lines


#: what each input kind of bench/fuzz_text.py goes through, and what answers it may give
FUZZ_TEXT_TARGETS = {
    "spec": "job spec: `parse_spec_text` / `load_spec` (a JobSpec or InvalidSpec)",
    "config": "config file: `load_config`, then Kubeflow, Slurm and local settings (ConfigError)",
    "runtime": "runtime: `yaml12.load` + `check_runtime`, `dispatch check-runtime` (exit 0, 1, 2)",
    "dump": "dump: `parse_dump`, `dispatch diagnose` (ValueError; exit 0 or 2)",
}


def _fuzz_text(inputs: dict[str, Any]) -> list[str]:
    lines = [
        "Fuzzing text through the entry points (bench/fuzz_text.py): examples mutated as "
        "values and as text, alias bombs, nesting to 100,000 levels, bad tags, huge values, "
        "NUL / invalid UTF-8 / BOM / CRLF / tabs, duplicate keys; a crash is any other "
        "exception, a hang or a killed process; each case is timed:",
        "",
    ]
    rows = [
        [FUZZ_TEXT_TARGETS.get(kind, kind), k["cases"], k["accepted"], k["refused"], k["crashes"],
         k["over2s"], f"{k['slowestSeconds']:.2f} (case {k['slowestCase']})", k["longestMessage"]]
        for kind, k in inputs.items()
    ]  # fmt: skip
    lines += _table(
        ["input", "cases", "accepted", "refused", "crashes", "over 2 s", "slowest s", "longest message (chars)"],
        rows,
    )  # fmt: skip
    slow = [s for k in inputs.values() for s in k["slowSamples"]]
    if slow:
        lines += ["Over 2 s: " + "; ".join(slow), ""]
    return lines


def _sim(found: dict[str, Any]) -> list[str]:
    return _head("Simulator throughput", found) + _table(SIM_HEADER, [_sim_row(found)])


def _emulator(found: dict[str, Any]) -> list[str]:
    return _head("Emulator throughput (TrainJobs through every controller)", found) + _table(
        ["TrainJobs", "seconds", "jobs/s"],
        [[found["jobs"], found["seconds"], found["jobsPerSecond"]]],
    )


def _team(found: dict[str, Any]) -> list[str]:
    lines = _head("Team supervision on PostgreSQL (emulator, 3 supervisors)", found)
    if "reliability" not in found:
        return lines
    r = found["reliability"]
    lines += [
        f"`dispatch supervise` x 3 over one PostgreSQL database, {r['jobs']} jobs of the scale "
        f"mix, {r['kills']} supervisors SIGKILLed (each replaced), PostgreSQL restarted "
        f"{r['postgresRestarts']} times (`pg_ctl restart -m fast`); lease TTL "
        f"{r['leaseTtl']:g} s, poll interval {r['pollInterval']:g} s (`bench/team.py`).",
        "",
    ]
    lines += _table(
        ["jobs", "ended in s", "lost", "duplicated", "wrong state or cause", "TrainJobs",
         "jobs taken over", "takeover p50 s", "p99 s", "max s", "supervisors that died on their own"],
        [[r["jobs"], r["seconds"], r["lost"], r["duplicated"], r["wrong"], r["trainJobs"],
          r["takeovers"], r["takeoverP50"], r["takeoverP99"], r["takeoverMax"],
          len(r["supervisorsDiedOnTheirOwn"])]],
    )  # fmt: skip
    lines += ["Records throughput (one process, memory scheduler, N open jobs):", ""]
    lines += _table(
        ["store", "jobs", "submissions/s", "starts/s (first pass)", "seconds per supervisor pass",
         "job ticks/s"],
        [[t["store"], t["jobs"], t["submissionsPerSecond"], t.get("startsPerSecond", "—"),
          t["passSeconds"], t["jobTicksPerSecond"]] for t in found["throughput"]],
    )  # fmt: skip
    return lines


def _dumps(found: dict[str, Any]) -> list[str]:
    lines = _head("`dispatch diagnose` on large dumps", found)
    lines += [
        f"Target (issue 26): a 50 MB dump in under {found['targetSeconds']:g} s and "
        f"{found['targetMiB']:g} MiB. Run: `python bench/run.py --only dumps --merge`.",
        "",
    ]
    rows = [[r["format"], r["mib"], r["seconds"], r["peakMiB"], r["cause"]] for r in found["rows"]]
    return lines + _table(["format", "MiB", "seconds", "peak MiB", "verdict"], rows)


def _admission(found: dict[str, Any]) -> list[str]:
    lines = _head("The cluster-side guard: `dispatch admission serve` under load", found)
    if "p99Ms" not in found:
        return lines
    lines += [
        f"AdmissionReview v1 requests sent open loop at {found['rate']:g}/s for "
        f"{found['durationSeconds']:g} s over {found['connections']} HTTPS keep-alive "
        "connections, latency from each request's due time; mix: "
        + ", ".join(f"{k} {v}" for k, v in found["mix"].items())
        + f" (of 20; `bench/admission.py`). Target: p99 under {found['targetP99Ms']:g} ms, "
        "no error.",
        "",
    ]
    return lines + _table(
        ["sent", "answered/s", "errors", "p50 ms", "p99 ms", "max ms", "server decision p99 ms",
         "server CPU s", "server CPU % of a core"],
        [[found["sent"], found["achievedRate"], found["errors"], found["p50Ms"], found["p99Ms"],
          found["maxMs"], found["serverDecisionP99Ms"], found["serverCpuSeconds"],
          found["serverCpuPercent"]]],
    )  # fmt: skip


def _ui(found: dict[str, Any]) -> list[str]:
    lines = _head("The web UI: `dispatch ui` over thousands of jobs", found)
    if "defaultPage" not in found:
        return lines
    live = found["liveness"]
    lines += [
        f"{found['jobs']:,} jobs of a realistic mix in SQLite records (`bench/ui.py`); the real "
        f"`dispatch ui` started in {found['startSeconds']:g} s (every job read into its index). "
        "Load times are Chromium's own Navigation Timing (headless, Debian's package), median "
        f"and worst of 5 loads. Target: the jobs page in under {found['targetSeconds']:g} s "
        f"({'met' if found['met'] else 'not met'}).",
        "",
    ]
    lines += _table(
        ["page", "rows", "DOMContentLoaded ms (p50)", "load ms (p50)", "load ms (max)"],
        [[name, p["rows"], p["domContentLoadedMsP50"], p["loadMsP50"], p["loadMsMax"]]
         for name, p in (("jobs (newest 200)", found["defaultPage"]),
                         ("jobs (?limit=5000)", found["allRows"]))],
    )  # fmt: skip
    lines += [
        f"Liveness: {live['ends']} running jobs ended by another process's records while the "
        f"page was open; from the write's commit to the new state on the page: p50 "
        f"{live['p50Seconds']:g} s, max {live['maxSeconds']:g} s (the feed ticks every "
        f"{live['feedIntervalSeconds']:g} s).",
        "",
    ]
    return lines


SECTIONS = {
    "scale": _scale,
    "causes": _causes,
    "dumps": _dumps,
    "local": _local,
    "slurm": _slurm,
    "reliability": _reliability,
    "sim": _sim,
    "emulator": _emulator,
    "team": _team,
    "admission": _admission,
    "ui": _ui,
}


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        "# Benchmark results",
        "",
        "Generated by `bench/run.py` (do not edit by hand; the analysis lives in bench/README.md).",
        "",
        "```sh",
        results["command"],
        "```",
        "",
        f"- date: {m['date']}",
        f"- machine: {m['cpu']}, {m['cores']} cores, {m['memoryGiB']} GiB, {m['os']}, {m['python']}",
        f"- load average at start (1, 5, 15 min): {m['loadAverageAtStart']}",
        "",
    ]
    for name, render_section in SECTIONS.items():
        if name in results:
            lines += render_section(results[name])
    return "\n".join(lines).rstrip() + "\n"

"""Run every benchmark and write bench/results.md and bench/results.json.

    python bench/run.py                 # the default sizes (tens of minutes on 2 cores)
    python bench/run.py --quick         # the smallest size of each (CI; a few minutes)
    python bench/run.py --only scale causes --scale-jobs 100 1000 --scale-dispatch-only
    python bench/run.py --only local --merge   # run one again, keep the others' results
    python bench/run.py --only scale --merge --scale-tools sdk --scale-jobs 5000 \
        --scale-dispatch-only --scale-longer --scale-sdk-only --scale-submission
                                        # one row of the scale table again
    python bench/run.py --only scale --merge --scale-jobs --scale-dispatch-only \
        --scale-longer --scale-sdk-only --scale-submission 1000   # the submission row alone
    python -m bench ...                 # the same

Benchmarks (``--only`` names): ``scale`` (supervision at scale on the emulator, dispatch
against the Kubeflow SDK at ``--scale-jobs``, dispatch alone at ``--scale-dispatch-only``,
the SDK alone within ``--scale-sdk-deadline`` at ``--scale-sdk-only``, both again with longer
jobs at ``--scale-longer``, and dispatch's submission with the emulator answering 429 under
overload at ``--scale-submission``: ``bench/scale_submission.py``), ``causes`` (cause accuracy over
tests/dumps), ``dumps`` (``dispatch diagnose`` time and memory on 5 and 50 MB dumps), ``local`` (local scheduler against torchrun --standalone; needs torch),
``slurm`` (Slurm adapter against sbatch + squeue; needs Slurm and root), ``reliability``
(simulator, emulator faults, fuzzing), ``sim`` (simulator throughput), ``emulator``
(emulator throughput), ``team`` (3 supervisors over PostgreSQL with kills and database
restarts, and the records' throughput on PostgreSQL and SQLite; needs PostgreSQL), ``admission``
(`dispatch admission serve` answering AdmissionReviews open loop over HTTPS), ``ui`` (`dispatch
ui` over N jobs: the jobs page's load in headless Chromium, and how soon a job's end shows on
an open page; needs chromium and the ui extra). A benchmark whose requirement is missing is
recorded as skipped, with the reason.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import machine, report

ROOT = Path(__file__).resolve().parents[1]
ALL = (
    "scale", "causes", "dumps", "local", "slurm", "reliability", "sim", "emulator", "team",
    "admission", "ui",
)  # fmt: skip

#: sizes: (quick, default)
SIZES: dict[str, tuple[Any, Any]] = {
    "scaleJobs": ([10], [100, 1000]),
    #: sizes run for dispatch alone (the SDK's thread per job saturates 2 cores at 1,000)
    "scaleDispatchOnly": ([], [10_000]),
    #: sizes run for the SDK alone, killed after ``sdkDeadline`` real seconds (its row then
    #: says where it stopped answering)
    "scaleSdkOnly": ([], [10_000]),
    "sdkDeadline": (600.0, 1800.0),
    #: dispatch's submission with the emulator's flow control overloaded (429s)
    "scaleSubmission": ([50], [1000]),
    "lifetime": (6.0, 60.0),
    #: sizes run again by both tools with jobs that live ``longerLifetime`` on average:
    #: requests per job-minute depend on it (dispatch pays per job end, the SDK per minute)
    "scaleLonger": ([], [1000]),
    "longerLifetime": (60.0, 300.0),
    "localRepeat": (1, 5),
    "slurmRepeat": (1, 5),
    "simSeeds": (10, 200),
    "simSteps": (100, 300),
    "faultJobs": (10, 50),
    "faultLifetime": (6.0, 15.0),
    "fuzzExamples": (100, 1000),
    #: cases of each input kind (spec, config, runtime, dump) through the real entry points
    "fuzzTextCases": (200, 10_000),
    "emulatorJobs": (50, 1000),
    "dumpMiB": ([5], [5, 50]),
    #: team supervision on PostgreSQL: (jobs, supervisor kills, PostgreSQL restarts)
    "teamRun": ((40, 2, 1), (500, 6, 2)),
    "teamThroughputJobs": (100, 500),
    #: the guard's webhook server: seconds of AdmissionReviews at 200 per second
    "admissionSeconds": (5.0, 60.0),
    #: jobs in the records under `dispatch ui`
    "uiJobs": (500, 5000),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smallest size of each")
    parser.add_argument("--only", nargs="+", choices=ALL, default=list(ALL))
    parser.add_argument(
        "--scale-jobs",
        type=int,
        nargs="*",
        help="N for the scale benchmark, both tools (default: 100 1000; 10 with --quick)",
    )
    parser.add_argument("--scale-tools", nargs="+", default=["dispatch", "sdk"])
    parser.add_argument(
        "--scale-dispatch-only",
        type=int,
        nargs="*",
        help="N for the scale benchmark, dispatch alone (default: 10000; none with --quick)",
    )
    parser.add_argument(
        "--scale-sdk-only",
        type=int,
        nargs="*",
        help="N for the scale benchmark, the SDK alone (default: 10000; none with --quick)",
    )
    parser.add_argument(
        "--scale-sdk-deadline",
        type=float,
        help="real seconds the SDK may take at --scale-sdk-only (default: 1800)",
    )
    parser.add_argument(
        "--scale-submission",
        type=int,
        nargs="*",
        help="N started by dispatch with the emulator answering 429 under overload "
        "(default: 1000; 50 with --quick)",
    )
    parser.add_argument("--lifetime", type=float, help="mean real seconds a scale job lives")
    parser.add_argument(
        "--scale-longer",
        type=int,
        nargs="*",
        help="N run again by both tools with longer jobs (default: 1000; none with --quick)",
    )
    parser.add_argument(
        "--longer-lifetime", type=float, help="mean real seconds of those jobs (default: 300)"
    )
    parser.add_argument("--local-repeat", type=int, help="rounds of the torchrun benchmark")
    parser.add_argument("--out", type=Path, default=ROOT / "bench", help="folder for results")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the results already in --out and replace only the --only benchmarks "
        "(each marked with its own command and date); for scale, only the rows run",
    )
    return parser.parse_args(argv)


def size(args: argparse.Namespace, key: str) -> Any:
    return SIZES[key][0 if args.quick else 1]


def _sizes(args: argparse.Namespace, option: str, key: str) -> list[int]:
    """The sizes given to ``option`` (none when given bare), or the default's."""
    given: list[int] | None = getattr(args, option)
    return size(args, key) if given is None else given


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def run_one(name: str, args: argparse.Namespace) -> dict[str, Any]:
    if name == "scale":
        from bench import scale
        from bench.scale_submission import run_submission

        jobs = _sizes(args, "scale_jobs", "scaleJobs")
        alone = _sizes(args, "scale_dispatch_only", "scaleDispatchOnly")
        alone = alone if "dispatch" in args.scale_tools else []
        sdk_alone = _sizes(args, "scale_sdk_only", "scaleSdkOnly")
        sdk_alone = sdk_alone if "sdk" in args.scale_tools else []
        sdk_deadline = args.scale_sdk_deadline or size(args, "sdkDeadline")
        submission = _sizes(args, "scale_submission", "scaleSubmission")
        submission = submission if "dispatch" in args.scale_tools else []
        lifetime = args.lifetime or size(args, "lifetime")
        longer = _sizes(args, "scale_longer", "scaleLonger")
        longer_lifetime = args.longer_lifetime or size(args, "longerLifetime")
        rows = scale.run(jobs, lifetime, 10.0, args.scale_tools)
        if alone:
            rows += scale.run(alone, lifetime, 10.0, ["dispatch"])
        if sdk_alone:
            rows += scale.run(sdk_alone, lifetime, 10.0, ["sdk"], sdk_deadline=sdk_deadline)
        if longer:
            for row in scale.run(longer, longer_lifetime, 10.0, args.scale_tools):
                rows.append({**row, "longer": True})
        submitted = [run_submission(n, lifetime, 10.0) for n in submission]
        for row in submitted:
            print(json.dumps(row), file=sys.stderr)
        return {
            "lifetime": lifetime,
            "timeScale": 10.0,
            "dispatchOnly": alone,
            "sdkOnly": {"jobs": sdk_alone, "deadline": sdk_deadline} if sdk_alone else None,
            "longer": {"jobs": longer, "lifetime": longer_lifetime} if longer else None,
            "rows": rows,
            "submission": submitted,
        }
    if name == "causes":
        from bench import causes

        return causes.run()
    if name == "dumps":
        from bench import dumps

        return dumps.run(size(args, "dumpMiB"))
    if name == "local":
        if not _has("torch"):
            return {"skipped": "torch is not installed (pip install -e '.[torch]')"}
        from bench import local_vs_torchrun

        return local_vs_torchrun.measure(args.local_repeat or size(args, "localRepeat"))
    if name == "slurm":
        from bench import slurm_vs_sbatch

        return slurm_vs_sbatch.run(size(args, "slurmRepeat"), 1.0)
    if name == "reliability":
        from bench import reliability

        return reliability.run(
            size(args, "simSeeds"),
            size(args, "simSteps"),
            size(args, "faultJobs"),
            size(args, "faultLifetime"),
            size(args, "fuzzExamples"),
            size(args, "fuzzTextCases"),
            quick=args.quick,
        )
    if name == "sim":
        from bench import sim_throughput

        return sim_throughput.measure(size(args, "simSeeds"), size(args, "simSteps"), workers=1)
    if name == "emulator":
        import asyncio

        from bench import emulator_throughput

        jobs = size(args, "emulatorJobs")
        seconds = asyncio.run(emulator_throughput.run(jobs, 10, 100.0))
        return {
            "jobs": jobs,
            "seconds": round(seconds, 1),
            "jobsPerSecond": round(jobs / seconds, 1),
        }
    if name == "team":
        from bench import team
        from dispatch.testing.postgres import PostgresUnavailable, find_bin_dir

        try:
            find_bin_dir()
        except PostgresUnavailable as exc:
            return {"skipped": str(exc)}
        jobs, kills, restarts = size(args, "teamRun")
        return {
            "reliability": team.reliability(
                jobs, kills, restarts, lifetime=40.0, scale=10.0, lease_ttl=10.0, poll=2.0,
                deadline=900.0,
            ),
            "throughput": team.throughput(size(args, "teamThroughputJobs")),
        }  # fmt: skip
    if name == "admission":
        if not _has("cryptography"):
            return {"skipped": "cryptography is not installed (pip install -e '.[kubeflow]')"}
        from bench import admission

        return admission.run(rate=200.0, seconds=size(args, "admissionSeconds"))
    if name == "ui":
        missing = [m for m in ("aiohttp", "jinja2", "pygal", "playwright") if not _has(m)]
        if missing:
            return {"skipped": f"{', '.join(missing)} not installed (pip install -e '.[ui,dev]')"}
        from bench import ui

        return ui.run(size(args, "uiJobs"))
    raise ValueError(name)


def _row_key(row: dict[str, Any]) -> tuple[bool, int, bool]:
    """Rows of the scale section in order: main lifetime first, by N, dispatch before the SDK."""
    return (bool(row.get("longer")), row["jobs"], row["tool"] != "dispatch")


def merge_rows(earlier: dict[str, Any], found: dict[str, Any], command: str) -> dict[str, Any]:
    """The scale section with this run's rows in place of the earlier rows of the same tool,
    N and lifetime, each marked with its command, date, time and load; the others stay."""
    rerun = {
        "command": command,
        "date": machine.now(),
        "seconds": found["seconds"],
        "loadAverage": found["loadAverage"],
    }
    new = {_row_key(r): {**r, "rerun": rerun} for r in found["rows"]}
    rows = [new.pop(_row_key(r), r) for r in earlier["rows"]] + list(new.values())
    merged = {**earlier, "rows": sorted(rows, key=_row_key)}
    if found.get("submission"):  # the submission rows of the sizes run again replace theirs
        again = {r["jobs"]: {**r, "rerun": rerun} for r in found["submission"]}
        kept = [r for r in earlier.get("submission") or [] if r["jobs"] not in again]
        merged["submission"] = sorted([*kept, *again.values()], key=lambda r: int(r["jobs"]))
    if found.get("dispatchOnly"):
        merged["dispatchOnly"] = sorted(
            {*(earlier.get("dispatchOnly") or []), *found["dispatchOnly"]}
        )
    if found.get("sdkOnly"):
        merged["sdkOnly"] = found["sdkOnly"]
    return merged


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    given = list(sys.argv[1:] if argv is None else argv)
    if "--out" in given[:-1] and Path(given[given.index("--out") + 1]).resolve() != ROOT / "bench":
        given[given.index("--out") + 1] = "<a folder>"  # no path of this machine in the results
    command = ("python bench/run.py " + shlex.join(given)).strip()
    results: dict[str, Any] = {"command": command, "machine": machine.describe()}
    if args.merge:
        earlier = args.out / "results.json"
        if not earlier.exists():
            raise SystemExit(f"--merge: no {earlier} to merge into; run without --merge first")
        results = json.loads(earlier.read_text())
    for name in args.only:
        began, load_before = time.time(), machine.load()
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        found = run_one(name, args)
        found["seconds"] = round(time.time() - began, 1)
        found["loadAverage"] = f"{load_before} at start; {machine.load()} at end"
        if args.merge and name == "scale" and "rows" in results.get(name, {}):
            found = merge_rows(results[name], found, command)
        elif args.merge:
            found["rerun"] = {"command": command, "date": machine.now()}
        results[name] = found
        print(f"[bench] {name} done in {time.time() - began:.1f} s", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text(report.render(results))
    print(f"[bench] wrote {args.out / 'results.md'} and results.json", file=sys.stderr)


if __name__ == "__main__":
    main()

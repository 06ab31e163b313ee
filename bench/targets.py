"""Targets for dispatch, judged from the scale benchmark's rows (no timing here: only what a
run measured). Each judgement says what was compared, the figure, and whether the target is
met; a target whose rows were not run is "not judged", never met.

``judge``: issue 10's targets (requests 50x below the SDK's and detection at N = 1,000, memory
at N = 5,000), kept for results recorded before issue 31's rows existed. ``judge_issue31``:
issue 31's, which replace them where they overlap (requests, memory, watch streams) and add
the N = 10,000 supervisor, the submission under overload and the SDK's row at N = 10,000."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: the size at which requests and detection are judged, and the one for memory
AT, MEMORY_AT = 1000, 5000
REQUEST_RATIO, DETECT_P99_S, PEAK_MB = 50.0, 1.0, 300.0
MIB = 1024 * 1024 / 1e6  # MB per MiB


@dataclass(frozen=True)
class Judgement:
    target: str
    measured: str
    met: bool | None  # None: the rows needed were not run


def _lifetime(row: dict[str, Any]) -> float | None:
    value = row.get("lifetime")
    return float(value) if value is not None else None


def judge(rows: list[dict[str, Any]]) -> list[Judgement]:
    """Every target of issue 10, from these rows."""
    found = [r for r in rows if "error" not in r]  # runs that did not finish count for none
    ours = [r for r in found if r["tool"] == "dispatch"]
    return [*_requests(found), _detection(ours), _memory(ours), _watches(ours)]


def _requests(rows: list[dict[str, Any]]) -> list[Judgement]:
    """Following requests per job-minute at N = AT, the SDK's over dispatch's, per lifetime
    asked (dispatch pays per job end, the SDK per minute, so the ratio depends on it)."""
    target = (
        f"following requests per job-minute at N = {AT:,}: "
        f"at least {REQUEST_RATIO:g}x fewer than the SDK's"
    )
    pairs: dict[float | None, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["jobs"] == AT:
            pairs.setdefault(_lifetime(r), {})[r["tool"]] = r
    judged = []
    for _, tools in sorted(pairs.items(), key=lambda kv: kv[0] or 0.0):
        ours, sdk = tools.get("dispatch"), tools.get("sdk")
        if ours is None or sdk is None or not ours.get("followingPerJobMinute"):
            continue
        ratio = sdk["followingPerJobMinute"] / ours["followingPerJobMinute"]
        jobs = f"mean job lifetime {ours.get('meanLifetimeSeconds')} s"
        measured = (
            f"{jobs}: SDK {sdk['followingPerJobMinute']:.2f}, dispatch "
            f"{ours['followingPerJobMinute']:.2f} -> {ratio:.1f}x"
        )
        judged.append(Judgement(target, measured, ratio >= REQUEST_RATIO))
    return judged or [Judgement(target, f"not judged: no pair of runs at N = {AT:,}", None)]


def _detection(ours: list[dict[str, Any]]) -> Judgement:
    target = f"detection p99 at N = {AT:,} under {DETECT_P99_S:g} s"
    at = [r for r in ours if r["jobs"] == AT and r.get("detectP99") is not None]
    if not at:
        return Judgement(target, f"not judged: dispatch not run at N = {AT:,}", None)
    measured = "; ".join(
        f"lifetime {r.get('meanLifetimeSeconds')} s: {r['detectP99']:.2f} s over all jobs, "
        f"{_s(r.get('detectP99AfterSubmission'))} over those that ended after submission"
        for r in at
    )
    return Judgement(target, measured, all(r["detectP99"] < DETECT_P99_S for r in at))


def _memory(ours: list[dict[str, Any]]) -> Judgement:
    target = f"peak memory at N = {MEMORY_AT:,} under {PEAK_MB:g} MB"
    at = [r for r in ours if r["jobs"] == MEMORY_AT and r.get("peakRssMiB")]
    if not at:
        return Judgement(target, f"not judged: dispatch not run at N = {MEMORY_AT:,}", None)
    peak = max(r["peakRssMiB"] for r in at)
    return Judgement(target, f"{peak:.1f} MiB = {peak * MIB:.0f} MB", peak * MIB < PEAK_MB)


def _watches(ours: list[dict[str, Any]]) -> Judgement:
    target = "open watch streams independent of N"
    peaks: dict[int, int] = {}
    for r in ours:
        peaks[r["jobs"]] = max(peaks.get(r["jobs"], 0), r["peakOpenWatches"])
    if len(peaks) < 2:
        return Judgement(target, "not judged: dispatch run at fewer than two sizes", None)
    measured = ", ".join(f"N = {n:,}: {p}" for n, p in sorted(peaks.items()))
    smallest, largest = min(peaks), max(peaks)
    return Judgement(target, f"peak open: {measured}", peaks[largest] <= peaks[smallest])


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


#: issue 31: the size at which requests are judged, the large one, and the submission's
AT_31, LARGE, SUBMISSION_AT = 1000, 10_000, 1000
REQUEST_RATIO_31, REQUESTS_PER_JOB, PEAK_MIB_31, SUBMISSION_S = 100.0, 4.0, 400.0, 10.0


def judge_issue31(
    rows: list[dict[str, Any]], submission: list[dict[str, Any]] | None = None
) -> list[Judgement]:
    """Every target of issue 31, from the scale rows and the submission rows."""
    found = [r for r in rows if "error" not in r]
    ours = [r for r in found if r["tool"] == "dispatch"]
    large = [r for r in ours if r["jobs"] == LARGE and not r.get("longer")]
    return [
        *_requests_31(found),
        *_requests_per_job(ours),
        _detection_large(large),
        _memory_large(large),
        _watches(ours),
        _intact_large(large),
        *_submission(submission or []),
        _sdk_large([r for r in rows if r["tool"] == "sdk" and r["jobs"] == LARGE]),
    ]


def _requests_31(rows: list[dict[str, Any]]) -> list[Judgement]:
    target = (
        f"following requests per job-minute at N = {AT_31:,}: "
        f"at least {REQUEST_RATIO_31:g}x below the SDK's"
    )
    judged = []
    for tools in _pairs(rows, AT_31):
        ours, sdk = tools["dispatch"], tools["sdk"]
        mine, theirs = ours.get("followingPerJobMinute"), sdk.get("followingPerJobMinute")
        if mine is None or theirs is None:
            continue
        jobs = f"mean job lifetime {ours.get('meanLifetimeSeconds')} s"
        if mine == 0:  # no following request at all: below the SDK's by any factor
            judged.append(Judgement(target, f"{jobs}: SDK {theirs:.2f}, dispatch 0", True))
            continue
        ratio = theirs / mine
        measured = f"{jobs}: SDK {theirs:.2f}, dispatch {mine:.2f} -> {ratio:.1f}x"
        words = ours.get("lastWordsPerJobMinute")
        if words and mine > words:  # shown apart; the judgement counts them
            measured += (
                f" (of dispatch's, {words:.2f} read the failed ranks' last output; without "
                f"them {theirs / (mine - words):.1f}x)"
            )
        judged.append(Judgement(target, measured, ratio >= REQUEST_RATIO_31))
    return judged or [Judgement(target, f"not judged: no pair of runs at N = {AT_31:,}", None)]


def _pairs(rows: list[dict[str, Any]], jobs: int) -> list[dict[str, dict[str, Any]]]:
    """The dispatch and SDK rows at ``jobs`` of each lifetime asked, where both exist."""
    pairs: dict[float | None, dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["jobs"] == jobs:
            pairs.setdefault(_lifetime(r), {})[r["tool"]] = r
    ordered = sorted(pairs.items(), key=lambda kv: kv[0] or 0.0)
    return [tools for _, tools in ordered if {"dispatch", "sdk"} <= tools.keys()]


def _requests_per_job(ours: list[dict[str, Any]]) -> list[Judgement]:
    target = f"requests per job at N = {AT_31:,}: at most {REQUESTS_PER_JOB:g}"
    at = [r for r in ours if r["jobs"] == AT_31 and r.get("requestsPerJob") is not None]
    if not at:
        return [Judgement(target, f"not judged: dispatch not run at N = {AT_31:,}", None)]
    return [
        Judgement(
            target,
            f"mean job lifetime {r.get('meanLifetimeSeconds')} s: {r['requestsPerJob']:.1f}",
            r["requestsPerJob"] <= REQUESTS_PER_JOB,
        )
        for r in sorted(at, key=lambda r: _lifetime(r) or 0.0)
    ]


def _detection_large(large: list[dict[str, Any]]) -> Judgement:
    target = f"detection p99 at N = {LARGE:,} (one supervisor) under {DETECT_P99_S:g} s"
    at = [r for r in large if r.get("detectP99") is not None]
    if not at:
        return Judgement(target, f"not judged: dispatch not run at N = {LARGE:,}", None)
    worst = max(r["detectP99"] for r in at)
    settled = [r["detectP99AfterSubmission"] for r in at if r.get("detectP99AfterSubmission")]
    after = _s(max(settled)) if settled else "—"
    measured = f"{worst:.2f} s over all jobs, {after} over those that ended after submission"
    return Judgement(target, measured, worst < DETECT_P99_S)


def _memory_large(large: list[dict[str, Any]]) -> Judgement:
    target = f"peak RSS at N = {LARGE:,} under {PEAK_MIB_31:g} MiB"
    at = [r for r in large if r.get("peakRssMiB")]
    if not at:
        return Judgement(target, f"not judged: dispatch not run at N = {LARGE:,}", None)
    peak = max(r["peakRssMiB"] for r in at)
    return Judgement(target, f"{peak:.1f} MiB", peak < PEAK_MIB_31)


def _intact(row: dict[str, Any]) -> bool:
    return (row.get("lost"), row.get("duplicated"), row.get("wrongState")) == (0, 0, 0)


def _losses(row: dict[str, Any]) -> str:
    return (
        f"lost {row.get('lost')}, duplicated {row.get('duplicated')}, wrong {row.get('wrongState')}"
    )


def _intact_large(large: list[dict[str, Any]]) -> Judgement:
    target = f"0 lost, duplicated or wrong at N = {LARGE:,}"
    if not large:
        return Judgement(target, f"not judged: dispatch not run at N = {LARGE:,}", None)
    return Judgement(target, "; ".join(_losses(r) for r in large), all(map(_intact, large)))


def _submission(rows: list[dict[str, Any]]) -> list[Judgement]:
    """Met: the TrainJobs created in time while the emulator sent 429s, nothing lost,
    duplicated or wrong. Without a 429 the overload was not shown: not judged."""
    target = (
        f"submission: {SUBMISSION_AT:,} TrainJobs created in under {SUBMISSION_S:g} s, "
        "the emulator answering 429 under configured overload"
    )
    at = [r for r in rows if r["jobs"] == SUBMISSION_AT]
    if not at:
        return [Judgement(target, f"not judged: no submission run at N = {SUBMISSION_AT:,}", None)]
    judged = []
    for r in at:
        if "error" in r:
            judged.append(Judgement(target, f"not finished: {r['error'][:120]}", False))
            continue
        measured = (
            f"{r['submissionSeconds']:.1f} s, {r.get('throttled', 0):,} 429s sent, "
            f"{r.get('trainJobs')} TrainJobs, {_losses(r)}{_cpu_shares(r)}"
        )
        if not r.get("throttled"):
            judged.append(Judgement(target, f"not judged: no 429 sent ({measured})", None))
            continue
        met = r["submissionSeconds"] < SUBMISSION_S and _intact(r)
        judged.append(Judgement(target, measured, met and r.get("trainJobs") == r["jobs"]))
    return judged


def _cpu_shares(r: dict[str, Any]) -> str:
    """The CPU per job the supervisor and the emulator took while submitting, when measured:
    the two share this machine's cores, so they explain a submission slower than the target."""
    mine, server = r.get("submissionCpuMsPerJob"), r.get("emulatorSubmissionCpuMsPerJob")
    if mine is None or server is None:
        return ""
    return f"; CPU per job while submitting: supervisor {mine:.1f} ms, emulator {server:.1f} ms"


def _sdk_large(sdk: list[dict[str, Any]]) -> Judgement:
    """Shown, not a figure to reach: the SDK's row where it finished, or where it stopped."""
    target = f"the SDK's row at N = {LARGE:,}, or the point at which it stops answering"
    if not sdk:
        return Judgement(target, f"not judged: the SDK not run at N = {LARGE:,}", None)
    r = sdk[-1]
    if "error" not in r:
        return Judgement(target, f"finished: {r['reported']:,} of {r['jobs']:,} reported", True)
    stopped = r.get("stopped")
    if not stopped:
        return Judgement(target, f"not finished, no stopping point: {r['error'][:120]}", False)
    return Judgement(target, "stopped: " + stopping_point(stopped, r["jobs"]), True)


def stopping_point(stopped: dict[str, Any], jobs: int) -> str:
    """Where a killed SDK run had got to, in words."""
    last = stopped.get("lastReturnSeconds")
    since = "none returned" if last is None else f"the last return seen {last:g} s after go"
    return (
        f"killed {stopped['killedAfterGoSeconds']:g} s after go; "
        f"{stopped['waitersReturned']:,} of {jobs:,} waiters had returned ({since}); "
        f"{stopped['trainJobsEnded']:,} TrainJobs had ended; "
        f"{_rate(stopped)} requests/s served in the last "
        f"{stopped.get('lastMinuteSeconds', 60.0):g} s"
    )


def _rate(stopped: dict[str, Any]) -> str:
    rate = stopped.get("requestsPerSecondLastMinute")
    return "—" if rate is None else f"{rate:g}"

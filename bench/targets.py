"""Issue 10's targets for dispatch, judged from the scale benchmark's rows (no timing here:
only what a run measured). Each judgement says what was compared, the figure, and whether
the target is met; a target whose rows were not run is "not judged", never met."""

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

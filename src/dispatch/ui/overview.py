"""The overview's figures, from the index's rows. Pure: rows and ``now`` in, values out.

* ends by cause over time: jobs that ended, counted per time bucket and per outcome
  (``succeeded`` or the cause), over the span from the first end to ``now``;
* time lost per cause: the running time of every attempt that ended other than succeeded
  (from its creation to its end), summed by its cause; retried attempts count too;
* now: jobs running, queued, pending and held, per cluster.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from dispatch.model import State
from dispatch.ui.rows import JobRow

SUCCEEDED = "succeeded"
OPEN_STATES = (State.RUNNING, State.QUEUED, State.PENDING, State.HELD)


@dataclass(frozen=True, slots=True)
class EndsOverTime:
    labels: tuple[str, ...]  # one per bucket: its start time, as the chart shows it
    series: dict[str, list[int]]  # outcome -> count per bucket
    bucket_seconds: float


@dataclass(frozen=True, slots=True)
class Overview:
    ends: EndsOverTime
    lost: dict[str, float]  # cause -> seconds lost, largest first
    by_cluster: dict[str, dict[str, int]]  # cluster -> open state -> jobs
    totals: dict[str, int]  # outcome -> jobs ended


def _bucket_size(span: float, buckets: int) -> float:
    """A round bucket size (a minute, 5 min, an hour, 6 h, a day …) giving at most
    ``buckets`` buckets over ``span``."""
    for size in (60, 300, 900, 3600, 3 * 3600, 6 * 3600, 86400, 7 * 86400):
        if span / size <= buckets:
            return float(size)
    return 30 * 86400.0


def _label(at: float, size: float) -> str:
    fmt = "%m-%d" if size >= 86400 else "%m-%d %H:%M"
    return time.strftime(fmt, time.gmtime(at))


def ends_over_time(rows: Sequence[JobRow], now: float, buckets: int = 12) -> EndsOverTime:
    ended = [(r.ended_at, r.cause.value if r.cause else SUCCEEDED) for r in rows if r.ended_at]
    if not ended:
        return EndsOverTime((), {}, 0.0)
    first = min(at for at, _ in ended if at is not None)
    size = _bucket_size(max(now - first, 1.0), buckets)
    origin = first - first % size
    count = int((now - origin) // size) + 1
    series: dict[str, list[int]] = defaultdict(lambda: [0] * count)
    for at, outcome in ended:
        if at is not None:
            series[outcome][min(int((at - origin) // size), count - 1)] += 1
    labels = tuple(_label(origin + i * size, size) for i in range(count))
    ordered = dict(sorted(series.items(), key=lambda kv: (kv[0] != SUCCEEDED, kv[0])))
    return EndsOverTime(labels, ordered, size)


def time_lost(rows: Sequence[JobRow]) -> dict[str, float]:
    lost: dict[str, float] = defaultdict(float)
    for row in rows:
        for attempt in row.attempts:
            if attempt.lost and attempt.ended_at is not None:
                cause = attempt.cause.value if attempt.cause else "unknown"
                lost[cause] += max(0.0, attempt.ended_at - attempt.created_at)
    return dict(sorted(lost.items(), key=lambda kv: -kv[1]))


def by_cluster(rows: Sequence[JobRow]) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = {}
    for row in rows:
        if row.state in OPEN_STATES:
            counts = found.setdefault(row.cluster, {s.value: 0 for s in OPEN_STATES})
            counts[row.state.value] += 1
    return dict(sorted(found.items()))


def build(rows: Sequence[JobRow], now: float) -> Overview:
    totals = Counter(r.cause.value if r.cause else SUCCEEDED for r in rows if r.ended_at)
    return Overview(
        ends=ends_over_time(rows, now),
        lost=time_lost(rows),
        by_cluster=by_cluster(rows),
        totals=dict(totals.most_common()),
    )


def hours(seconds: float) -> str:
    """``3.2 h``, ``12 min``, ``40 s``."""
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"

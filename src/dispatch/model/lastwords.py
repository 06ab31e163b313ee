"""Last words: the tail of a failed rank's output, kept in the records as evidence (kind
``log``), so ``dispatch logs`` and ``dispatch status`` can show it after the scheduler has
deleted the output (a pod and its log) or the attempt's folder. Bounded: the last
``TAIL_LINES`` lines, at most ``TAIL_BYTES`` bytes. The records are private (mode 0600).

``data``: ``{"rank", "where", "lines", "truncated", "previous"}`` (``where``: the pod, or the
output file; ``previous``: the run before a container restart).
"""

from __future__ import annotations

from dispatch.model.outcome import Evidence

KIND = "log"
TAIL_LINES = 200
TAIL_BYTES = 64 * 1024


def tail(text: str) -> tuple[list[str], bool]:
    """The last lines of ``text`` within the bounds, and whether anything was cut."""
    lines = text.splitlines()
    cut = len(lines) > TAIL_LINES
    lines = lines[-TAIL_LINES:]
    size = sum(len(line) + 1 for line in lines)
    while lines and size > TAIL_BYTES:
        size -= len(lines.pop(0)) + 1
        cut = True
    return lines, cut


def last_words(
    rank: int, where: str, text: str, now: float, *, previous: bool = False, **data: object
) -> Evidence | None:
    """The evidence keeping the tail of ``text`` (rank ``rank``'s output at ``where``), or
    None when it is empty."""
    lines, cut = tail(text)
    if not lines:
        return None
    which = "before its last restart" if previous else "at the end"
    return Evidence(
        kind=KIND,
        key=f"log/{where}" + ("/previous" if previous else ""),
        observed_at=now,
        summary=f"the last {len(lines)} lines of rank {rank} ({where}) {which}",
        data={
            "rank": rank,
            "where": where,
            "lines": lines,
            "truncated": cut,
            "previous": previous,
            **data,
        },
    )

"""Request accounting: requests served by verb and resource, and open watch streams.

Requests API Priority and Fairness rejected (429 before being served) are counted apart, in
``throttled``: ``requests`` holds what went past flow control, as it did without it.

Counters are updated on the event-loop thread and read from any thread through
:meth:`RequestAccounting.snapshot` (a consistent copy taken under a lock).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RequestCounts:
    requests: dict[tuple[str, str], int]  # (verb, resource) -> requests served
    open_watches: dict[str, int]  # resource -> watch streams open now
    watches_started: int
    #: (verb, resource) -> requests flow control rejected with 429 (not in ``requests``)
    throttled: dict[tuple[str, str], int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def count(self, verb: str | None = None, resource: str | None = None) -> int:
        return sum(
            n
            for (v, r), n in self.requests.items()
            if (verb is None or v == verb) and (resource is None or r == resource)
        )

    @property
    def throttled_total(self) -> int:
        return sum(self.throttled.values())

    @property
    def open_watch_total(self) -> int:
        return sum(self.open_watches.values())


class RequestAccounting:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, str]] = Counter()
        self._open: Counter[str] = Counter()
        self._started = 0
        self._throttled: Counter[tuple[str, str]] = Counter()

    def request(self, verb: str, resource: str) -> None:
        with self._lock:
            self._requests[(verb, resource)] += 1

    def throttled(self, verb: str, resource: str) -> None:
        with self._lock:
            self._throttled[(verb, resource)] += 1

    def watch_opened(self, resource: str) -> None:
        with self._lock:
            self._open[resource] += 1
            self._started += 1

    def watch_closed(self, resource: str) -> None:
        with self._lock:
            self._open[resource] -= 1

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._started = 0
            self._throttled.clear()

    def snapshot(self) -> RequestCounts:
        with self._lock:
            return RequestCounts(
                dict(self._requests),
                {k: v for k, v in self._open.items() if v},
                self._started,
                dict(self._throttled),
            )

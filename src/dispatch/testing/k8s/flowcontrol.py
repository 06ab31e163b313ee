"""API Priority and Fairness (APF): the emulator answering 429 under configured overload.

kube-apiserver's APF filter runs after authentication and before authorization. It classifies
every request by a FlowSchema into a priority level; a limited level executes a bounded number
of requests at once (its seats), queues the next ones for a bounded time in bounded queues, and
rejects the rest with ``429`` (``k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go``).
What this module keeps of it:

- one limited priority level, ``global-default``, for every request not exempt: ``seats``
  requests execute at once, up to ``queue_length`` more wait in one FIFO queue, each at most
  ``queue_wait`` real seconds; a request finding the queue full, or waiting too long, is
  rejected;
- the ``exempt`` level (FlowSchema ``exempt``: the group ``system:masters``, or whom
  ``exempt_users`` / ``exempt_groups`` name) is never queued nor rejected;
- a watch holds its seat only while it starts: until its response headers are sent;
- other long-running requests (logs, exec, attach, port-forward, proxy) bypass APF;
- every request APF handled carries ``X-Kubernetes-PF-FlowSchema-UID`` and
  ``X-Kubernetes-PF-PriorityLevel-UID`` (UIDs, not names, as the server sends);
- a rejection is Go's ``http.Error``: ``text/plain`` ``Too many requests, please try again
  later.`` (not a ``Status``: clients build the ``TooManyRequests`` Status themselves), with
  ``Retry-After`` from the dropped-requests tracker: 1 s, doubled (to at most 32) when at least
  3 x its value requests were dropped in the last that-many seconds, lowered by one when fewer
  than its value were.

Left out: FlowSchema / PriorityLevelConfiguration objects and their API, several levels and
concurrency borrowing, shuffle sharding and fair queuing between flows, work estimation (a
list costs one seat here, as a write does), the request-deadline-derived wait limit.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from aiohttp import web

from dispatch.testing.k8s.rbac import UserInfo

#: response headers naming the matched FlowSchema and priority level by UID
#: (``k8s.io/api/flowcontrol/v1`` ``ResponseHeaderMatched...UID``)
FLOW_SCHEMA_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"
#: the text of a rejection (``filters.tooManyRequests``; ``http.Error`` adds the newline)
REJECTION_TEXT = "Too many requests, please try again later."
#: the largest ``Retry-After`` the dropped-requests tracker gives, in seconds
MAX_RETRY_AFTER = 32
#: subresources the server's long-running check names; such requests bypass APF (a watch,
#: also long-running, does not: it is limited while it starts)
LONG_RUNNING_SUBRESOURCES = frozenset({"attach", "exec", "log", "portforward", "proxy"})
#: the group the ``exempt`` FlowSchema matches (``user.SystemPrivilegedGroup``)
SYSTEM_MASTERS = "system:masters"


@dataclass(frozen=True)
class FlowControl:
    """The configured limit (``ClusterConfig.flow_control``; None there: no limit at all).

    ``seats``: requests executing at once; ``queue_length``: requests waiting at most;
    ``queue_wait``: real seconds one may wait before its 429. The exempt sets default to the
    real server's: ``system:masters`` (the emulator's administrator kubeconfig is in it, so
    name no exempt group to throttle that client too)."""

    seats: int = 10
    queue_length: int = 50
    queue_wait: float = 15.0
    exempt_users: frozenset[str] = frozenset()
    exempt_groups: frozenset[str] = frozenset({SYSTEM_MASTERS})

    def __post_init__(self) -> None:
        if self.seats < 1:
            raise ValueError(f"seats must be at least 1, not {self.seats}")
        if self.queue_length < 0:
            raise ValueError(f"queue_length must not be negative, not {self.queue_length}")
        if self.queue_wait < 0:
            raise ValueError(f"queue_wait must not be negative, not {self.queue_wait}")


def _uid(kind: str, name: str) -> str:
    """A stable UID for a bootstrap object (the real ones are random per cluster)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"flowcontrol.apiserver.k8s.io/{kind}/{name}"))


@dataclass(frozen=True)
class Classification:
    """The FlowSchema and priority level a request matched."""

    flow_schema: str
    priority_level: str

    @property
    def exempt(self) -> bool:
        return self.priority_level == "exempt"

    @property
    def headers(self) -> dict[str, str]:
        return {
            FLOW_SCHEMA_HEADER: _uid("flowschemas", self.flow_schema),
            PRIORITY_LEVEL_HEADER: _uid("prioritylevelconfigurations", self.priority_level),
        }


EXEMPT = Classification("exempt", "exempt")
GLOBAL_DEFAULT = Classification("global-default", "global-default")


def classify(config: FlowControl, user: UserInfo) -> Classification:
    """``exempt`` for an exempt user or group member, else ``global-default``."""
    if user.name in config.exempt_users or set(user.groups) & config.exempt_groups:
        return EXEMPT
    return GLOBAL_DEFAULT


@dataclass
class RetryAfter:
    """The dropped-requests tracker of one priority level: ``Retry-After`` grows when many
    requests are dropped and shrinks when few are, reconsidered when a new second starts."""

    value: int = 1
    _second: int | None = None  # the second being counted
    _count: int = 0
    _history: dict[int, int] = field(default_factory=dict)  # earlier second -> drops
    _raised_at: int = 0  # the second ``value`` was last doubled

    def dropped(self, now: float) -> None:
        second = int(now)
        if second == self._second:
            self._count += 1
            return
        if self._second is not None:
            self._history[self._second] = self._count
        self._history = {s: n for s, n in self._history.items() if second - s <= MAX_RETRY_AFTER}
        self._second, self._count = second, 1
        recent = sum(n for s, n in self._history.items() if second - s <= self.value)
        if second - self._raised_at >= self.value and recent >= 3 * self.value:
            self.value = min(2 * self.value, MAX_RETRY_AFTER)
            self._raised_at = second
        elif recent < self.value and self.value > 1:
            self.value -= 1


class Throttled(Exception):
    """The request is rejected; :meth:`response` is the answer."""

    def __init__(self, retry_after: int, classification: Classification = GLOBAL_DEFAULT) -> None:
        super().__init__(f"too many requests, retry after {retry_after}s")
        self.retry_after = retry_after
        self.classification = classification
        self.verb = ""  # what was asked, for the accounting (set by FlowController.admit)
        self.resource = ""

    def response(self) -> web.Response:
        """The 429 as kube-apiserver writes it: Go's ``http.Error`` and the APF headers."""
        response = web.Response(
            text=REJECTION_TEXT + "\n", status=429, content_type="text/plain", charset="utf-8"
        )
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Retry-After"] = str(self.retry_after)
        response.headers.update(self.classification.headers)
        return response


class Seat:
    """One executing request's seat; :meth:`release` (idempotent) frees it for the next."""

    def __init__(self, level: PriorityLevel | None) -> None:
        self._level = level

    def release(self) -> None:
        level, self._level = self._level, None
        if level is not None:
            level.free()


class PriorityLevel:
    """The limited level's seats and queue, on the server's event loop.

    Guarantees: at most ``seats`` seats are held at once; waiting requests get seats in the
    order they came; :meth:`acquire` returns a held seat or raises :class:`Throttled` (queue
    full, or ``queue_wait`` passed), and a request cancelled while waiting holds nothing."""

    def __init__(self, config: FlowControl, now: Callable[[], float]) -> None:
        self.config = config
        self._now = now
        self.executing = 0
        self._queue: deque[asyncio.Future[bool]] = deque()
        self.retry_after = RetryAfter()

    @property
    def waiting(self) -> int:
        return len(self._queue)

    async def acquire(self) -> Seat:
        if self.executing < self.config.seats and not self._queue:
            self.executing += 1
            return Seat(self)
        if len(self._queue) >= self.config.queue_length:
            raise self._reject()
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[bool] = loop.create_future()
        self._queue.append(turn)
        timer = loop.call_later(self.config.queue_wait, self._expire, turn)
        try:
            granted = await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled() and turn.result():
                self.free()  # the seat came as the request was cancelled: pass it on
            elif turn in self._queue:
                self._queue.remove(turn)
            raise
        finally:
            timer.cancel()
        if not granted:
            raise self._reject()
        return Seat(self)

    def free(self) -> None:
        """A seat is given back: the longest-waiting request takes it."""
        self.executing -= 1
        while self._queue and self.executing < self.config.seats:
            turn = self._queue.popleft()
            if not turn.done():
                self.executing += 1
                turn.set_result(True)

    def _expire(self, turn: asyncio.Future[bool]) -> None:
        if not turn.done():
            self._queue.remove(turn)
            turn.set_result(False)

    def _reject(self) -> Throttled:
        self.retry_after.dropped(self._now())
        return Throttled(self.retry_after.value)


#: the request being served (each runs in its own task, hence its own context): how APF
#: classified it, and the seat a watch holds until its headers go out
_CLASSIFIED: ContextVar[Classification | None] = ContextVar("classified", default=None)
_WATCH_SEAT: ContextVar[Seat | None] = ContextVar("watch_seat", default=None)


class FlowController:
    """The APF filter of one API server: :meth:`admit` around each request's handling, and
    :meth:`on_response_prepare` as the application's ``on_response_prepare`` signal (it
    stamps the APF headers and ends a watch's hold on its seat as its headers go out)."""

    def __init__(self, config: FlowControl, now: Callable[[], float]) -> None:
        self.config = config
        self.level = PriorityLevel(config, now)

    @asynccontextmanager
    async def admit(
        self, user: UserInfo, verb: str, resource: str, subresource: str = ""
    ) -> AsyncIterator[None]:
        """Hold a seat while the body runs (exempt and long-running requests: no seat).
        Raises :class:`Throttled` before the body runs when the request is rejected."""
        if subresource in LONG_RUNNING_SUBRESOURCES:
            yield
            return
        classification = classify(self.config, user)
        _CLASSIFIED.set(classification)
        if classification.exempt:
            yield
            return
        try:
            seat = await self.level.acquire()
        except Throttled as exc:
            exc.classification, exc.verb, exc.resource = classification, verb, resource
            raise
        if verb == "watch":
            _WATCH_SEAT.set(seat)
        try:
            yield
        finally:
            seat.release()

    async def on_response_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        classification = _CLASSIFIED.get()
        if classification is not None:
            response.headers.update(classification.headers)
        seat = _WATCH_SEAT.get()
        if seat is not None:
            seat.release()

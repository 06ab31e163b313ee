"""One cluster's requests, bounded and throttled: no more in flight than the server takes, and
a 429 (or a 5xx carrying ``Retry-After``) honoured as client-go honours it.

client-go (``rest/request.go``, ``rest/with_retry.go``) retries an answer when ``checkWait``
says so: a 429, or any 5xx, *with* a ``Retry-After`` of whole seconds; it sleeps exactly those
seconds and sends the same request again (the body is replayed), at most ``maxRetries`` (10)
times, then returns the last answer's error. A 429 from API Priority and Fairness means the
request was rejected before it ran (its priority level had no seat and its queue was full),
so sending a create again is safe. Here:

- ``retry_after`` is that decision, pure: a 429 is always retried (a missing or unreadable
  ``Retry-After`` counts as ``DEFAULT_PAUSE``; a real API server always sends one), a 5xx only
  with a readable one; the wait is capped at ``MAX_PAUSE``.
- The request answered so waits its ``Retry-After`` (outside its slot) and is sent again, as
  in client-go; the others go on.
- **How many at once adapts to the server** (additive increase, multiplicative decrease, as
  TCP does with a congested link): at most ``limit`` requests are in flight, ``limit`` starting
  at ``max_in_flight``. A throttling answer halves it (once per ``Retry-After``: the answers to
  the requests sent together with the first are one signal, not many); every answer that is
  not throttling adds ``1/limit`` to it, up to ``max_in_flight``. A server whose seats and
  queues are full thus sees dispatch send fewer at once until it stops refusing, instead of
  every refused request coming back after its wait. (client-go bounds the rate instead, with
  a QPS/Burst token bucket, and exempts watches.)
- **Following before submitting.** Requests made under ``submitting()`` (a start: the
  runtime read, the copy, the TrainJob) give way: while a request of another kind waits for a
  slot, a submitting one takes a slot only if fewer than a ``SUBMISSION_SHARE`` of ``limit``
  submitting requests are in flight. What proves an end, reads a failed rank's last output
  or deletes what must not run again never waits behind a burst of thousands of starts, and
  starts still go on.
- A request holds its slot while the client's ``request`` call is awaited: for a typed call,
  until its whole answer is read; for a raw one (``_preload_content=False``: lists, watches),
  until the answer's headers arrive, so a watch's stream never keeps a slot (APF too lets a
  watch keep its seat only while it starts).
- ``ThrottledApiClient`` applies all this to every call of a ``kubernetes_asyncio`` client,
  typed or raw, through the one method they all go through (``ApiClient.request``).

After ``max_retries`` the last answer goes back to the caller as usual (``errors.translate``
makes a 429 a ``SchedulerUnavailable`` with its delay). ``Throttle.stats`` counts what happened,
for logs and benchmarks. The clock is injected: tests run the waits in virtual time.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from yarl import URL

from dispatch import jsontext
from dispatch.adapters.kubeflow.planning.settings import DEFAULT_MAX_IN_FLIGHT
from dispatch.clock import Clock, SystemClock
from dispatch.log import logger

#: requests of one connection in flight at once, by default (the ``maxInFlight`` setting's)
MAX_IN_FLIGHT = DEFAULT_MAX_IN_FLIGHT
#: times one request is sent again after throttling answers (client-go's default)
MAX_RETRIES = 10
#: the longest wait a ``Retry-After`` can impose, in seconds
MAX_PAUSE = 30.0
#: the wait after a 429 without a readable ``Retry-After``, in seconds
DEFAULT_PAUSE = 1.0
#: at most one log line per this many seconds about the server throttling
LOG_INTERVAL = 1.0
#: the share of ``limit`` submitting requests keep while others wait (see the docstring)
SUBMISSION_SHARE = 0.25

#: whether the requests made here submit work (``submitting``): they give way to the others
_SUBMITTING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "dispatch_submitting", default=False
)


@contextmanager
def submitting() -> Iterator[None]:
    """The requests made inside (and in the tasks started inside) submit work: they give way
    to requests that follow work already submitted (see the module's docstring)."""
    token = _SUBMITTING.set(True)
    try:
        yield
    finally:
        _SUBMITTING.reset(token)


log = logger(__name__)


def retry_after(status: int, headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait before sending a request again after this answer, or None when the
    answer is not to be retried (client-go's ``checkWait``, see the module's docstring)."""
    if status != 429 and status < 500:
        return None
    text = (headers or {}).get("Retry-After", "").strip()
    seconds = float(text) if text.isdigit() else None  # whole seconds, as client-go reads it
    if seconds is None:
        return DEFAULT_PAUSE if status == 429 else None
    return min(seconds, MAX_PAUSE)


@dataclass(slots=True)
class ThrottleStats:
    """What a connection's throttle did, since it was made (counts only grow)."""

    #: requests sent to the server, first sendings and retries
    sent: int = 0
    #: answers asking to wait (a 429, or a 5xx with ``Retry-After``)
    throttled: int = 0
    #: requests sent again after such an answer
    retries: int = 0
    #: requests still throttled after ``max_retries`` retries (their error went to the caller)
    gave_up: int = 0
    #: seconds requests spent waiting out ``Retry-After``, summed over requests
    waited: float = 0.0
    #: the most requests in flight at once
    peak_in_flight: int = 0
    #: the lowest ``limit`` the throttling answers brought the connection to
    lowest_limit: int = 0


class Throttle:
    """The shared state of one connection's requests: its limit and its slots.

    ``slot()`` admits a request (while fewer than ``limit`` are in flight); ``answered()`` and
    ``throttled()`` record how the server answered. The requests in flight are counted per
    event loop (a connection's client is per loop too); the limit and the counts are shared."""

    def __init__(
        self,
        max_in_flight: int = MAX_IN_FLIGHT,
        *,
        max_retries: int = MAX_RETRIES,
        clock: Clock | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1 (got {max_in_flight})")
        if max_retries < 0:
            raise ValueError(f"max_retries may not be negative (got {max_retries})")
        self.max_in_flight = max_in_flight
        self.max_retries = max_retries
        self.stats = ThrottleStats(lowest_limit=max_in_flight)
        self._clock: Clock = clock or SystemClock()
        self._limit = float(max_in_flight)
        self._halved_until = -math.inf  # throttling answers before this are the same signal
        self._logged_at = -math.inf
        self._in_flight = 0
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Gate] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def limit(self) -> int:
        """How many requests may be in flight at once now (1 to ``max_in_flight``)."""
        return max(1, int(self._limit))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the ``limit`` slots while a request is sent and answered."""
        gate = self._gates.get(asyncio.get_running_loop())
        if gate is None:
            gate = self._gates.setdefault(asyncio.get_running_loop(), _Gate())
        low = _SUBMITTING.get()
        async with gate.changed:
            if low:
                await gate.changed.wait_for(lambda: self._admits_submission(gate))
                gate.submitting += 1
            else:
                gate.following_waiting += 1
                try:
                    await gate.changed.wait_for(lambda: gate.in_flight < self.limit)
                finally:
                    gate.following_waiting -= 1
            gate.in_flight += 1
        self._in_flight += 1
        self.stats.sent += 1
        self.stats.peak_in_flight = max(self.stats.peak_in_flight, self._in_flight)
        try:
            yield
        finally:
            self._in_flight -= 1
            async with gate.changed:
                gate.in_flight -= 1
                if low:
                    gate.submitting -= 1
                gate.changed.notify_all()

    def _admits_submission(self, gate: _Gate) -> bool:
        """A submitting request may take a slot: one is free, and no other request waits for
        it unless submitting ones hold less than their share."""
        if gate.in_flight >= self.limit:
            return False
        share = max(1, int(self.limit * SUBMISSION_SHARE))
        return gate.following_waiting == 0 or gate.submitting < share

    def answered(self) -> None:
        """The server answered a request without throttling it: one more may be in flight
        once ``limit`` such answers came (additive increase)."""
        if self._limit < self.max_in_flight:
            self._limit = min(float(self.max_in_flight), self._limit + 1 / self._limit)

    async def pause(self, seconds: float) -> None:
        """Wait out a ``Retry-After`` (the request waiting holds no slot)."""
        start = self._clock.now()
        await self._clock.sleep(seconds)
        self.stats.waited += self._clock.now() - start

    def throttled(self, seconds: float, status: int, method: str, url: str, retries: int) -> bool:
        """The server answered ``status`` to a request (``method`` ``url``, already sent again
        ``retries`` times), asking it to wait ``seconds``: the limit halves (once per such
        wait). True when the request is to be sent again after the wait, False when it has
        been sent again ``max_retries`` times already."""
        now = self._clock.now()
        self.stats.throttled += 1
        if now >= self._halved_until:
            self._limit = max(1.0, self._limit / 2)
            self._halved_until = now + max(seconds, DEFAULT_PAUSE)
            self.stats.lowest_limit = min(self.stats.lowest_limit, self.limit)
        if now - self._logged_at >= LOG_INTERVAL:
            self._logged_at = now
            log.info(
                "the API server throttles requests: %s %s answered %d with Retry-After %gs; "
                "at most %d requests at once now (%d throttling answers so far)",
                method,
                urlsplit(url).path,
                status,
                seconds,
                self.limit,
                self.stats.throttled,
            )
        if retries >= self.max_retries:
            self.stats.gave_up += 1
            return False
        self.stats.retries += 1
        return True


class _Gate:
    """The requests of one event loop in flight, and the condition their slots wait on."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.submitting = 0  # of those in flight, submitting (``submitting``)
        self.following_waiting = 0  # requests not submitting that wait for a slot
        self.changed = asyncio.Condition()


class ThrottledApiClient(client.ApiClient):
    """A ``kubernetes_asyncio`` client whose every request goes through a ``Throttle``:
    admitted into a slot, and sent again (the same request) after a throttling answer, at most
    ``throttle.max_retries`` times; then that answer goes back to the caller as it came (an
    ``ApiException``, or the raw response for ``_preload_content=False``)."""

    def __init__(self, configuration: client.Configuration, throttle: Throttle) -> None:
        super().__init__(configuration)
        self.throttle = throttle
        _proxy_once(self.rest_client, configuration.host or "")

    def sanitize_for_serialization(self, obj: Any) -> Any:
        """``obj`` as the client sends it: itself when it is JSON data alone
        (``jsontext.plain``: every object and patch dispatch builds), which the client's own
        conversion would rebuild equal, value by value in Python (5 % of the supervisor's CPU
        while it starts 1,000 TrainJobs); otherwise that conversion (models, dates)."""
        if isinstance(obj, dict | list) and jsontext.plain(obj):
            return obj
        return super().sanitize_for_serialization(obj)

    async def request(
        self,
        method: str,
        url: str,
        query_params: Any = None,
        headers: Any = None,
        post_params: Any = None,
        body: Any = None,
        _preload_content: bool = True,
        _request_timeout: Any = None,
    ) -> Any:
        throttle = self.throttle
        retries = 0
        while True:
            pause: float | None = None
            async with throttle.slot():
                try:
                    response = await super().request(
                        method,
                        url,
                        query_params=query_params,
                        headers=headers,
                        post_params=post_params,
                        body=body,
                        _preload_content=_preload_content,
                        _request_timeout=_request_timeout,
                    )
                except ApiException as exc:
                    status = int(exc.status or 0)
                    pause = retry_after(status, exc.headers)
                    if pause is None or not throttle.throttled(pause, status, method, url, retries):
                        if pause is None:
                            throttle.answered()
                        raise
                else:
                    status = 200 if _preload_content else int(response.status)
                    if not _preload_content:
                        pause = retry_after(status, response.headers)
                    if pause is None or not throttle.throttled(pause, status, method, url, retries):
                        if pause is None:
                            throttle.answered()
                        return response  # a typed call's answer is 2xx (else ApiException)
                    response.release()
            await throttle.pause(pause)
            retries += 1


def _proxy_once(rest: Any, host: str) -> None:
    """Choose the proxy to the API server once, as client-go does, not at every request.

    ``kubernetes_asyncio``'s session trusts the environment, so aiohttp looks for a proxy
    (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``) and reads ``~/.netrc`` for credentials on
    every request, each in a thread of the executor (two thread hops per request; the
    supervisor's CPU while it starts 1,000 jobs did not measurably change without them).
    client-go reads the proxy variables once (``http.ProxyFromEnvironment``) and never reads
    ``.netrc``, so no credentials from it reach the API server. So: the kubeconfig's
    ``proxy-url`` if it has one, else the environment's proxy for the server's address (with
    its credentials, if the variable carries them), chosen here; the session then stops
    looking (``_trust_env``, one of aiohttp's ``ClientSession`` attributes)."""
    session = rest.pool_manager
    if not rest.proxy:
        with contextlib.suppress(LookupError):
            proxy, auth = get_env_proxy_for_url(URL(host))
            rest.proxy = str(proxy)
            if auth is not None:
                rest.proxy_headers = {"Proxy-Authorization": auth.encode()}
    session._trust_env = False

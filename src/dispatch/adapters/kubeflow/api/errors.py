"""Kubernetes API failures translated into dispatch's error tree, at the adapter boundary.

``translate(exc, what, write=...)`` is the one place an ``ApiException``, an aiohttp client
error or a timeout becomes a ``DispatchError``; nothing else in the adapter catches them.

| answer | error | why |
|---|---|---|
| 404 | ``NotFound`` | the object (or the namespace) does not exist |
| 403 | ``Forbidden`` | the credentials may not do this |
| 401 | ``Forbidden`` | the credentials are not accepted (expired token...) |
| 409 ``AlreadyExists`` | ``AlreadyExists`` | a create found the name taken; the caller adopts or refuses |
| 409 other | ``Conflict`` | optimistic concurrency lost; read again and retry |
| 400, 405, 415, 422 | ``ApiRejected`` | the server refused the request itself (schema, CEL, webhook) |
| 429 | ``SchedulerUnavailable(delay=Retry-After)`` | throttled before anything happened |
| 5xx, other | ``SchedulerUnavailable`` for reads, ``OutcomeUnknown`` for writes | a write's effect is unknown |
| connection refused | ``SchedulerUnavailable`` | nothing was sent |
| timeout, dropped connection | ``SchedulerUnavailable`` for reads, ``OutcomeUnknown`` for writes | |
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from dispatch.model import (
    DispatchError,
    Forbidden,
    NotFound,
    OutcomeUnknown,
    PermanentError,
    SchedulerUnavailable,
    TransientError,
)

#: what the adapter catches around a Kubernetes call (and nothing broader)
API_FAILURES: tuple[type[BaseException], ...] = (
    ApiException,
    aiohttp.ClientError,
    asyncio.TimeoutError,
)


class AlreadyExists(PermanentError):
    """A create found an object of that name (HTTP 409, reason ``AlreadyExists``)."""


class Conflict(TransientError):
    """A write lost an optimistic-concurrency race (HTTP 409); read again and retry."""


class ApiRejected(PermanentError):
    """The API server refused the request itself (invalid object, webhook denial...)."""

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


def status_of(exc: ApiException) -> tuple[str, str]:
    """The (reason, message) of the ``Status`` object an API error carries, when it has one."""
    body: Any = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        status = json.loads(body) if isinstance(body, str) and body else {}
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason = str(status.get("reason") or exc.reason or "")
    message = str(status.get("message") or exc.reason or "")
    return reason, message


def _retry_after(exc: ApiException) -> float | None:
    headers: Any = exc.headers or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def translate(exc: BaseException, what: str, *, write: bool = False) -> DispatchError:
    """The dispatch error for a failed Kubernetes call; ``what`` says what was being done
    (``"create TrainJob ml-team/x-1"``) and ``write`` whether the call could have changed
    something (its effect is then unknown after a timeout or a server error)."""
    if isinstance(exc, ApiException):
        return _from_status(exc, what, write)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return SchedulerUnavailable(f"cannot {what}: the API server cannot be reached ({exc})")
    detail = str(exc) or type(exc).__name__
    if write:
        return OutcomeUnknown(
            f"cannot tell whether {what} took effect: the connection failed ({detail})"
        )
    return SchedulerUnavailable(f"cannot {what}: the connection failed ({detail})")


def _from_status(exc: ApiException, what: str, write: bool) -> DispatchError:
    status = int(exc.status or 0)
    reason, message = status_of(exc)
    text = f"cannot {what}: {status} {reason}: {message}".rstrip(": ")
    if status == 404:
        return NotFound(text)
    if status in (401, 403):
        return Forbidden(text)
    if status == 409:
        return AlreadyExists(text) if reason == "AlreadyExists" else Conflict(text)
    if status == 429:
        return SchedulerUnavailable(text, delay=_retry_after(exc))
    if status in (400, 405, 406, 413, 415, 422):
        return ApiRejected(text, status=status, reason=reason)
    if write:
        return OutcomeUnknown(f"{text} (the request's effect is unknown)")
    return SchedulerUnavailable(text)

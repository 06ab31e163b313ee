"""Long-lived HTTP responses: watch streams (JSON lines) and followed container logs.

Watch guarantees: events in resourceVersion order, as ``{"type": ..., "object": ...}`` lines;
``BOOKMARK`` events (when ``allowWatchBookmarks``) carry the store's current resourceVersion
and are sent only when every earlier selected change has been sent; ``sendInitialEvents``
ends the initial ``ADDED`` burst with a bookmark annotated ``k8s.io/initial-events-end``; a
too-old resourceVersion yields one ``ERROR`` event holding a 410 ``Expired`` Status, then the
stream ends; ``timeoutSeconds`` ends the stream cleanly after that many real seconds, whatever
the emulated clock's pace (an API server's request timeout is wall-clock time: a client that
asks for 30 s gets its stream back in 30 s at any ``time_scale``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from dispatch import jsontext
from dispatch.clock import Clock
from dispatch.testing.k8s.conversion import from_storage
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.faults import FaultDecision
from dispatch.testing.k8s.logs import ContainerLog
from dispatch.testing.k8s.meta import rfc3339_micro
from dispatch.testing.k8s.resources import ResourceType
from dispatch.testing.k8s.store import Store
from dispatch.testing.k8s.watch import Subscription

JsonObj = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
_POLL = 0.5  # real seconds between checks that a quiet watch's client is still connected


@dataclass(frozen=True)
class WatchOptions:
    since: int | None
    bookmarks: bool
    timeout: float | None
    send_initial_events: bool


def _line(event_type: str, obj: JsonObj) -> bytes:
    return jsontext.encode({"type": event_type, "object": obj}) + b"\n"


async def _start(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    return resp


def _task(coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """A task of ``coroutine`` itself, so that one cancelled before it ran closes it (a
    wrapper would leave it never awaited: a ``RuntimeWarning`` when a watch ends)."""
    return asyncio.ensure_future(coroutine)


async def serve_watch(
    request: web.Request,
    store: Store,
    rtype: ResourceType,
    sub_or_error: Subscription | ApiError,
    options: WatchOptions,
    clock: Clock,
    bookmark_interval: float,
    fault: FaultDecision,
    *,
    wall: Clock | None = None,
    table: Callable[[JsonObj], JsonObj] | None = None,
) -> web.StreamResponse:
    """Serve one watch; ``wall`` times ``timeoutSeconds`` (default: ``clock``); ``table``
    turns each event's object into what the client asked for instead (a ``Table``)."""
    resp = await _start(request)
    if isinstance(sub_or_error, ApiError) or fault.watch_gone:
        status = (
            sub_or_error.status()
            if isinstance(sub_or_error, ApiError)
            else ApiError(410, "Expired", "too old resource version: injected fault").status()
        )
        await resp.write(_line("ERROR", status))
        await resp.write_eof()
        return resp
    sub = sub_or_error
    stype = store.catalog.storage_type(rtype)
    wire_key = rtype.api_version

    def render(obj: JsonObj) -> JsonObj:
        return from_storage(rtype, stype, obj)

    initial = sub.pending if options.send_initial_events and not options.since else -1
    sent = 0
    deadline = _task((wall or clock).sleep(options.timeout)) if options.timeout else None
    drop = _task(clock.sleep(fault.drop_after_seconds)) if fault.drop_after_seconds else None
    tick = _task(clock.sleep(bookmark_interval)) if options.bookmarks else None
    nxt: asyncio.Task[Any] | None = None
    try:
        while True:
            if initial == 0 and options.bookmarks:
                await resp.write(_bookmark(rtype, store.resource_version, initial_end=True))
                initial = -1
            nxt = nxt or _task(sub.next())
            waiting = [t for t in (nxt, deadline, drop, tick) if t is not None]
            done, _ = await asyncio.wait(
                waiting, timeout=_POLL, return_when=asyncio.FIRST_COMPLETED
            )
            if not done and _disconnected(request):
                return resp
            if drop in done:
                _abort(request)
                return resp
            if nxt in done:
                item = nxt.result()
                nxt = None
                if item is None:
                    break
                event_type, change = item
                if table is None:
                    await resp.write(change.wire(wire_key, event_type, render))
                else:  # this watcher's own rendering, not the shared encoded line
                    await resp.write(_line(event_type, table(render(change.obj))))
                sent += 1
                initial -= 1 if initial > 0 else 0
                if fault.drop_after_events and sent >= fault.drop_after_events:
                    _abort(request)
                    return resp
            if tick in done:
                if sub.pending == 0:
                    await resp.write(_bookmark(rtype, store.resource_version))
                tick = _task(clock.sleep(bookmark_interval))
            if deadline in done:
                break
        await resp.write_eof()
    except ConnectionResetError:
        pass
    finally:
        for task in (nxt, deadline, drop, tick):
            if task is not None:
                task.cancel()
        sub.close()
    return resp


def _disconnected(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


def _bookmark(rtype: ResourceType, rv: int, *, initial_end: bool = False) -> bytes:
    meta: JsonObj = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return _line(
        "BOOKMARK", {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
    )


def _abort(request: web.Request) -> None:
    """Cut the connection without ending the chunked body (a dropped stream)."""
    if request.transport is not None:
        request.transport.close()


def _format(when: float, text: str, timestamps: bool) -> bytes:
    prefix = rfc3339_micro(when).replace("Z", "000Z") + " " if timestamps else ""
    return f"{prefix}{text}\n".encode()


async def serve_log(
    request: web.Request,
    log: ContainerLog,
    *,
    follow: bool,
    timestamps: bool,
    tail: int | None,
    limit_bytes: int | None,
    previous: bool = False,
) -> web.StreamResponse:
    """The current run of the container's log (``previous``: the run before its last
    restart; the caller answers 400 when there is none)."""
    first, end = log.run(previous) or (0, 0)
    start = max(first, end - tail) if tail is not None else first
    if not follow or previous:
        body = b"".join(_format(w, t, timestamps) for w, t in log.lines[start:end])
        if limit_bytes is not None:
            body = body[:limit_bytes]
        return web.Response(body=body, content_type="text/plain")
    resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    written = 0
    with contextlib.suppress(ConnectionResetError):
        async for when, text in log.follow(start):
            chunk = _format(when, text, timestamps)
            if limit_bytes is not None:
                chunk = chunk[: max(0, limit_bytes - written)]
            await resp.write(chunk)
            written += len(chunk)
            if limit_bytes is not None and written >= limit_bytes:
                break
        await resp.write_eof()
    return resp

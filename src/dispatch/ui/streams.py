"""The pages' live streams (server-sent events): the jobs table's rows, a job's changes,
and a rank's output as it is written.

Each stream ends when the page goes away or the server stops: the feed's streams receive its
last word (``None``), the log streams are cancelled (``UiState.streams``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from dispatch.model import DispatchError
from dispatch.ui.feed import Change
from dispatch.ui.state import UiState, job_id_of, ui_of

#: seconds between keep-alive comments on an idle stream
HEARTBEAT = 15.0


async def _stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    return response


def _event(name: str, data: Any, event_id: int | None = None) -> bytes:
    lines = [f"event: {name}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    lines += [f"data: {part}" for part in text.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


async def _changes(ui: UiState) -> AsyncIterator[Change | None]:
    """The feed's changes for one page, with ``None`` every ``HEARTBEAT`` seconds of quiet;
    ends when the server stops."""
    queue = ui.feed.subscribe()
    try:
        while True:
            try:
                change = await asyncio.wait_for(queue.get(), HEARTBEAT)
            except TimeoutError:
                yield None
                continue
            if change is None:
                return
            yield change
    finally:
        ui.feed.unsubscribe(queue)


async def jobs_events(request: web.Request) -> web.StreamResponse:
    """Rows of the jobs that changed, as the feed reads them (``event: rows``)."""
    ui = ui_of(request)
    response = await _stream(request)
    try:
        last = int(request.headers.get("Last-Event-ID", ""))
    except ValueError:
        last = None
    if last is not None:  # a page that reconnects: what it missed
        missed = [r.to_json() for r in ui.index.changed_after(last)]
        if missed:
            await response.write(_event("rows", _rows_message(ui, missed), ui.index.seq))
    await response.write(_event("hello", {"seq": ui.index.seq}, ui.index.seq))
    async for change in _changes(ui):
        if change is None:
            await response.write(b": keep-alive\n\n")
        elif change.rows:
            rows = [r.to_json() for r in change.rows]
            await response.write(_event("rows", _rows_message(ui, rows), change.seq))
    return response


def _rows_message(ui: UiState, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"rows": rows, "counts": ui.index.counts(), "total": len(ui.index.rows)}


async def job_events(request: web.Request) -> web.StreamResponse:
    """``event: changed`` whenever the feed finds a new history entry of this job or its row
    changed; at once too when the page reconnects (it may have missed some)."""
    ui = ui_of(request)
    job_id = job_id_of(request)
    response = await _stream(request)
    if "Last-Event-ID" in request.headers:
        await response.write(_event("changed", {"job": job_id}, ui.index.seq))
    await response.write(_event("hello", {"seq": ui.index.seq}, ui.index.seq))
    async for change in _changes(ui):
        if change is None:
            await response.write(b": keep-alive\n\n")
        elif change.touches(job_id):
            await response.write(_event("changed", {"job": job_id}, change.seq))
    return response


async def logs_events(request: web.Request) -> web.StreamResponse:
    """One rank's output (or every rank's, prefixed), followed live through the Python API
    (``AsyncClient.logs(follow=True)``, as ``dispatch logs -f``): ``event: line`` per line,
    ``event: end`` when the attempt has ended and everything was read."""
    ui = ui_of(request)
    job_id = job_id_of(request)
    rank_text = request.query.get("rank", "")
    rank = int(rank_text) if rank_text.isdigit() and len(rank_text) <= 6 else None
    response = await _stream(request)
    lines = ui.api.logs(job_id, rank=rank, follow=True)
    task = asyncio.current_task()
    if task is not None:  # cancelled when the server stops (``server.Server.stop``)
        ui.streams.add(task)
    try:
        async for line in lines:
            await response.write(_event("line", line))
        await response.write(_event("end", "the attempt ended; nothing more to read"))
    except DispatchError as exc:  # no started attempt yet, an adapter that cannot read output
        ended = ui.index.rows.get(job_id)
        retry = ended is None or not ended.is_terminal  # an open job may start one soon
        await response.write(_event("failed", {"message": str(exc), "retry": retry}))
    finally:
        if task is not None:
            ui.streams.discard(task)
        await lines.aclose()
    return response

"""The aiohttp application: pages, actions, assets (the live streams are in ``streams``).

Every page is rendered on the server from Jinja2 templates with autoescaping; the pages'
scripts insert what streams bring with ``textContent`` (rows) or swap in fragments the server
rendered the same way. Request bodies are bounded (``MAX_BODY``), assets are served from a
fixed list read from the package at start (no path from a request reaches the file system),
and every answer carries a Content-Security-Policy allowing this origin's scripts only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import jinja2
from aiohttp import web

from dispatch.api import JobStatus
from dispatch.model import Cause, DispatchError, NotFound, State
from dispatch.ui import charts, overview, streams, timeline
from dispatch.ui.actions import Action, perform
from dispatch.ui.masking import mask_data
from dispatch.ui.rows import MAX_LIMIT, Filters, age
from dispatch.ui.state import STATE_KEY, UiState, job_id_of, ui_of

log = logging.getLogger(__name__)

#: bytes of a request body at most (actions carry none worth more)
MAX_BODY = 16 * 1024
#: seconds a plan may take (a cluster probe) before the page says it could not be made
PLAN_TIMEOUT = 10.0
_ASSET = re.compile(r"^[a-z0-9][a-z0-9.-]{0,60}$")
_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


def templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dispatch.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["age"] = age
    env.filters["hours"] = overview.hours
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, default=str)
    env.globals["STATES"] = [s.value for s in State]
    env.globals["CAUSES"] = [c.value for c in Cause]
    return env


def assets() -> dict[str, tuple[bytes, str]]:
    """The package's static files by name, read once."""
    found = {}
    for item in resources.files("dispatch.ui").joinpath("static").iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1]
        if item.is_file() and suffix in _TYPES:
            found[item.name] = (item.read_bytes(), _TYPES[suffix])
    return found


def _page(request: web.Request, template: str, **values: Any) -> web.Response:
    ui = ui_of(request)
    text = ui.templates.get_template(template).render(
        actions=ui.actions, now=ui.now(), where=ui.where, **values
    )
    return web.Response(text=text, content_type="text/html")


@web.middleware
async def headers(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """The Host check on every request, and the security headers on every answer."""
    refused = ui_of(request).guard.check_host(request.headers)
    if refused is not None:
        return web.Response(status=refused.status, text=refused.reason)
    if (request.content_length or 0) > MAX_BODY:
        return web.Response(status=413, text=f"a request body is at most {MAX_BODY} bytes")
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        response = web.Response(status=exc.status, text=exc.text or exc.reason)
    if response.prepared:  # a stream: its headers are sent already
        return response
    response.headers.setdefault("Content-Security-Policy", _CSP)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    return response


# --- pages ----------------------------------------------------------------------------------


async def jobs_page(request: web.Request) -> web.Response:
    ui = ui_of(request)
    filters = Filters.from_query(request.query)
    rows, matching = ui.index.listing(filters)
    return _page(
        request,
        "jobs.html",
        rows=rows,
        matching=matching,
        total=len(ui.index.rows),
        counts=ui.index.counts(),
        clusters=ui.index.clusters(),
        filters=filters,
        more=urlencode({k: v for k, v in filters.to_json().items() if v} | {"limit": MAX_LIMIT}),
        seq=ui.index.seq,
    )


async def _status(ui: UiState, job_id: str) -> JobStatus:
    try:
        return await ui.api.get(job_id)
    except NotFound:
        raise web.HTTPNotFound(text=f"no job {job_id}") from None


async def _detail(ui: UiState, job_id: str) -> dict[str, Any]:
    status = await _status(ui, job_id)
    record = ui.api.records.get_job(status.id)
    secret_names = frozenset(record.job.spec.secret_env)
    log_entries = ui.api.records.log(status.id)
    raw_spec = record.job.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec = mask_data(raw_spec, secret_names)
    ranks = record.job.spec.nodes * (record.job.spec.procs_per_node or 1)
    return {
        "job": status,
        "timeline": timeline.build(status, log_entries, ui.now(), secret_names),
        "spec": spec,
        "ranks": ranks,
        "cancel": record.cancel,
    }


async def job_page(request: web.Request) -> web.Response:
    ui = ui_of(request)
    return _page(request, "job.html", **await _detail(ui, job_id_of(request)))


async def job_detail(request: web.Request) -> web.Response:
    ui = ui_of(request)
    return _page(request, "job_detail.html", **await _detail(ui, job_id_of(request)))


async def plan_fragment(request: web.Request) -> web.Response:
    """The plan of one attempt as its adapter makes it (secret values masked); kept once made."""
    ui = ui_of(request)
    job_id = job_id_of(request)
    try:
        attempt = min(max(1, int(request.query.get("attempt", "1"))), 100_000)
        record = ui.api.records.get_job(job_id)
    except ValueError:
        raise web.HTTPBadRequest(text="attempt must be a number") from None
    except NotFound:
        raise web.HTTPNotFound(text=f"no job {job_id}") from None
    key = (job_id, attempt)
    if key not in ui.plans:
        try:
            adapter = ui.api.env.adapter(record.job.spec.cluster)
            plan = await asyncio.wait_for(adapter.plan(record.job, attempt), PLAN_TIMEOUT)
            secret_names = frozenset(record.job.spec.secret_env)
            ui.keep_plan(key, {"plan": mask_data(plan.to_json(), secret_names), "error": None})
        except (DispatchError, TimeoutError) as exc:
            error = str(exc) or "the cluster did not answer in time"
            return _page(request, "plan.html", plan=None, error=error, attempt=attempt)
    return _page(request, "plan.html", attempt=attempt, **ui.plans[key])


async def overview_page(request: web.Request) -> web.Response:
    ui = ui_of(request)
    found = overview.build(list(ui.index.rows.values()), ui.now())
    return _page(request, "overview.html", overview=found, total=len(ui.index.rows))


async def ends_svg(request: web.Request) -> web.Response:
    ui = ui_of(request)
    found = overview.ends_over_time(list(ui.index.rows.values()), ui.now())
    return web.Response(body=charts.ends_chart(found), content_type="image/svg+xml")


async def lost_svg(request: web.Request) -> web.Response:
    ui = ui_of(request)
    found = overview.time_lost(list(ui.index.rows.values()))
    return web.Response(body=charts.lost_chart(found), content_type="image/svg+xml")


async def asset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    found = ui_of(request).assets.get(name) if _ASSET.match(name) else None
    if found is None:
        raise web.HTTPNotFound(text="no such file")
    body, content_type = found
    return web.Response(body=body, content_type=content_type)


# --- actions ----------------------------------------------------------------------------------


async def act(request: web.Request) -> web.Response:
    ui = ui_of(request)
    await request.read()  # an action carries nothing; a body past MAX_BODY is refused (413)
    refused = ui.guard.check_action(request.headers)
    if refused is not None:
        log.warning("action refused (%s): %s %s", refused.reason, request.method, request.path)
        return web.json_response({"ok": False, "error": refused.reason}, status=refused.status)
    try:
        action = Action(request.match_info["action"])
    except ValueError:
        raise web.HTTPNotFound(text="no such action") from None
    job_id = job_id_of(request)
    try:
        done = await perform(ui.api, action, job_id, ui.actor, ui.where)
    except NotFound:
        raise web.HTTPNotFound(text=f"no job {job_id}") from None
    log.info("%s %s by %s: %s", action.value, job_id, ui.actor, done.message)
    return web.json_response(
        {"ok": done.ok, "message": done.message}, status=200 if done.ok else 409
    )


def build_app(ui: UiState) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY, middlewares=[headers])
    app[STATE_KEY] = ui
    app.router.add_get("/", jobs_page)
    app.router.add_get("/jobs", jobs_page)
    app.router.add_get("/events", streams.jobs_events)
    app.router.add_get("/jobs/{job}", job_page)
    app.router.add_get("/jobs/{job}/detail", job_detail)
    app.router.add_get("/jobs/{job}/events", streams.job_events)
    app.router.add_get("/jobs/{job}/plan", plan_fragment)
    app.router.add_get("/jobs/{job}/logs", streams.logs_events)
    app.router.add_post("/jobs/{job}/actions/{action}", act)
    app.router.add_get("/overview", overview_page)
    app.router.add_get("/overview/ends.svg", ends_svg)
    app.router.add_get("/overview/lost.svg", lost_svg)
    app.router.add_get("/static/{name}", asset)
    return app

"""What the UI's handlers share (``UiState``), and reading it and a job id from a request."""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import jinja2
from aiohttp import web

from dispatch.api import AsyncClient
from dispatch.ui.feed import Feed
from dispatch.ui.guard import Guard
from dispatch.ui.index import JobIndex

#: a job id as dispatch makes them (the spec's name and a suffix); anything else is no job
_JOB_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,99}$")
#: plans kept once made (a plan can need a cluster probe), the oldest dropped first
PLANS_KEPT = 256


@dataclass
class UiState:
    """The API client, the index and its feed, the guard, the templates and the assets."""

    api: AsyncClient
    index: JobIndex
    feed: Feed
    guard: Guard
    actor: str
    where: str
    templates: jinja2.Environment
    assets: dict[str, tuple[bytes, str]]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    #: (job, attempt) -> the plan as the page shows it
    plans: OrderedDict[tuple[str, int], dict[str, Any]] = field(default_factory=OrderedDict)
    #: the log streams open now (each follows files until its attempt ends)
    streams: set[asyncio.Task[Any]] = field(default_factory=set)

    @property
    def actions(self) -> bool:
        return self.guard.token is not None

    def now(self) -> float:
        return self.api.env.clock.now()

    def keep_plan(self, key: tuple[str, int], plan: dict[str, Any]) -> None:
        self.plans[key] = plan
        while len(self.plans) > PLANS_KEPT:
            self.plans.popitem(last=False)


STATE_KEY = web.AppKey("ui", UiState)


def ui_of(request: web.Request) -> UiState:
    return request.app[STATE_KEY]


def job_id_of(request: web.Request) -> str:
    """The request's ``{job}``; 404 for anything that cannot be a job id."""
    job_id = request.match_info["job"]
    if not _JOB_ID.match(job_id):
        raise web.HTTPNotFound(text="no such job")
    return job_id

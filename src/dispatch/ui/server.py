"""Starting the UI: the records read into the index, the change feed, the HTTP server.

``start`` returns a running ``Server`` (its ``url``, ``token``) inside an event loop;
``serve`` is what ``dispatch ui`` runs: start, say where, run until interrupted, stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from dispatch import aio
from dispatch.api import AsyncClient, Environment
from dispatch.api.client import default_actor
from dispatch.ui.app import assets, build_app, templates
from dispatch.ui.feed import Feed
from dispatch.ui.guard import Guard, allowed_hosts, new_token
from dispatch.ui.index import JobIndex
from dispatch.ui.state import UiState

log = logging.getLogger(__name__)


@dataclass
class Server:
    """A running UI: where it answers, its action token (None: actions off), how to stop it."""

    url: str
    token: str | None
    ui: UiState
    runner: web.AppRunner
    feed_task: asyncio.Task[None]

    async def stop(self) -> None:
        self.ui.stop.set()
        await aio.stop(self.feed_task)
        await aio.stop(*self.ui.streams, also=(ConnectionError,))
        await self.runner.cleanup()
        self.ui.api.close()


async def start(
    env: Environment,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    allow_actions: bool = False,
    actor: str | None = None,
    interval: float = 0.5,
    background: bool = True,
) -> Server:
    """Read the records into the index, start the feed and listen on ``host``:``port``
    (0: a free port). ``background``: a cancel or release starts a background supervisor
    when none runs, as ``dispatch cancel`` does (``AsyncClient(background=)``). Raises
    ``OSError`` when the address cannot be bound."""
    api = AsyncClient(env, background=background)
    index = JobIndex()
    index.load(api.records)
    feed = Feed(api.records, index, env.clock, interval=interval)
    placeholder = UiState(
        api=api, index=index, feed=feed, guard=Guard(None, None), actor=actor or default_actor(),
        where="", templates=templates(), assets=assets(),
    )  # fmt: skip
    app = build_app(placeholder)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
    await runner.setup()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        await runner.cleanup()
        api.close()
        raise
    bound = int(sock.getsockname()[1])
    await web.SockSite(runner, sock).start()
    shown = f"[{host}]" if ":" in host else host
    token = new_token() if allow_actions else None
    placeholder.guard = Guard(token, allowed_hosts(shown, bound))
    placeholder.where = f"dispatch ui at {shown}:{bound}"
    feed_task = asyncio.create_task(feed.run(placeholder.stop), name="ui-feed")
    feed_task.add_done_callback(_report_end)
    log.info("dispatch ui listening on %s:%d over %s", shown, bound, api.records.path)
    return Server(f"http://{shown}:{bound}/", token, placeholder, runner, feed_task)


def _report_end(task: asyncio.Task[None]) -> None:
    """The feed ends only when the server stops; an error that ended it is said, since the
    pages stop following the records without it."""
    if not task.cancelled() and task.exception() is not None:
        log.error("the change feed stopped: %r; pages no longer update", task.exception())


def serve(
    env: Environment,
    *,
    host: str,
    port: int,
    allow_actions: bool,
    actor: str | None,
    say: Callable[[str], None],
) -> None:
    """Run the UI until SIGINT or SIGTERM, telling ``say`` where it is and the token."""

    async def main() -> None:
        server = await start(env, host=host, port=port, allow_actions=allow_actions, actor=actor)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        say(f"dispatch ui: {server.url} ({len(server.ui.index.rows):,} jobs in "
            f"{server.ui.api.records.path})")  # fmt: skip
        if server.token is not None:
            say(f"actions on (cancel, release, hold) as {server.ui.actor}; token: {server.token}")
            say(f"open {server.url}#token={server.token} to act from this browser")
        else:
            say("read-only: actions are off (start with --allow-actions to cancel, release, hold)")
        try:
            await stop.wait()
        finally:
            say("dispatch ui: stopping")
            await server.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())

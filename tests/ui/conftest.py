"""Fixtures for the web UI's tests: seeded records, the UI server in a thread, and a real
headless Chromium (Debian's ``chromium``, installed by scripts/install-chromium.sh) driven
by Playwright. Without Chromium the browser tests are skipped (failed under CI=true, where
``make test`` installs it)."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("pygal")

from dispatch.api import Environment
from dispatch.records import Records, open_records
from dispatch.ui.server import Server, start
from tests.ui.seed import SetClock, seed_job

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "docs" / "how-to" / "images"


class UiThread:
    """``dispatch ui``'s server running on its own event loop in a thread."""

    def __init__(self, env: Environment, **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server: Server = self.call(start(env, **options))

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def token(self) -> str | None:
        return self.server.token

    def stop(self) -> None:
        self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def env() -> Environment:
    return Environment.load()


@pytest.fixture
def clock() -> SetClock:
    return SetClock(time.time() - 3600)


@pytest.fixture
def writer(env: Environment, clock: SetClock) -> Iterator[Records]:
    """The records as a supervisor (another process) writes them, beside the UI's own."""
    records = open_records(env.records_location, clock=clock)
    yield records
    records.close()


@pytest.fixture
def jobs(writer: Records, clock: SetClock) -> dict[str, str]:
    """One job of each kind the pages show, by profile; written an hour ago and on."""
    made, began = {}, clock.at
    for i, profile in enumerate(("succeeded", "preempted_then_succeeded", "out_of_memory",
                                 "cancelled", "queued", "held", "pending", "running", "app_error")):  # fmt: skip
        clock.at = began + 120 * i
        made[profile] = seed_job(
            writer, clock, profile, name=profile.replace("_", "-")[:30], secret=True,
            cluster="local", user="alice",
        )  # fmt: skip
    clock.at = time.time()
    return made


@pytest.fixture
def ui(env: Environment, jobs: dict[str, str]) -> Iterator[UiThread]:
    running = UiThread(env, interval=0.2, background=False)
    yield running
    running.stop()


@pytest.fixture
def ui_actions(env: Environment, jobs: dict[str, str]) -> Iterator[UiThread]:
    running = UiThread(env, interval=0.2, allow_actions=True, actor="tester", background=False)
    yield running
    running.stop()


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through Playwright, pointed at the system's browser. Module-scoped:
    while Playwright's synchronous API runs, its event loop is the thread's running loop, and
    tests after these (``asyncio.run``, the API's ``Client``) need it gone."""
    sync_api = pytest.importorskip("playwright.sync_api")
    path = chromium_path()
    if path is None:
        message = "chromium is not installed (scripts/install-chromium.sh as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)
    with sync_api.sync_playwright() as playwright:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        launched = playwright.chromium.launch(executable_path=path, headless=True, args=args)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    yield opened
    context.close()


def screenshot_path(name: str, tmp_path: Path) -> Path:
    """docs/how-to/images/NAME when DISPATCH_UPDATE_SCREENSHOTS=1, else a temporary file."""
    if os.environ.get("DISPATCH_UPDATE_SCREENSHOTS") == "1":
        IMAGES.mkdir(parents=True, exist_ok=True)
        return IMAGES / name
    return tmp_path / name

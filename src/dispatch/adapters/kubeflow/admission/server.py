"""``dispatch admission serve``: the HTTPS webhook server around ``guard.review``.

* ``POST`` ``PATH_IDENTITY``, ``PATH_RUNTIMES`` and ``/validate``: an AdmissionReview v1 in,
  its answer out (every path asks ``review``, which judges by the request itself). A body over
  ``MAX_BODY`` is 413, one that is not JSON or not an AdmissionReview v1 with a
  ``request.uid`` is 400, with a message saying which.
* ``GET /healthz``: 200 while the process runs; ``GET /readyz``: 200 once a certificate is
  loaded and the listener is up, 503 before and while stopping.
* TLS from a certificate and key file, polled every ``RELOAD_INTERVAL`` seconds (size, mtime,
  inode: a Secret volume swaps a symlink). A changed pair is first loaded into a scratch
  context from a private copy; only a pair that loads is then loaded into the live context
  (``load_cert_chain``, so every later handshake uses it), from the same copy. A broken pair
  is logged and the old one kept; it is tried again when the files change again.
* One JSON line on stderr per decision (``time``, ``uid``, ``operation``, ``resource``,
  ``namespace``, ``name``, ``user``, ``allowed``, ``rule``, ``latency_ms``), and lines for
  start, certificate loads, refused requests, Events and stop.
* A refused resume (``Decision.refused_resume``, not a dry run) queues an Event on the
  TrainJob, written after the answer (``events.EventRecorder``).
* SIGTERM or SIGINT: readiness goes 503, the listener closes, requests in flight finish,
  queued Events get ``DRAIN_SECONDS``.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import json
import os
import shutil
import signal
import ssl
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from aiohttp import web
from cryptography import x509

from dispatch.adapters.kubeflow.admission.contract import PATH_IDENTITY, PATH_RUNTIMES, GuardConfig
from dispatch.adapters.kubeflow.admission.events import EventRecorder
from dispatch.adapters.kubeflow.admission.guard import Decision, response, review
from dispatch.adapters.kubeflow.api.client import Connection
from dispatch.aio import stop

__all__ = ["MAX_BODY", "PATHS", "CertReloader", "JsonLog", "ServeOptions", "make_app", "serve"]

#: the webhook paths (every one asks ``review``)
PATHS = (PATH_IDENTITY, PATH_RUNTIMES, "/validate")
#: bytes of a request body; kube-apiserver's own limit for an object is 3 MiB, and an UPDATE
#: carries two
MAX_BODY = 6 * 1024 * 1024
#: seconds between two looks at the certificate files
RELOAD_INTERVAL = 2.0
#: seconds queued Events may take to be written at shutdown
DRAIN_SECONDS = 5.0
#: seconds requests in flight may take at shutdown
SHUTDOWN_SECONDS = 10.0


class JsonLog:
    """Structured log: one JSON object a line (``time``, ``event``, fields) on a stream."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr

    def __call__(self, event: str, /, **fields: Any) -> None:
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        line = json.dumps({"time": stamp, "event": event, **fields}, default=str)
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed stderr must not stop the guard
            pass


@dataclass(frozen=True)
class ServeOptions:
    """What ``serve`` needs."""

    cert_file: Path
    key_file: Path
    config: GuardConfig = field(default_factory=GuardConfig)
    address: str = "0.0.0.0"
    port: int = 8443
    #: where Events go; None: none are written (``--no-events``)
    events: Connection | None = None
    reload_interval: float = RELOAD_INTERVAL


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_ino, found.st_size, found.st_mtime_ns)


class CertReloader:
    """The live server SSL context, and the certificate files it follows."""

    def __init__(self, cert_file: Path, key_file: Path, log: JsonLog) -> None:
        self.cert_file, self.key_file, self.log = cert_file, key_file, log
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.loaded = False
        #: the serving certificate's serial number (None before the first load)
        self.serial: int | None = None
        self._seen: tuple[Any, Any] | None = None

    def load(self) -> bool:
        """Load the pair now if the files changed since last look; True when loaded."""
        seen = (_stamp(self.cert_file), _stamp(self.key_file))
        if seen == self._seen:
            return False
        self._seen = seen
        scratch = Path(tempfile.mkdtemp(prefix="dispatch-admission-"))
        try:
            cert, key = scratch / "tls.crt", scratch / "tls.key"
            cert.write_bytes(self.cert_file.read_bytes())
            key.write_bytes(self.key_file.read_bytes())
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
            self.context.load_cert_chain(cert, key)
            parsed = x509.load_pem_x509_certificate(cert.read_bytes())
        except (OSError, ssl.SSLError, ValueError) as exc:
            level = "certificate-refused" if self.loaded else "certificate-missing"
            self.log(level, cert=self.cert_file.name, key=self.key_file.name,
                     error=str(exc)[:300], keeping=self.serial)  # fmt: skip
            return False
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        event = "certificate-reloaded" if self.loaded else "certificate-loaded"
        self.loaded, self.serial = True, parsed.serial_number
        self.log(event, serial=f"{parsed.serial_number:x}",
                 notAfter=parsed.not_valid_after_utc.isoformat())  # fmt: skip
        return True

    async def follow(self, interval: float) -> None:
        """Look at the files every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            await asyncio.to_thread(self.load)


@dataclass
class _State:
    config: GuardConfig
    log: JsonLog
    reloader: CertReloader
    recorder: EventRecorder | None
    listening: bool = False
    stopping: bool = False


_STATE = web.AppKey("state", _State)


def make_app(
    config: GuardConfig, log: JsonLog, reloader: CertReloader, recorder: EventRecorder | None
) -> web.Application:
    """The application: webhook paths, health and readiness."""
    app = web.Application(client_max_size=MAX_BODY)
    app[_STATE] = _State(config, log, reloader, recorder)
    for path in PATHS:
        app.router.add_post(path, _validate)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    return app


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def _readyz(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    if state.reloader.loaded and state.listening and not state.stopping:
        return web.Response(text="ok\n")
    why = "stopping" if state.stopping else "no certificate loaded or not listening yet"
    return web.Response(status=503, text=f"not ready: {why}\n")


def _bad_request(state: _State, status: int, message: str) -> web.Response:
    state.log("request-refused", status=status, error=message)
    return web.json_response({"error": message}, status=status)


def _read_review(body: bytes) -> tuple[Mapping[str, Any] | None, str]:
    """The AdmissionReview in ``body``, or None and why it is not one."""
    try:
        review_ = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return None, f"the body is not JSON: {str(exc)[:200]}"
    if not isinstance(review_, Mapping):
        return None, "the body is not an AdmissionReview: not a JSON object"
    if (
        review_.get("apiVersion") != "admission.k8s.io/v1"
        or review_.get("kind") != "AdmissionReview"
    ):
        return None, (
            "the body is not an AdmissionReview v1: apiVersion must be admission.k8s.io/v1 "
            "and kind AdmissionReview (set admissionReviewVersions: [v1])"
        )
    request = review_.get("request")
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
        return None, "the AdmissionReview has no request with a uid"
    return review_, ""


async def _validate(request: web.Request) -> web.Response:
    state = request.app[_STATE]
    started = time.perf_counter()
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _bad_request(state, 413, f"the body is larger than {MAX_BODY:,} bytes")
    review_, problem = _read_review(body)
    if review_ is None:
        return _bad_request(state, 400, problem)
    asked: Mapping[str, Any] = review_["request"]
    decision = review(asked, state.config)
    answer = response(review_, decision)
    _log_decision(state.log, asked, decision, started)
    if state.recorder is not None and decision.refused_resume and asked.get("dryRun") is not True:
        state.recorder.offer(asked, decision.message)
    return web.json_response(answer)


def _log_decision(
    log: JsonLog, asked: Mapping[str, Any], decision: Decision, started: float
) -> None:
    resource = asked.get("resource")
    user = asked.get("userInfo")
    log(
        "decision",
        uid=asked.get("uid"),
        operation=_short(asked.get("operation")),
        resource=_short(resource.get("resource")) if isinstance(resource, Mapping) else "",
        namespace=_short(asked.get("namespace")),
        name=_short(asked.get("name")),
        user=_short(user.get("username")) if isinstance(user, Mapping) else "",
        allowed=decision.allowed,
        rule=str(decision.rule),
        latency_ms=round((time.perf_counter() - started) * 1000, 3),
        **({"message": decision.message} if not decision.allowed else {}),
    )


def _short(value: Any) -> str:
    return value[:253] if isinstance(value, str) else ""


async def serve(
    options: ServeOptions,
    *,
    log: JsonLog | None = None,
    stopped: asyncio.Event | None = None,
    signals: bool = True,
) -> None:
    """Serve until ``stopped`` is set or, with ``signals`` (the main thread only), SIGTERM or
    SIGINT; ``OSError`` when the address cannot be bound, ``ValueError`` when no certificate
    can be loaded at start."""
    log = log or JsonLog()
    reloader = CertReloader(options.cert_file, options.key_file, log)
    if not reloader.load():
        raise ValueError(
            f"cannot load the certificate {options.cert_file} with the key {options.key_file}"
        )
    recorder = EventRecorder(options.events, log) if options.events is not None else None
    app = make_app(options.config, log, reloader, recorder)
    state = app[_STATE]
    stopped = stopped or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = (signal.SIGTERM, signal.SIGINT) if signals else ()
    for signum in handled:
        loop.add_signal_handler(signum, stopped.set)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_SECONDS)
    await runner.setup()
    site = web.TCPSite(runner, options.address, options.port, ssl_context=reloader.context)
    helpers: list[asyncio.Task[None]] = []
    try:
        await site.start()
        # what start-up made lives as long as the process: out of the collector's sight, a
        # full collection walks only what requests make (tens of ms less at the tail)
        gc.freeze()
        state.listening = True
        helpers.append(asyncio.create_task(reloader.follow(options.reload_interval)))
        if recorder is not None:
            helpers.append(asyncio.create_task(recorder.run()))
        port = runner.addresses[0][1] if runner.addresses else options.port
        log("start", address=options.address, port=port, pid=os.getpid(),
            identities=sorted(options.config.identities), groups=sorted(options.config.groups),
            runtimeSelector=dict(options.config.runtime_selector),
            events=recorder is not None)  # fmt: skip
        await stopped.wait()
    finally:
        state.stopping = True
        await runner.cleanup()
        if recorder is not None:
            await recorder.drain(DRAIN_SECONDS)
        await stop(*helpers)
        for signum in handled:
            loop.remove_signal_handler(signum)
        counts = (
            {"eventsWritten": recorder.written, "eventsDropped": recorder.dropped,
             "eventsFailed": recorder.failed} if recorder is not None else {}
        )  # fmt: skip
        log("stop", **counts)

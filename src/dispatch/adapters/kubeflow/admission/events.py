"""The Event the guard records on a TrainJob whose resume it refused, written after answering.

A refused resume is the moment a person (or Kueue's log) asks "why does my job not start";
``kubectl describe trainjob`` shows Events, so the guard leaves one there: type Warning,
reason ``DispatchResumeRefused``, the denial message. It is written *after* the answer, by a
background worker fed through a bounded queue: the API server waits for the webhook, and an
Event must never slow or change an admission answer. A full queue drops the Event (logged),
a failed write is logged and not retried.

Kueue retries a refused resume with backoff, for as long as it holds the Workload admitted.
As client-go's event correlator does, a refusal repeating one already recorded (same
TrainJob, same message) updates that Event's ``count`` and ``lastTimestamp`` instead of
adding another (``REMEMBERED`` Events at most are remembered; one forgotten, or deleted by
the API server's Event TTL, is created again).

``resume_refused_event`` builds the core/v1 Event (pure); ``EventRecorder`` writes them.
"""

from __future__ import annotations

import asyncio
import datetime
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kubernetes_asyncio import client

from dispatch.adapters.kubeflow.admission.contract import EVENT_RESUME_REFUSED
from dispatch.adapters.kubeflow.api.client import Connection
from dispatch.adapters.kubeflow.api.errors import API_FAILURES, translate
from dispatch.model import DispatchError, NotFound

__all__ = ["COMPONENT", "REPORTING", "EventRecorder", "Log", "resume_refused_event"]

#: ``source.component`` of the Events the guard writes
COMPONENT = "dispatch-admission"
#: ``reportingComponent`` (core/v1's name for events.k8s.io's ``reportingController``)
REPORTING = "dispatch.dev/admission"
#: characters of an Event's message (events.k8s.io's note limit; kubectl shows it whole)
MAX_MESSAGE = 1024
#: Events waiting to be written; more are dropped
CAPACITY = 256
#: Events remembered for aggregation (the least recently written are forgotten first)
REMEMBERED = 4096


class Log(Protocol):
    """Where the recorder reports (the server's structured log)."""

    def __call__(self, event: str, /, **fields: Any) -> None: ...


def resume_refused_event(
    request: Mapping[str, Any], message: str, now: datetime.datetime
) -> dict[str, Any] | None:
    """The Event for a refused resume of the TrainJob in ``request`` (an AdmissionReview
    request), or None when the request does not name one (no namespace or name)."""
    namespace, name = request.get("namespace"), request.get("name")
    if not (isinstance(namespace, str) and namespace and isinstance(name, str) and name):
        return None
    obj = request.get("oldObject") or request.get("object")
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    kind = request.get("kind")
    kind = kind if isinstance(kind, Mapping) else {}
    group, version = kind.get("group") or "trainer.kubeflow.org", kind.get("version") or "v1alpha1"
    stamp = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    nanos = int(now.timestamp() * 1e9)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # as client-go's recorder names them: the object's name and the time in hex
        "metadata": {"name": f"{name[:200]}.{nanos:x}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": f"{group}/{version}",
            "kind": kind.get("kind") or "TrainJob",
            "name": name,
            "namespace": namespace,
            **({"uid": uid} if isinstance(uid, str) and uid else {}),
        },
        "type": "Warning",
        "reason": EVENT_RESUME_REFUSED,
        "message": message[:MAX_MESSAGE],
        "source": {"component": COMPONENT},
        "reportingComponent": REPORTING,
        "reportingInstance": COMPONENT,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
    }


class EventRecorder:
    """Writes Events in the background, one at a time, from a bounded queue."""

    def __init__(
        self,
        connection: Connection,
        log: Log,
        *,
        capacity: int = CAPACITY,
        now: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self.connection = connection
        self.log = log
        self.now = now or (lambda: datetime.datetime.now(datetime.UTC))
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(capacity)
        #: Events written, dropped (queue full) and failed, for the stop log line and tests
        self.written = self.dropped = self.failed = 0
        #: (namespace, TrainJob, uid, message) -> (the Event's name, its count)
        self._recorded: OrderedDict[tuple[str, ...], tuple[str, int]] = OrderedDict()

    def offer(self, request: Mapping[str, Any], message: str) -> None:
        """Queue the Event for a refused resume; never blocks, never raises."""
        body = resume_refused_event(request, message, self.now())
        if body is None:
            return
        try:
            self.queue.put_nowait(body)
        except asyncio.QueueFull:
            self.dropped += 1
            self.log("event-dropped", reason="queue full", name=body["involvedObject"]["name"])

    async def run(self) -> None:
        """Write queued Events until cancelled."""
        while True:
            body = await self.queue.get()
            try:
                await self._write(body)
            finally:
                self.queue.task_done()

    async def drain(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the queued Events to be written."""
        try:
            await asyncio.wait_for(self.queue.join(), timeout)
        except TimeoutError:
            self.log("event-drain-timeout", pending=self.queue.qsize())

    async def _write(self, body: dict[str, Any]) -> None:
        involved = body["involvedObject"]
        where = f"Event on TrainJob {involved['namespace']}/{involved['name']}"
        key = (involved["namespace"], involved["name"], involved.get("uid", ""), body["message"])
        try:
            async with self.connection.session() as session:
                core = client.CoreV1Api(session.api)
                known = self._recorded.get(key)
                try:
                    if known is not None:  # the same refusal again: count it on its Event
                        name, count = known[0], known[1] + 1
                        raw: Any = {"count": count, "lastTimestamp": body["lastTimestamp"]}
                        await core.patch_namespaced_event(
                            name, involved["namespace"], raw, _request_timeout=session.timeout
                        )
                    else:
                        name, count = body["metadata"]["name"], 1
                        raw = body  # the client serializes a dict as is
                        await core.create_namespaced_event(
                            involved["namespace"], raw, _request_timeout=session.timeout
                        )
                except API_FAILURES as exc:
                    raise translate(exc, f"write {where}", write=True) from None
        except NotFound:  # the Event expired since: record it again
            self._recorded.pop(key, None)
            await self._write(body)
            return
        except DispatchError as exc:
            self.failed += 1
            self.log("event-failed", name=involved["name"], namespace=involved["namespace"],
                     error=str(exc)[:500])  # fmt: skip
            return
        self.written += 1
        self._recorded[key] = (name, count)
        self._recorded.move_to_end(key)
        while len(self._recorded) > REMEMBERED:
            self._recorded.popitem(last=False)
        self.log("event-written", name=involved["name"], namespace=involved["namespace"],
                 reason=body["reason"], count=count)  # fmt: skip

"""Making each runtime copy owned by its TrainJob after ``start`` has returned.

``start`` creates the runtime copy, then the TrainJob (Trainer's webhook refuses a TrainJob
whose runtime does not exist yet). The merge patch that makes the copy owned by the TrainJob,
so that deleting the TrainJob removes the copy, needs the TrainJob's uid: it can only come
third. Sent from here, a start waits for two requests instead of three, and the patches go
while the next starts do (``bench/README.md``: submission of 1,000 TrainJobs).

* ``owe(namespace, name, trainjob_uid, copy_uid)`` queues the patch; ``WORKERS`` tasks send
  the queued patches in order, as submission (``api.throttle.submitting``: following goes
  first). The patch names the copy's uid (a copy replaced under its name meanwhile is
  refused) and removes the copy's ``dispatch.dev/owner-pending`` label.
* **Crash-safe.** A copy is created labelled ``dispatch.dev/owner-pending``; only the patch
  removes the label. ``sweep(namespace)`` lists the copies still labelled (none, normally),
  reads each one's TrainJob, and owes the patch for those whose TrainJob exists for the same
  job and attempt. A copy without its TrainJob is left: a start may be creating it, and the
  repeated start adopts it (or a refusal removes it, ``submit.discard_copy``). The adapter
  sweeps each namespace once per event loop, at its first start or watch there.
* A TrainJob deleted before its patch: the patch names an owner that is gone and the garbage
  collector removes the copy (an owner reference to an absent uid is collected, whether it was
  set on create or on update).
* A patch the API server refuses for good (``ApiRejected``, ``Forbidden``) is logged: the
  TrainJob runs, only the clean-up of its copy is lost, and the copy stays labelled. A copy
  gone already is nothing to do. A transient failure is tried again ``ATTEMPTS`` times in
  all, ``PAUSE`` seconds apart; then it is left to a sweep: its namespace is ``unswept``
  again, and the adapter sweeps it anew at its next start or watch there, ``RESWEEP_AFTER``
  seconds after the last sweep at the soonest.
* ``drain()`` waits until nothing is owed; ``close()`` stops the workers (what is still owed
  is left labelled, for the sweep).

Memory: one small tuple per patch owed; the workers are ``WORKERS`` tasks whatever the number.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from typing import Any

from dispatch.adapters.kubeflow.api.client import (
    TRAINING_RUNTIMES,
    TRAINJOBS,
    Connection,
    Session,
)
from dispatch.adapters.kubeflow.api.errors import ApiRejected
from dispatch.adapters.kubeflow.api.listwatch import list_pages
from dispatch.adapters.kubeflow.api.submit import attempt_labels
from dispatch.adapters.kubeflow.api.throttle import submitting
from dispatch.adapters.kubeflow.objects import dig, text_of
from dispatch.adapters.kubeflow.planning.trainjob import (
    LABEL_OWNER_PENDING,
    owner_reference_patch,
)
from dispatch.aio import Sleep, stop
from dispatch.log import logger
from dispatch.model import Forbidden, NotFound, TransientError

log = logger(__name__)

#: patches sent at once (each waits for one request; starts go on meanwhile)
WORKERS = 4
#: tries of one patch that fails transiently, and the real seconds between them
ATTEMPTS = 3
PAUSE = 1.0
#: real seconds between two sweeps of a namespace where patches were left
RESWEEP_AFTER = 60.0

#: (namespace, copy name, TrainJob uid, copy uid or "")
Owed = tuple[str, str, str, str]


def owner_pending(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` (a runtime copy) still waits for its owner reference."""
    labels = dig(obj, "metadata", "labels")
    return isinstance(labels, Mapping) and LABEL_OWNER_PENDING in labels


class CopyOwners:
    """The owner patches of one connection's runtime copies, sent in the background."""

    def __init__(self, connection: Connection, *, sleep: Sleep = asyncio.sleep) -> None:
        self.connection = connection
        self._sleep = sleep
        self._owed: deque[Owed] = deque()
        self._queued: set[tuple[str, str]] = set()  # (namespace, name) owed or being sent
        self._workers: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        #: patches sent, refused for good, and left after transient failures
        self.owned = self.refused = self.left = 0
        #: namespaces where patches were left since their last sweep
        self.unswept: set[str] = set()

    def owe(self, namespace: str, name: str, trainjob_uid: str, copy_uid: str = "") -> None:
        """Queue the patch making copy ``name`` owned by TrainJob ``trainjob_uid`` (once)."""
        if (namespace, name) in self._queued:
            return
        self._queued.add((namespace, name))
        self._owed.append((namespace, name, trainjob_uid, copy_uid))
        self._idle.clear()
        # a worker that has just ended is still in the set until its callback runs
        self._workers = {task for task in self._workers if not task.done()}
        while len(self._workers) < min(WORKERS, len(self._owed)):
            task = asyncio.ensure_future(self._work())
            self._workers.add(task)
            task.add_done_callback(self._worker_done)

    async def drain(self) -> None:
        """Wait until every patch owed so far was sent (or given up)."""
        await self._idle.wait()

    async def close(self) -> None:
        """Stop the workers; what is still owed stays labelled for the next sweep."""
        await stop(*self._workers)
        self._workers.clear()
        self._owed.clear()
        self._queued.clear()
        self._idle.set()

    async def sweep(self, namespace: str) -> int:
        """Owe the patch of every copy in ``namespace`` still labelled owner-pending whose
        TrainJob exists for the same job and attempt; how many were owed."""
        self.unswept.discard(namespace)
        found = 0
        async with self.connection.session() as session:
            pages = list_pages(
                session, TRAINING_RUNTIMES, namespace, label_selector=LABEL_OWNER_PENDING
            )
            async for page in pages:
                for copy in page.get("items") or []:
                    if isinstance(copy, Mapping) and await self._sweep_one(session, copy):
                        found += 1
        if found:
            log.info("%s: %d runtime copies still to be owned by their TrainJobs", namespace, found)
        return found

    async def _sweep_one(self, session: Session, copy: Mapping[str, Any]) -> bool:
        namespace = text_of(dig(copy, "metadata", "namespace"))
        name = text_of(dig(copy, "metadata", "name"))
        if not name or (namespace, name) in self._queued or not owner_pending(copy):
            return False
        trainjob = await session.get(TRAINJOBS, name, namespace)
        mine = attempt_labels(copy)
        if trainjob is None or mine is None or attempt_labels(trainjob) != mine:
            return False  # being created, or never will be: a start adopts or removes it
        uid = text_of(dig(trainjob, "metadata", "uid"))
        if not uid:
            return False
        self.owe(namespace, name, uid, text_of(dig(copy, "metadata", "uid")))
        return True

    # --- the workers ------------------------------------------------------------------------

    def _worker_done(self, task: asyncio.Task[None]) -> None:
        self._workers.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("owning runtime copies stopped", exc_info=task.exception())

    async def _work(self) -> None:
        while self._owed:
            owed = self._owed.popleft()
            try:
                await self._send(owed)
            finally:
                self._queued.discard(owed[:2])
                if not self._queued:
                    self._idle.set()

    async def _send(self, owed: Owed) -> None:
        namespace, name, trainjob_uid, copy_uid = owed
        patch = owner_reference_patch(name, trainjob_uid)
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with submitting():
                    async with self.connection.session() as session:
                        await session.merge_patch(
                            TRAINING_RUNTIMES, name, patch, namespace, uid=copy_uid or None
                        )
            except NotFound:
                return  # gone already (collected with its TrainJob, or removed)
            except (ApiRejected, Forbidden) as exc:
                self.refused += 1
                log.warning(
                    "runtime copy %s/%s: not made owned by its TrainJob (%s); delete it with "
                    "the TrainJob",
                    namespace,
                    name,
                    exc,
                )
                return
            except TransientError as exc:
                if attempt == ATTEMPTS:
                    self.left += 1
                    self.unswept.add(namespace)
                    log.warning(
                        "runtime copy %s/%s: owner reference not set (%s); the next start or "
                        "watch in %s sets it",
                        namespace,
                        name,
                        exc,
                        namespace,
                    )
                    return
                await self._sleep(PAUSE * attempt)
            else:
                self.owned += 1
                return

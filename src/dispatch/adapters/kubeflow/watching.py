"""Following many attempts' TrainJobs with one watch per namespace, never a poll per job.

``watch_trainjobs(session, handles, namespace_of, cluster=)`` lists the TrainJobs dispatch made
for this cluster (label-selected), yields ``(handle, trainjob or None)`` for every handle at
once, then watches from the list's resourceVersion and yields each watched TrainJob's changes
(``None`` when it is deleted). A stream the server ends is resumed from the last
resourceVersion seen (bookmarks included); a 410 Gone lists again. It ends once every handle's
TrainJob has ended (Complete or Failed) or is gone. Callers decide what counts as a change.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from dispatch.adapters.kubeflow.build import LABEL_CLUSTER, LABEL_MANAGED_BY, MANAGED_BY
from dispatch.adapters.kubeflow.client import TRAINJOBS, Gone, Session
from dispatch.adapters.kubeflow.names import label_value
from dispatch.adapters.kubeflow.shape import dig
from dispatch.adapters.kubeflow.states import trainjob_outcome
from dispatch.model import AttemptHandle

Item = tuple[AttemptHandle, dict[str, Any] | None]
#: seconds a watch request lasts on the server before it is resumed
WATCH_SECONDS = 300


def _ended(trainjob: dict[str, Any] | None) -> bool:
    return trainjob is None or trainjob_outcome(trainjob, 0.0).is_terminal


async def _one_namespace(
    session: Session,
    namespace: str,
    handles: dict[str, AttemptHandle],
    selector: str,
    out: asyncio.Queue[Item | None],
) -> None:
    live = dict(handles)
    try:
        while live:
            listing = await session.list_objects(TRAINJOBS, namespace, label_selector=selector)
            found = {str(dig(o, "metadata", "name")): o for o in listing.get("items") or []}
            for name, handle in list(live.items()):
                obj = found.get(name)
                await out.put((handle, obj))
                if _ended(obj):
                    del live[name]
            version = str(dig(listing, "metadata", "resourceVersion") or "")
            try:
                while live:
                    async for event in session.watch(
                        TRAINJOBS,
                        namespace,
                        label_selector=selector,
                        resource_version=version,
                        timeout_seconds=WATCH_SECONDS,
                    ):
                        obj = event.get("object") or {}
                        version = str(dig(obj, "metadata", "resourceVersion") or version)
                        name = str(dig(obj, "metadata", "name") or "")
                        if event.get("type") == "BOOKMARK" or name not in live:
                            continue
                        current = None if event.get("type") == "DELETED" else obj
                        await out.put((live[name], current))
                        if _ended(current):
                            del live[name]
                        if not live:
                            return
            except Gone:
                continue  # list again
    finally:
        await out.put(None)


async def watch_trainjobs(
    session: Session,
    handles: Sequence[AttemptHandle],
    namespace_of: Callable[[AttemptHandle], str],
    *,
    cluster: str,
) -> AsyncIterator[Item]:
    """See the module docstring. Errors of a stream end the iteration with that error."""
    selector = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_CLUSTER}={label_value(cluster)}"
    groups: dict[str, dict[str, AttemptHandle]] = {}
    for handle in handles:
        groups.setdefault(namespace_of(handle), {})[handle.native] = handle
    out: asyncio.Queue[Item | None] = asyncio.Queue()
    tasks = [
        asyncio.create_task(_one_namespace(session, ns, named, selector, out))
        for ns, named in groups.items()
    ]
    running = len(tasks)
    try:
        while running:
            item = await out.get()
            if item is None:
                running -= 1
                for task in tasks:
                    if task.done() and not task.cancelled() and task.exception() is not None:
                        task.result()  # a stream failed: raise its (translated) error
                continue
            yield item
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

"""What the ranks of a TrainJob printed: the trainer containers' logs, by rank
(``dispatch logs``, ``dispatch run``; the adapter's ``read_output``).

A rank is the trainer pod of that completion index (the step Trainer marks
``trainer.kubeflow.org/trainjob-ancestor-step: trainer``, else the ``node`` replicated Job;
initializers are not ranks); when a rank has had several pods (a replacement), the newest is
read. Its container is the one named ``node`` (Trainer's trainer container), else the first.
The kubelet keeps a restarted container's log in the same stream; the emulator and a real
kubelet both serve it.

* Once: each rank's log in rank order (``[rank N] `` before each line when all ranks are
  read); a container restarted in place shows the run before its last restart first (the
  kubelet keeps one earlier run), marked. A rank whose pod is gone after the attempt ended says so: one line for all ranks,
  ``NotFound`` for one rank (its output went with the pod).
* Follow: each rank's log as it is written, from the moment its pod runs (a replacement,
  and a container's run after a restart, are followed too), until the attempt has ended and
  every stream has closed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from dispatch.adapters.base import OUTPUT_GONE
from dispatch.adapters.kubeflow.api.client import TRAINJOBS, Connection, Session
from dispatch.adapters.kubeflow.api.kinds import JOBSET_NAME, PODS
from dispatch.adapters.kubeflow.api.listwatch import list_raw
from dispatch.adapters.kubeflow.api.logs import follow_log, read_log
from dispatch.adapters.kubeflow.causes.workloads import pod_rank
from dispatch.adapters.kubeflow.objects import as_int, created, dig, labels_of, names_of, text_of
from dispatch.model import NotFound

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
#: the trainer container of Trainer's runtimes
TRAINER_CONTAINER = "node"
#: seconds between two looks for new pods while following
POLL = 2.0

Ended = Callable[[], Awaitable[bool]]


async def rank_pods(
    session: Session, namespace: str, trainjob: str, *, count: bool = True
) -> tuple[int | None, dict[int, Mapping[str, Any]]]:
    """(the TrainJob's number of ranks, if known and ``count`` asks for it: one more read;
    the newest trainer pod of each rank)."""
    listed = await list_raw(session, PODS, namespace, label_selector=f"{JOBSET_NAME}={trainjob}")
    newest = newest_per_rank([p for p in listed.get("items") or [] if isinstance(p, Mapping)])
    if not count:
        return None, newest
    found = await session.get(TRAINJOBS, trainjob, namespace)
    nodes = as_int(dig(found, "spec", "trainer", "numNodes")) if found else None
    return nodes, newest


def newest_per_rank(pods: Iterable[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """The newest trainer pod of each rank among ``pods`` (a TrainJob's)."""
    pods = list(pods)
    trainers = [p for p in pods if labels_of(p).get(ANCESTOR) == "trainer"]
    if not trainers:
        trainers = [p for p in pods if labels_of(p).get(REPLICATED_JOB) == TRAINER_CONTAINER]
    newest: dict[int, Mapping[str, Any]] = {}
    for pod in sorted(trainers, key=lambda p: created(p) or 0.0):
        rank = pod_rank(pod)
        if rank is not None:
            newest[rank] = pod
    return newest


def container_of(pod: Mapping[str, Any]) -> str:
    names = names_of(dig(pod, "spec", "containers"))
    return TRAINER_CONTAINER if TRAINER_CONTAINER in names else (names[0] if names else "")


def restarts(pod: Mapping[str, Any], container: str) -> int:
    """How many times the kubelet restarted ``container`` in place."""
    for status in dig(pod, "status", "containerStatuses") or []:
        if dig(status, "name") == container:
            return as_int(dig(status, "restartCount")) or 0
    return 0


def _started(pod: Mapping[str, Any]) -> bool:
    return text_of(dig(pod, "status", "phase")) in ("Running", "Succeeded", "Failed")


def _prefix(rank: int, every: bool) -> str:
    return f"[rank {rank}] " if every else ""


def _check(rank: int | None, nodes: int | None, pods: Mapping[int, Any], what: str) -> None:
    limit = nodes if nodes is not None else (max(pods) + 1 if pods else None)
    if rank is not None and (rank < 0 or (limit is not None and rank >= limit)):
        raise NotFound(f"{what} has no rank {rank}")


async def read_output(
    connection: Connection,
    namespace: str,
    trainjob: str,
    rank: int | None,
    follow: bool,
    ended: Ended,
    what: str,
) -> AsyncIterator[str]:
    """The ranks' lines (module docstring); ``ended`` says whether the attempt is over."""
    async with connection.session() as session:
        if follow:
            async for line in _follow(session, namespace, trainjob, rank, ended, what):
                yield line
            return
        nodes, pods = await rank_pods(session, namespace, trainjob)
        _check(rank, nodes, pods, what)
        every = rank is None
        ranks = [rank] if rank is not None else list(range(nodes or (max(pods) + 1 if pods else 0)))
        over: bool | None = None
        for r in ranks:
            pod = pods.get(r)
            text = None
            if pod is not None:
                name, container = text_of(dig(pod, "metadata", "name")), container_of(pod)
                if restarts(pod, container):
                    before = await read_log(session, namespace, name, container, previous=True)
                    if before:
                        yield f"{_prefix(r, every)}(the run before the container's last restart:)"
                        for line in before.splitlines():
                            yield _prefix(r, every) + line
                        yield f"{_prefix(r, every)}(the container's current run:)"
                text = await read_log(session, namespace, name, container)
            if text is None:
                over = await ended() if over is None else over
                if not over:
                    continue  # not started yet
                gone = f"rank {r}'s pod is gone: {OUTPUT_GONE}"
                if not every:
                    raise NotFound(f"{what}: {gone}; `dispatch status` shows its evidence")
                yield f"{_prefix(r, every)}({gone})"
                continue
            for line in text.splitlines():
                yield _prefix(r, every) + line


async def _follow(
    session: Session,
    namespace: str,
    trainjob: str,
    rank: int | None,
    ended: Ended,
    what: str,
) -> AsyncIterator[str]:
    lines: asyncio.Queue[str] = asyncio.Queue()
    every = rank is None
    followed: set[str] = set()
    tasks: set[asyncio.Task[None]] = set()

    async def stream(r: int, pod: str, container: str) -> None:
        async for line in follow_log(session, namespace, pod, container):
            await lines.put(_prefix(r, every) + line)

    try:
        while True:
            nodes, pods = await rank_pods(session, namespace, trainjob)
            _check(rank, nodes, pods, what)
            for r, pod in sorted(pods.items()):
                name, container = text_of(dig(pod, "metadata", "name")), container_of(pod)
                run = f"{name}#{restarts(pod, container)}"  # a restart is a new log to follow
                if rank in (None, r) and run not in followed and _started(pod):
                    followed.add(run)
                    tasks.add(asyncio.create_task(stream(r, name, container)))
            done = await ended()
            deadline = asyncio.get_running_loop().time() + POLL
            while True:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    yield await asyncio.wait_for(lines.get(), timeout=left)
                    continue
                break
            tasks = {t for t in tasks if not t.done()}
            if done and not tasks:
                while not lines.empty():
                    yield lines.get_nowait()
                return
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

"""Watch streams for the long-lived supervisor: one per cluster, over all its live attempts.

The supervisor reads the latest observation of an attempt from here instead of calling
``observe`` for each job on each pass; ``changed`` is set whenever a stream yields something
new. A stream restarts whenever attempts are added to the set (every second while jobs are being
submitted) and then yields every attempt's first observation again; one that repeats what was
already delivered for that attempt (same outcome, no evidence) is dropped, so a restart does
not make the supervisor re-read every open job. Attempts that leave the set (they ended) do not
restart it: the stream ends once every attempt it follows has ended, so restarts do not grow
with the number of jobs that end.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace

from dispatch.adapters.base import Adapter
from dispatch.aio import stop
from dispatch.model import AttemptHandle, DispatchError, Observation

Key = tuple[str, int, str]


def _key(handle: AttemptHandle) -> Key:
    return (handle.job_id, handle.attempt, handle.native)


class Watcher:
    """Keeps ``adapter.watch`` streams open over the attempts it is told to follow."""

    def __init__(self, adapters: Callable[[str], Adapter]) -> None:
        self._adapters = adapters
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._following: dict[str, frozenset[Key]] = {}
        self._latest: dict[Key, Observation] = {}
        self._delivered: dict[Key, tuple[object, bool]] = {}  # the last (outcome, gone) delivered
        self._arrivals = 0
        self._arrived: dict[str, int] = {}  # job -> number of the last observation delivered
        self.changed = asyncio.Event()
        #: set with ``changed``; cleared by the supervisor's pass each time it takes the jobs
        #: ready (``changed`` is cleared only between passes)
        self.news = asyncio.Event()

    def follow(self, handles: Sequence[AttemptHandle]) -> None:
        """Watch exactly these attempts; a cluster's stream restarts when its set changes."""
        by_cluster: dict[str, list[AttemptHandle]] = defaultdict(list)
        for handle in handles:
            by_cluster[handle.cluster].append(handle)
        for cluster in set(self._following) - set(by_cluster):
            self._stop(cluster)
        followed = {_key(h) for h in handles}
        self._delivered = {k: v for k, v in self._delivered.items() if k in followed}
        jobs = {k[0] for k in followed}
        self._arrived = {j: n for j, n in self._arrived.items() if j in jobs}
        for cluster, group in by_cluster.items():
            keys = frozenset(_key(h) for h in group)
            task = self._tasks.get(cluster)
            live = task is not None and not task.done()
            if live and keys <= self._following.get(cluster, frozenset()):
                continue  # only attempts that ended left: the stream ends with the rest
            self._stop(cluster)
            self._following[cluster] = keys
            self._tasks[cluster] = asyncio.ensure_future(self._consume(cluster, group))

    async def _consume(self, cluster: str, handles: Sequence[AttemptHandle]) -> None:
        try:
            async for observation in self._adapters(cluster).watch(handles):
                key = _key(observation.handle)
                before = self._latest.get(key)
                said = (observation.outcome, observation.gone)
                if before is None and not observation.evidence and self._delivered.get(key) == said:
                    continue  # a restarted stream repeating what was delivered
                self._delivered[key] = said
                self._arrivals += 1
                self._arrived[key[0]] = self._arrivals
                if before is not None:  # not taken yet: keep its evidence too
                    evidence = (*before.evidence, *observation.evidence)
                    observation = replace(observation, evidence=evidence)
                self._latest[key] = observation
                self.changed.set()
                self.news.set()
        except DispatchError:
            pass  # the stream broke: the supervisor falls back to observe until it restarts
        finally:
            if self._tasks.get(cluster) is asyncio.current_task():  # not a replaced stream
                self._following.pop(cluster, None)
                for handle in handles:  # ``observe`` stands in meanwhile: repeat nothing
                    self._delivered.pop(_key(handle), None)
                self.changed.set()
                self.news.set()

    def _stop(self, cluster: str) -> None:
        task = self._tasks.pop(cluster, None)
        if task is not None:
            task.cancel()
        self._following.pop(cluster, None)

    def covers(self, handle: AttemptHandle) -> bool:
        """True when a live stream reports this attempt's changes."""
        task = self._tasks.get(handle.cluster)
        keys = self._following.get(handle.cluster, frozenset())
        return task is not None and not task.done() and _key(handle) in keys

    def arrival(self, job_id: str) -> int:
        """The number of the last observation delivered for the job (they count up from 1;
        0: none): a job with a later one than when it was last ticked has something new."""
        return self._arrived.get(job_id, 0)

    def ready_jobs(self) -> list[str]:
        """The jobs with an observation delivered and not taken yet."""
        return sorted({key[0] for key in self._latest})

    def take(self, handle: AttemptHandle) -> Observation | None:
        """The newest observation the stream delivered for this attempt, once, carrying the
        evidence of every observation delivered since the last take."""
        return self._latest.pop(_key(handle), None)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for cluster in list(self._tasks):
            self._stop(cluster)
        await stop(*tasks)

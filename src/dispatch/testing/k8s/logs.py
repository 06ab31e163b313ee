"""Container logs behind ``pods/{name}/log``: appended by tests today, by the kubelet later.

A log is a list of timestamped lines per (namespace, pod, container). ``follow`` yields the
existing lines and then new ones until the container's log is finished (container terminated)
or the pod is deleted. Everything runs on the emulator's event-loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from dispatch.testing.k8s.errors import bad_request
from dispatch.testing.k8s.watch import Change

LogKey = tuple[str, str, str]  # namespace, pod, container


@dataclass
class ContainerLog:
    """One container's log, run by run: a restarted container starts a new run, and the API
    serves the current run (``previous``: the one before it), as the kubelet keeps a log per
    container instance."""

    lines: list[tuple[float, str]] = field(default_factory=list)
    finished: bool = False
    #: where each run starts in ``lines``
    runs: list[int] = field(default_factory=lambda: [0])
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def append(self, when: float, text: str) -> None:
        for line in text.splitlines():
            self.lines.append((when, line))
        self._notify()

    def new_run(self) -> None:
        """The container (re)started: what it writes now is a new run (if the last one wrote
        anything); followers of the last run end."""
        if len(self.lines) > self.runs[-1]:
            self.runs.append(len(self.lines))
            self._notify()

    def run(self, previous: bool = False) -> tuple[int, int] | None:
        """(start, end) of the current run, or of the previous one (None: there is none)."""
        if not previous:
            return self.runs[-1], len(self.lines)
        if len(self.runs) < 2:
            return None
        return self.runs[-2], self.runs[-1]

    def finish(self) -> None:
        self.finished = True
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self, start: int = 0) -> AsyncIterator[tuple[float, str]]:
        """Lines from ``start`` as they are written, until the container's run ends (it is
        restarted or finished) or the pod is deleted."""
        index = start
        run = len(self.runs) - 1
        while True:
            end = self.runs[run + 1] if run + 1 < len(self.runs) else len(self.lines)
            while index < end:
                yield self.lines[index]
                index += 1
            if self.finished or run + 1 < len(self.runs):
                return
            await self._changed.wait()


class PodLogs:
    def __init__(self) -> None:
        self._logs: dict[LogKey, ContainerLog] = {}

    def log(self, namespace: str, pod: str, container: str) -> ContainerLog:
        key = (namespace, pod, container)
        found = self._logs.get(key)
        if found is None:
            found = self._logs[key] = ContainerLog()
        return found

    def append(self, namespace: str, pod: str, container: str, text: str, when: float) -> None:
        self.log(namespace, pod, container).append(when, text)

    def finish(self, namespace: str, pod: str, container: str) -> None:
        self.log(namespace, pod, container).finish()

    def new_run(self, namespace: str, pod: str, container: str) -> None:
        self.log(namespace, pod, container).new_run()

    def on_change(self, change: Change) -> None:
        """Store hook: a deleted pod's logs end (followers stop) and are forgotten."""
        if change.type != "DELETED" or change.rtype.storage != ("", "pods"):
            return
        for key in [k for k in self._logs if k[:2] == (change.namespace, change.name)]:
            self._logs.pop(key).finish()


def choose_container(pod: dict[str, Any], requested: str) -> str:
    """The container a log request is for, with the API server's errors (400)."""
    name = pod["metadata"]["name"]
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    if not requested:
        if len(names) != 1:
            raise bad_request(
                f"a container name must be specified for pod {name}, "
                f"choose one of: [{' '.join(names)}]"
            )
        return names[0]
    if requested not in names:
        raise bad_request(f"container {requested} is not valid for pod {name}")
    return requested

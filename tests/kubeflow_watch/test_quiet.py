"""A quiet stream behind a terminal outcome: proved caught up by a list that files nothing and
keeps its watch; a watch that stays stuck behind changes lists again."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dispatch.adapters.kubeflow import capture as capture_module
from dispatch.adapters.kubeflow.capture import QUIET, Capture
from dispatch.adapters.kubeflow.client import Connection
from dispatch.adapters.kubeflow.kinds import CORE_EVENTS, NODES, WatchedKind
from dispatch.clock import ManualClock
from dispatch.testing.k8s import ClusterConfig, Emulator, FaultRule

NS = "ml-team"
KINDS = (WatchedKind(CORE_EVENTS), WatchedKind(NODES))


def event(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": NS},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS}}  # fmt: skip


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")


def run_capture(
    emu: Emulator, kubeconfig: Path, body: Callable[[Capture, ManualClock], Awaitable[None]]
) -> None:
    async def main() -> None:
        clock = ManualClock(100.0)
        capture = Capture(Connection(kubeconfig, None), "kf", clock, kinds=KINDS)
        capture.cover([NS])
        await asyncio.wait_for(capture.synced.wait(), 10)
        try:
            await body(capture, clock)
        finally:
            await capture.close()
            await capture.connection.aclose()

    asyncio.run(main())


def test_a_quiet_stream_is_proved_caught_up_by_a_list_that_keeps_its_watch(
    tmp_path: Path,
) -> None:
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        emu.create(event("e-1"))

        async def body(capture: Capture, clock: ManualClock) -> None:
            emu.create(node("n-new"))  # only the Node stream moves
            await until(lambda: (capture.position() or 0) >= int(version_of_newest(emu)))
            target = capture.position()
            assert target is not None
            since = clock.now()
            assert not capture.caught_up(target, since)  # the Event stream is behind
            before = emu.requests()
            clock.advance(QUIET)
            await until(lambda: capture.caught_up(target, since))
            after = emu.requests()
            assert after.count("list", "events") == before.count("list", "events") + 1
            assert after.watches_started == before.watches_started  # no watch replaced
            assert capture.fresh_refs() == []  # the check filed nothing

        run_capture(emu, tmp_path / "kubeconfig", body)


def test_a_watch_still_short_of_a_checks_list_at_the_next_check_lists_again(
    tmp_path: Path,
) -> None:
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        # every Event watch hangs: the stream looks open and quiet but delivers nothing
        emu.faults.add(FaultRule(verb="watch", resource="events", hang=60.0))

        async def body(capture: Capture, clock: ManualClock) -> None:
            emu.create(event("e-late"))  # never delivered by the stuck watch
            emu.create(node("n-new"))
            await until(lambda: (capture.position() or 0) >= int(version_of_newest(emu)))
            target = capture.position()
            assert target is not None
            since = clock.now()
            lists = emu.requests().count("list", "events")
            clock.advance(QUIET)
            assert not capture.caught_up(target, since)  # the first check finds e-late
            await until(lambda: emu.requests().count("list", "events") == lists + 1)
            await until(lambda: not capture._checks)
            assert not capture.caught_up(target, None)  # left to the watch, for now
            assert emu.requests().count("list", "events") == lists + 1
            clock.advance(capture_module.RELIST_EVERY)
            capture.caught_up(target, since)  # the second check: the watch is still short
            # of the first check's list, so it is stuck: the stream lists again, past the target
            await until(lambda: capture.caught_up(target, None))
            assert emu.requests().count("list", "events") == lists + 3

        run_capture(emu, tmp_path / "kubeconfig", body)


def version_of_newest(emu: Emulator) -> str:
    """The emulator's newest resourceVersion (a list's version)."""
    cluster = emu.cluster
    return str(emu.call(lambda: cluster.store.resource_version))

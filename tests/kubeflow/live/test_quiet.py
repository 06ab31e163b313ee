"""A quiet stream behind a terminal outcome: proved caught up by a list that files nothing and
keeps its watch; a watch that stays stuck behind changes lists again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from dispatch import aio
from dispatch.adapters.kubeflow.api.client import Connection
from dispatch.adapters.kubeflow.api.kinds import (
    CORE_EVENTS,
    COSCHEDULING_PODGROUPS,
    JOB,
    JOBSET_NAME,
    JOBSETS,
    KUEUE_MANAGER,
    NAME,
    NODES,
    PODS,
    UID,
    WORKLOAD_JOB_UID,
    WORKLOADS,
    WatchedKind,
)
from dispatch.adapters.kubeflow.causes.podgroups import COSCHEDULING_LABEL
from dispatch.adapters.kubeflow.live import catchup, streams
from dispatch.adapters.kubeflow.live.attribution import TRAINJOB_NAME, TrainJobRef
from dispatch.adapters.kubeflow.live.capture import Capture
from dispatch.adapters.kubeflow.live.catchup import QUIET
from dispatch.adapters.kubeflow.planning.trainjob import LABEL_JOB, LABEL_QUEUE
from dispatch.clock import ManualClock
from dispatch.testing.k8s import ClusterConfig, Emulator, FaultRule
from tests.kubeflow.helpers import until

NS = "ml-team"
KINDS = (WatchedKind(CORE_EVENTS), WatchedKind(NODES))


def event(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": NS},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": NS}}  # fmt: skip


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def run_capture(
    emu: Emulator,
    kubeconfig: Path,
    body: Callable[[Capture, ManualClock], Awaitable[None]],
    kinds: tuple[WatchedKind, ...] = KINDS,
    *,
    on_time: bool = True,
) -> None:
    """Run ``body`` on a capture of ``kinds`` in ``NS``, once every stream has listed. With
    ``on_time`` the loop is taken to run on time (its lateness is no longer measured, and is
    0), so a loaded machine does not lengthen the ``QUIET`` waits the body counts on."""

    async def main() -> None:
        clock = ManualClock(100.0)
        capture = Capture(Connection(kubeconfig, None), "kf", clock, kinds=kinds)
        capture.cover([NS])
        await asyncio.wait_for(capture.synced.wait(), 10)
        if on_time:
            await capture.loop_lag.close()
            capture.loop_lag.lag = 0.0
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
            target = await only_the_nodes_move(emu, capture)
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
            target = await only_the_nodes_move(emu, capture)
            since = clock.now()
            lists = emu.requests().count("list", "events")
            clock.advance(QUIET)
            assert not capture.caught_up(target, since)  # the first check finds e-late
            await until(lambda: emu.requests().count("list", "events") == lists + 1)
            await until(lambda: not capture.catch_up.checking)
            assert not capture.caught_up(target, None)  # left to the watch, for now
            assert emu.requests().count("list", "events") == lists + 1
            clock.advance(catchup.RELIST_EVERY)
            capture.caught_up(target, since)  # the second check: the watch is still short
            # of the first check's list, so it is stuck: the stream lists again, past the target
            await until(lambda: capture.caught_up(target, None))
            assert emu.requests().count("list", "events") == lists + 3

        run_capture(emu, tmp_path / "kubeconfig", body)


def test_streams_do_not_look_quiet_while_the_loop_runs_late(tmp_path: Path) -> None:
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        emu.create(event("e-1"))

        async def body(capture: Capture, clock: ManualClock) -> None:
            await asyncio.sleep(2 * aio.BEAT)
            time.sleep(0.5)  # the loop is blocked, as by a long decode: the next beat is late
            await asyncio.sleep(aio.BEAT)
            assert capture.loop_lag.lag >= 0.2  # (0.45 s late, faded by a few beats at most)
            target = await only_the_nodes_move(emu, capture)
            since = clock.now()
            capture.loop_lag.lag = 10.0  # as late as that, lately
            clock.advance(QUIET)
            assert not capture.caught_up(target, since)
            assert (
                not capture.catch_up.checking
            )  # quiet only because the loop ran late: not checked
            # the lateness fades (the beats are on time again): then the Event stream is checked
            await until(lambda: capture.caught_up(target, since), seconds=20)

        run_capture(emu, tmp_path / "kubeconfig", body, on_time=False)


def test_a_waiting_outcome_is_woken_when_its_quiet_wait_and_its_check_end(
    tmp_path: Path,
) -> None:
    """The consumer need not look again on its own: ``changed`` is set when the ``QUIET``
    wait ends (so it asks again, and the check starts) and when the check ends (so it finds
    the stream caught up)."""
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        emu.create(event("e-1"))

        async def body(capture: Capture, clock: ManualClock) -> None:
            target = await only_the_nodes_move(emu, capture)
            since = clock.now()
            assert not capture.caught_up(target, since)  # too soon to check: a wake is set
            capture.changed.clear()
            clock.advance(QUIET)
            await asyncio.wait_for(capture.changed.wait(), 5)  # the wait ended
            capture.changed.clear()
            assert not capture.caught_up(target, since)  # this look starts the check
            assert capture.catch_up.checking
            await asyncio.wait_for(capture.changed.wait(), 5)  # the check ended
            assert capture.caught_up(target, since)

        run_capture(emu, tmp_path / "kubeconfig", body)


def test_one_slow_check_does_not_set_the_longest_pause_two_in_a_row_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check's pause follows the lesser of the stream's last two check durations: a check
    slowed once (a busy loop, other checks at the same moment) is not taken for a costly list."""
    slow = [False]
    real = catchup.list_pages

    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        emu.create(event("e-1"))

        async def body(capture: Capture, clock: ManualClock) -> None:
            def timed(session: Any, res: Any, namespace: str | None, **kw: Any) -> Any:
                if slow[0]:
                    clock.advance(1.0)  # this list took a second
                return real(session, res, namespace, **kw)

            monkeypatch.setattr(catchup, "list_pages", timed)
            stream = ("events.core", NS)
            pauses = []
            for i, slowed in enumerate((False, True, True)):
                slow[0] = slowed
                target = await only_the_nodes_move(emu, capture, f"n-{i}")
                since = clock.now()
                clock.advance(catchup.RELIST_EVERY)  # quiet, and any pause is over
                await until(lambda: capture.caught_up(target, since))  # noqa: B023
                await until(lambda: not capture.catch_up.checking)
                pauses.append(round((capture.catch_up.next_check(stream) or 0.0) - clock.now(), 2))
            # two slow lists in a row: ten times the lesser, beyond the 2 s of a resuming stream
            assert pauses == [QUIET, QUIET, catchup.CHECK_SHARE * 1.0]

        run_capture(emu, tmp_path / "kubeconfig", body)


POD_KINDS = (WatchedKind(PODS, LABEL_JOB, JOBSET_NAME, NAME), WatchedKind(NODES))
JOBSET_KINDS = (WatchedKind(JOBSETS, "", LABEL_JOB, JOB), WatchedKind(NODES))
A, B = (NS, "tj-a"), (NS, "tj-b")


def pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip


def trainjob(name: str) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "resourceVersion": "1", "labels": {LABEL_JOB: f"job-{name}"}}}  # fmt: skip


def test_an_outcome_waits_on_the_workload_stream_only_if_kueue_may_manage_its_trainjob(
    tmp_path: Path,
) -> None:
    kinds = (WatchedKind(WORKLOADS, WORKLOAD_JOB_UID, WORKLOAD_JOB_UID, UID), WatchedKind(NODES))
    kueue_patch = {"manager": KUEUE_MANAGER}
    specs = {
        "plain": {"runtimePatches": [{"manager": "dispatch.dev/adapter"}]},
        "queued": {},
        "suspended": {"suspend": True},
        "patched": {"runtimePatches": [kueue_patch]},
    }
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:

        async def body(capture: Capture, clock: ManualClock) -> None:
            for name, spec in specs.items():
                state = {**trainjob(name), "spec": spec}
                if name == "queued":
                    state["metadata"]["labels"][LABEL_QUEUE] = "team-a"
                capture.seen(state)
            target = await only_the_nodes_move(emu, capture)  # the Workload stream is behind
            waits = {name: not capture.caught_up(target, None, (NS, name)) for name in specs}
            assert waits == {"plain": False, "queued": True, "suspended": True, "patched": True}
            # a later state showing Kueue took it over counts as much as the first
            later = {**trainjob("plain"), "spec": {"suspend": True}}
            later["metadata"]["resourceVersion"] = "2"
            capture.seen(later)
            assert not capture.caught_up(target, None, (NS, "plain"))

        run_capture(emu, tmp_path / "kubeconfig", body, kinds)


def test_an_outcome_waits_on_the_podgroup_stream_only_if_its_pods_may_belong_to_a_gang(
    tmp_path: Path,
) -> None:
    kinds = (WatchedKind(COSCHEDULING_PODGROUPS), WatchedKind(NODES))
    labels = {
        "plain": {JOBSET_NAME: "plain"},
        "coscheduled": {JOBSET_NAME: "coscheduled", COSCHEDULING_LABEL: "coscheduled"},
    }
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:

        async def body(capture: Capture, clock: ManualClock) -> None:
            for name in ("plain", "coscheduled", "podless"):
                capture.seen(trainjob(name))
            for name, pod_labels in labels.items():
                capture.seen({**pod(f"{name}-node-0-0", pod_labels), "metadata": {
                    "name": f"{name}-node-0-0", "namespace": NS, "labels": pod_labels,
                    "resourceVersion": "1"}})  # fmt: skip
            target = await only_the_nodes_move(emu, capture)  # the PodGroup stream is behind
            waits = {n: not capture.caught_up(target, None, (NS, n)) for n in (*labels, "podless")}
            # no pod seen yet: a gang that never formed may be why, so it waits
            assert waits == {"plain": False, "coscheduled": True, "podless": True}

        run_capture(emu, tmp_path / "kubeconfig", body, kinds)


def spy_on_lists(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The (resource, label selector) of every list the capture makes from now on (its
    streams' lists and its checks')."""
    lists: list[tuple[str, str]] = []
    real = catchup.list_pages

    def spy(
        session: Any, res: Any, namespace: str | None, *, label_selector: str = "", **more: Any
    ) -> Any:
        lists.append((res.plural, label_selector))
        return real(session, res, namespace, label_selector=label_selector, **more)

    monkeypatch.setattr(catchup, "list_pages", spy)
    monkeypatch.setattr(streams, "list_pages", spy)
    return lists


def jobset(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"suspend": True, "replicatedJobs": []}}  # fmt: skip


def make_two_trainjobs(
    emu: Emulator, make: Callable[[str, dict[str, str]], dict[str, Any]]
) -> None:
    """Three objects of ``make``'s kind for each of tj-a and tj-b, labelled as theirs."""
    for name in ("tj-a", "tj-b"):
        for i in range(3):
            emu.create(make(f"{name}-{i}", {LABEL_JOB: f"job-{name}", JOBSET_NAME: name}))


async def two_trainjobs_behind(emu: Emulator, capture: Capture) -> int:
    """tj-a and tj-b known to the capture, and every stream but the Nodes' behind: the
    position to catch up with."""
    capture.seen(trainjob("tj-a"))
    capture.seen(trainjob("tj-b"))
    return await only_the_nodes_move(emu, capture)


@pytest.mark.parametrize(
    ("kinds", "make", "selector"),
    [
        (POD_KINDS, pod, f"{LABEL_JOB},{JOBSET_NAME} in (tj-a)"),
        (JOBSET_KINDS, jobset, f"{LABEL_JOB} in (job-tj-a)"),
    ],
    ids=["pods", "jobsets"],
)
def test_a_stream_with_many_objects_is_checked_for_the_waiting_trainjob_alone(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kinds: tuple[WatchedKind, ...],
    make: Callable[[str, dict[str, str]], dict[str, Any]],
    selector: str,
) -> None:
    monkeypatch.setattr(catchup, "NARROW_FROM", 3)
    lists = spy_on_lists(monkeypatch)
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        make_two_trainjobs(emu, make)

        async def body(capture: Capture, clock: ManualClock) -> None:
            target = await two_trainjobs_behind(emu, capture)
            since = clock.now()
            assert not capture.caught_up(target, since, A)
            lists.clear()
            watches = emu.requests().watches_started
            clock.advance(QUIET)
            await until(lambda: capture.caught_up(target, since, A))
            assert lists == [(kinds[0].resource.plural, selector)]
            assert not capture.caught_up(target, None, B)  # proved for tj-a alone
            assert not capture.caught_up(target, None)
            assert emu.requests().watches_started == watches
            assert capture.fresh_refs() == [
                A,
                B,
            ]  # the seeded TrainJobs only: a check files nothing

        run_capture(emu, tmp_path / "kubeconfig", body, kinds)


def room_for_one_name(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Checks narrowed from 3 objects on, with room for one TrainJob's name in a selector,
    not two; the lists made (spied)."""
    monkeypatch.setattr(catchup, "NARROW_FROM", 3)
    monkeypatch.setattr(catchup, "MAX_SELECTOR", len(f"{LABEL_JOB},{JOBSET_NAME} in (tj-a)"))
    return spy_on_lists(monkeypatch)


async def both_wait(
    emu: Emulator,
    capture: Capture,
    clock: ManualClock,
    lists: list[tuple[str, str]],
    order: tuple[TrainJobRef, TrainJobRef],
) -> tuple[int, float]:
    """Both TrainJobs' outcomes wait on the quiet pod stream, in ``order``, for a check that
    can start now; (their position, since when they wait)."""
    target = await two_trainjobs_behind(emu, capture)
    since = clock.now()
    lists.clear()
    clock.advance(QUIET)
    for ref in order:
        capture.caught_up(target, since, ref)
    return target, since


def test_so_many_trainjobs_waiting_that_their_selector_is_too_long_are_listed_in_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lists = room_for_one_name(monkeypatch)
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        make_two_trainjobs(emu, pod)

        async def body(capture: Capture, clock: ManualClock) -> None:
            target, _ = await both_wait(emu, capture, clock, lists, (B, A))
            await until(lambda: capture.caught_up(target, None, A))
            assert capture.caught_up(target, None, B)
            # two narrow lists in one check, the first to wait first; not the whole stream
            assert lists == [
                ("pods", f"{LABEL_JOB},{JOBSET_NAME} in (tj-b)"),
                ("pods", f"{LABEL_JOB},{JOBSET_NAME} in (tj-a)"),
            ]
            assert not capture.caught_up(target, None)  # proved for those two alone

        run_capture(emu, tmp_path / "kubeconfig", body, POD_KINDS)


def test_a_check_lists_at_most_max_parts_and_leaves_the_rest_to_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lists = room_for_one_name(monkeypatch)
    monkeypatch.setattr(catchup, "MAX_PARTS", 1)
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        make_two_trainjobs(emu, pod)

        async def body(capture: Capture, clock: ManualClock) -> None:
            target, since = await both_wait(emu, capture, clock, lists, (A, B))
            await until(lambda: capture.caught_up(target, None, A))
            await until(lambda: not capture.catch_up.checking)
            assert lists == [("pods", f"{LABEL_JOB},{JOBSET_NAME} in (tj-a)")]
            assert not capture.caught_up(target, None, B)  # waits for the next check
            clock.advance(catchup.RELIST_EVERY)
            capture.caught_up(target, since, B)
            await until(lambda: capture.caught_up(target, None, B))
            assert lists[1:] == [("pods", f"{LABEL_JOB},{JOBSET_NAME} in (tj-b)")]

        run_capture(emu, tmp_path / "kubeconfig", body, POD_KINDS)


def test_a_check_for_a_trainjob_missing_one_of_its_objects_is_followed_by_a_whole_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catchup, "NARROW_FROM", 3)
    lists = spy_on_lists(monkeypatch)
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        for i in range(3):
            emu.create(pod(f"tj-a-{i}", {LABEL_JOB: "job-tj-a", JOBSET_NAME: "tj-a"}))
        # attributed to tj-a by Trainer's label, not the JobSet's: a narrow list misses it
        emu.create(pod("tj-a-odd", {LABEL_JOB: "job-tj-a", TRAINJOB_NAME: "tj-a"}))

        async def body(capture: Capture, clock: ManualClock) -> None:
            capture.seen(trainjob("tj-a"))  # claims the pods listed before it was known
            target = await only_the_nodes_move(emu, capture)
            since = clock.now()
            lists.clear()
            clock.advance(QUIET)
            capture.caught_up(target, since, A)
            await until(lambda: len(lists) == 1 and not capture.catch_up.checking)
            assert not capture.caught_up(target, None, A)  # tj-a-odd was not in that list
            clock.advance(catchup.RELIST_EVERY)
            await until(lambda: capture.caught_up(target, since, A))
            assert lists == [
                ("pods", f"{LABEL_JOB},{JOBSET_NAME} in (tj-a)"),
                ("pods", LABEL_JOB),  # the whole stream, which proves it for everyone
            ]
            assert capture.caught_up(target, None)

        run_capture(emu, tmp_path / "kubeconfig", body, POD_KINDS)


async def only_the_nodes_move(emu: Emulator, capture: Capture, name: str = "n-new") -> int:
    """Create a Node, so that only the Node stream moves, and wait until the capture saw it;
    the capture's position then (every other stream is behind it)."""
    emu.create(node(name))
    await until(lambda: (capture.position() or 0) >= int(version_of_newest(emu)))
    target = capture.position()
    assert target is not None
    return target


def version_of_newest(emu: Emulator) -> str:
    """The emulator's newest resourceVersion (a list's version)."""
    cluster = emu.cluster
    return str(emu.call(lambda: cluster.store.resource_version))


def test_a_slow_check_for_some_trainjobs_alone_pauses_the_stream_a_second_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A narrow check lists a few objects: its wall time under a busy loop is the loop's, and
    ten times it would hold every end waiting on the stream back; a whole check of the same
    duration keeps the longer pause."""
    monkeypatch.setattr(catchup, "NARROW_FROM", 3)
    real = catchup.list_pages
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        make_two_trainjobs(emu, pod)

        async def body(capture: Capture, clock: ManualClock) -> None:
            def timed(session: Any, res: Any, namespace: str | None, **kw: Any) -> Any:
                clock.advance(1.0)  # every list takes a second
                return real(session, res, namespace, **kw)

            monkeypatch.setattr(catchup, "list_pages", timed)
            stream = ("pods.core", NS)
            target = await two_trainjobs_behind(emu, capture)
            since = clock.now()
            clock.advance(catchup.RELIST_EVERY)
            await until(lambda: capture.caught_up(target, since, A))
            await until(lambda: not capture.catch_up.checking)
            pause = (capture.catch_up.next_check(stream) or 0.0) - clock.now()
            assert pause == pytest.approx(catchup.MAX_NARROW_PAUSE)
            # the whole stream, checked as slowly: ten times its duration
            target = await only_the_nodes_move(emu, capture, "n-2")
            since = clock.now()
            clock.advance(catchup.RELIST_EVERY)
            await until(lambda: capture.caught_up(target, since))
            await until(lambda: not capture.catch_up.checking)
            pause = (capture.catch_up.next_check(stream) or 0.0) - clock.now()
            assert pause == pytest.approx(catchup.CHECK_SHARE * 1.0)

        run_capture(emu, tmp_path / "kubeconfig", body, POD_KINDS)

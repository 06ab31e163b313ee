"""The streams' lifecycle is logged: a kind the cluster refuses is a warning, not silence;
the routine (start, stop) is debug (tests/unit/test_logs.py: shown only when asked for)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from dispatch.adapters.kubeflow.api.client import Connection
from dispatch.adapters.kubeflow.api.kinds import CORE_EVENTS, NODES, PODS, WatchedKind
from dispatch.adapters.kubeflow.live.capture import Capture
from dispatch.clock import ManualClock
from dispatch.testing.k8s import ClusterConfig, Emulator

NS = "ml-team"
KINDS = (WatchedKind(PODS), WatchedKind(CORE_EVENTS), WatchedKind(NODES))


def follow_once(kubeconfig: Path) -> None:
    async def main() -> None:
        capture = Capture(Connection(kubeconfig, None), "kf", ManualClock(100.0), kinds=KINDS)
        capture.cover([NS])
        try:
            await asyncio.wait_for(capture.synced.wait(), 10)
        finally:
            await capture.close()
            await capture.connection.aclose()

    asyncio.run(main())


def test_a_stream_refused_with_403_is_logged_as_a_warning_and_the_others_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:
        emu.authorizer.deny("list", "pods")
        with caplog.at_level(logging.DEBUG, logger="dispatch"):
            follow_once(tmp_path / "kubeconfig")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].name == "dispatch.adapters.kubeflow.live.streams"
    assert "pods.core in ml-team: not followed" in warnings[0].getMessage()
    followed = {r.getMessage() for r in caplog.records if r.getMessage().endswith(": following")}
    assert followed == {f"{k.name} in {where}: following"
                        for k, where in zip(KINDS, (NS, NS, "the cluster"), strict=True)}  # fmt: skip
    assert any(r.getMessage() == "events.core in ml-team: stopped" for r in caplog.records)


def test_how_late_an_object_dispatch_created_came_in_its_stream_is_the_streams_lag() -> None:
    from typing import Any, cast

    from dispatch.adapters.kubeflow.live import streams as live

    clock = ManualClock(start=100.0)
    pods = WatchedKind(PODS)
    follow = live.Streams(cast(Any, None), clock, (pods,), lambda obj, deleted=False: [])
    stream = (pods.name, NS)
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": NS, "resourceVersion": "5"}}
    assert follow.behind() == 0.0
    follow.created(pods.name, f"{NS}/p")
    clock.advance(0.7)
    follow.update(("events.core", NS), f"{NS}/p", {**pod, "kind": "Event"})  # another kind
    assert follow.behind() == 0.0
    follow.update(stream, f"{NS}/p", pod)
    assert follow.behind() == pytest.approx(0.7)
    clock.advance(live.LAG_KEPT + 0.1)  # nothing measured since: on time
    assert follow.behind() == 0.0
    for n in range(live.MAX_CREATED + 5):  # bounded
        follow.created(pods.name, f"{NS}/p-{n}")
    assert len(follow._created) == live.MAX_CREATED

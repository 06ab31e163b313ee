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

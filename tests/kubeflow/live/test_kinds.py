"""Which streams the capture opens for a cluster, and what reaches it through them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dispatch.adapters.kubeflow.api.kinds import JOB, watched_kinds
from dispatch.adapters.kubeflow.live.capture import Capture
from dispatch.adapters.kubeflow.planning.trainjob import LABEL_JOB
from dispatch.testing.k8s import ClusterConfig, Emulator

from .test_quiet import NS, run_capture, trainjob, until


def events_k8s_io_event(name: str, about: str) -> dict[str, Any]:
    """An Event as Trainer, Kueue and the scheduler record it: through ``events.k8s.io/v1``."""
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": NS},
            "regarding": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                          "name": about, "namespace": NS},
            "reason": "Created", "note": "from events.k8s.io", "type": "Normal",
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "trainer", "reportingInstance": "trainer-0",
            "action": "Create"}  # fmt: skip


def test_events_are_one_stream_and_it_delivers_those_recorded_through_events_k8s_io(
    tmp_path: Path,
) -> None:
    kinds = watched_kinds("kf")
    assert [k.name for k in kinds if k.resource.kind == "Event"] == ["events.core"]
    with Emulator(ClusterConfig(namespaces=(NS,)), kubeconfig=tmp_path / "kubeconfig") as emu:

        async def body(capture: Capture, _clock: object) -> None:
            ref = (NS, "tj-a")
            capture.seen(trainjob("tj-a"))
            emu.create(events_k8s_io_event("tj-a.1", "tj-a"))

            def events() -> list[dict[str, Any]]:
                return [r.data for r in capture.records(ref) if r.data.get("kind") == "Event"]

            await until(lambda: bool(events()))
            [event] = events()
            assert event["involvedObject"]["name"] == "tj-a"  # the core view of ``regarding``
            assert event["message"] == "from events.k8s.io"

        run_capture(emu, tmp_path / "kubeconfig", body, kinds)


def test_jobsets_are_all_followed_and_checked_by_the_job_label_dispatch_sets_on_them() -> None:
    [jobsets] = [k for k in watched_kinds("kf") if k.resource.kind == "JobSet"]
    # no selector: a JobSet without dispatch's label (made before it was set) still arrives
    assert (jobsets.selector, jobsets.narrow, jobsets.narrow_by) == ("", LABEL_JOB, JOB)

"""`bench/admission.py` works: a 2-second run answers every request as expected (no timing is
asserted: that is the benchmark's job, not a test's)."""

from __future__ import annotations

import pytest

pytest.importorskip("kubernetes_asyncio")
pytest.importorskip("psutil")

from bench.report import render

from bench import admission


@pytest.mark.timeout(120)
def test_a_short_run_answers_every_request_as_expected() -> None:
    found = admission.run(rate=100.0, seconds=2.0)
    assert (found["sent"], found["answered"]) == (200, 200)
    assert found["errors"] == 0, found["errorKinds"]
    assert found["serverExitCode"] == 0
    assert found["p50Ms"] is not None and found["p50Ms"] <= found["p99Ms"] <= found["maxMs"]
    assert found["serverCpuSeconds"] > 0
    section = render(
        {
            "command": "python bench/run.py --only admission",
            "machine": {"date": "d", "cpu": "c", "cores": 2, "memoryGiB": 1, "os": "o",
                        "python": "p", "loadAverageAtStart": "0"},
            "admission": {**found, "seconds": 3.0, "loadAverage": "0"},
        }
    )  # fmt: skip
    assert "`dispatch admission serve` under load" in section
    assert f"| {found['sent']:,} |" in section


def test_the_mix_is_every_kind_of_request_in_its_share() -> None:
    order = admission.schedule()
    assert len(order) == sum(admission.MIX.values())
    assert {k: order.count(k) for k in admission.MIX} == admission.MIX
    expected = {kind: allowed for kind, (_, _, allowed) in admission.bodies(0).items()}
    assert expected["resume-after-end"] is False and expected["kueue-fills"] is True

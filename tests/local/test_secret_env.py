"""secretEnv on the local scheduler: a value that cannot be had when the attempt starts
refuses it before anything is created, naming the variable and the file, never a value."""

from __future__ import annotations

import pytest

from dispatch.model import InvalidSpec
from tests.local.conftest import Harness


def test_a_secret_file_gone_at_start_refuses_the_attempt_and_creates_nothing(
    harness: Harness,
) -> None:
    gone = harness.root / "gone-token"
    job = harness.job(secretEnv={"TOKEN": {"fromFile": str(gone)}})
    with pytest.raises(InvalidSpec) as refused:
        harness.start(job)
    assert "secretEnv.TOKEN" in str(refused.value) and str(gone) in str(refused.value)
    assert not (harness.state / "jobs" / job.id).exists()


def test_a_secret_file_reaches_the_ranks_and_not_the_launch_file(harness: Harness) -> None:
    token = harness.root / "token"
    token.write_text("local-secret-99\n")
    job = harness.job(
        secretEnv={"TOKEN": {"fromFile": str(token)}},
        command=["python", "-c", "import os; print(os.environ['TOKEN'], flush=True)"],
    )
    handle = harness.start(job)
    assert harness.wait_end(handle).outcome.cause is None
    lines = harness.run(_collect(harness, handle))
    assert lines == ["[rank 0] local-secret-99", "[rank 1] local-secret-99"]
    for path in harness.state.rglob("*"):
        if path.is_file() and not path.name.endswith(".log"):
            assert b"local-secret-99" not in path.read_bytes(), path


async def _collect(harness: Harness, handle):  # type: ignore[no-untyped-def]
    return sorted([line async for line in harness.adapter.read_output(handle, None)])

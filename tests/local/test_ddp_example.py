"""The DDP example (examples/ddp) runs to succeeded through the local adapter, and its
checkpoints are fenced by attempt. Needs torch; skipped without it."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from dispatch.model import Job, State, load_spec, resolve_working_dir
from tests.conftest import EXAMPLES
from tests.local.conftest import Harness

pytestmark = [
    pytest.mark.torch,
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]


def _job(tmp_path: Path, epochs: int) -> Job:
    spec_file = EXAMPLES / "ddp" / "job.yaml"
    spec = resolve_working_dir(load_spec(spec_file), spec_file)
    env = {
        **spec.env,
        "EPOCHS": str(epochs),
        "STEPS_PER_EPOCH": "5",
        "CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
        "TMPDIR": str(tmp_path),  # torchrun leaves folders in the temp dir
    }
    return Job("ddp-demo-1", spec.model_copy(update={"env": env}), 0.0)


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_ddp_example_succeeds_and_attempts_never_overwrite_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # torchrun's banner shows without it
    harness = Harness(tmp_path)
    first = harness.start(_job(tmp_path, epochs=2), 1)
    outcome = harness.wait_end(first, timeout=300).outcome
    assert outcome.state is State.SUCCEEDED, outcome
    # the output is the training lines, not warnings (issue 26: torch without numpy warned in
    # every process, torchrun printed its OMP_NUM_THREADS banner on every node)
    output = "\n".join(harness.run(_lines(harness, first)))
    assert "attempt 1 epoch 2: loss" in output
    assert "Failed to initialize NumPy" not in output
    assert "Setting OMP_NUM_THREADS environment variable" not in output
    assert "Warning" not in output, output
    folder = tmp_path / "checkpoints" / "ddp-demo-1"
    assert sorted(p.name for p in (folder / "attempt-1").iterdir()) == ["epoch-1", "epoch-2"]
    before = _digests(folder / "attempt-1")

    second = harness.start(_job(tmp_path, epochs=3), 2)
    outcome = harness.wait_end(second, timeout=300).outcome
    assert outcome.state is State.SUCCEEDED, outcome
    assert sorted(p.name for p in (folder / "attempt-2").iterdir()) == ["epoch-3"]
    assert _digests(folder / "attempt-1") == before
    lines = harness.run(_lines(harness, second))
    assert any("resuming after epoch 2 from attempt 1" in line for line in lines)
    assert any("attempt 2 epoch 3: loss" in line for line in lines)


async def _lines(harness: Harness, handle) -> list[str]:  # type: ignore[no-untyped-def]
    return [line async for line in harness.adapter.read_output(handle, 0)]

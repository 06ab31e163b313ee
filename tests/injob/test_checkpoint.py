"""Checkpoints fenced by attempt: own folder per attempt, atomic completion, never overwritten."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dispatch.injob import (
    Checkpoint,
    CheckpointExists,
    CheckpointFence,
    FencedWrite,
    checkpoints,
)
from dispatch.injob.checkpoint import MARKER, TEMP_PREFIX

JOB = "train-x7k2p"


def env(attempt: int) -> dict[str, str]:
    return {"DISPATCH_JOB": JOB, "DISPATCH_ATTEMPT": str(attempt), "DISPATCH_CLUSTER": "local"}


def fence(base: Path, attempt: int) -> CheckpointFence:
    return checkpoints(base, environ=env(attempt))


def save(fenced: CheckpointFence, step: int, text: str) -> None:
    with fenced.save(step) as folder:
        (folder / "weights.txt").write_text(text)
        (folder / "nested").mkdir()
        (folder / "nested" / "optimizer.txt").write_text(text + "-opt")


def test_each_attempt_writes_its_own_folder_under_the_job(tmp_path: Path) -> None:
    first = fence(tmp_path, 1)
    save(first, 10, "a1")
    assert first.root == tmp_path / JOB
    done = tmp_path / JOB / "attempt-1" / "step-10"
    assert (done / "weights.txt").read_text() == "a1"
    assert (done / "nested" / "optimizer.txt").read_text() == "a1-opt"
    assert (done / MARKER).exists()
    assert [p.name for p in (tmp_path / JOB / "attempt-1").iterdir()] == ["step-10"]


def test_a_later_attempt_resumes_from_the_highest_complete_step(tmp_path: Path) -> None:
    first = fence(tmp_path, 1)
    save(first, 10, "a1-10")
    save(first, 20, "a1-20")
    second = fence(tmp_path, 2)
    latest = second.latest()
    assert latest == Checkpoint(20, 1, tmp_path / JOB / "attempt-1" / "step-20")
    assert latest is not None
    assert (latest.path / "weights.txt").read_text() == "a1-20"
    save(second, 20, "a2-20")  # same step, own folder: a tie goes to the later attempt
    save(second, 30, "a2-30")
    assert [(c.step, c.attempt) for c in second.complete()] == [(10, 1), (20, 1), (20, 2), (30, 2)]
    assert second.latest() == Checkpoint(30, 2, second.path(30))
    # attempt 1's checkpoints are untouched
    assert (first.path(20) / "weights.txt").read_text() == "a1-20"


def test_an_attempt_never_sees_checkpoints_of_later_attempts(tmp_path: Path) -> None:
    save(fence(tmp_path, 3), 50, "a3")
    assert fence(tmp_path, 2).latest() is None


def test_a_complete_checkpoint_is_never_overwritten(tmp_path: Path) -> None:
    first = fence(tmp_path, 1)
    save(first, 10, "original")
    with pytest.raises(CheckpointExists), first.save(10):
        pytest.fail("the block must not run when the checkpoint exists")  # pragma: no cover
    assert (first.path(10) / "weights.txt").read_text() == "original"


def test_an_exception_inside_the_block_leaves_no_checkpoint_and_no_temp(tmp_path: Path) -> None:
    first = fence(tmp_path, 1)

    def write_then_fail() -> None:
        with first.save(10) as folder:
            (folder / "weights.txt").write_text("half")
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_then_fail()
    assert first.latest() is None
    assert list(first.folder.iterdir()) == []
    save(first, 10, "retried")  # the step can still be written
    assert first.latest() == Checkpoint(10, 1, first.path(10))


CRASHING_WRITER = """
import os, sys
from dispatch.injob import checkpoints
fence = checkpoints(sys.argv[1])
with fence.save(int(sys.argv[2])) as folder:
    (folder / "weights.txt").write_text("partial")
    print(folder, flush=True)
    os._exit(9)  # the process dies mid-write: no exception handler, no cleanup
"""


def test_a_crash_mid_write_leaves_no_complete_checkpoint(tmp_path: Path) -> None:
    first = fence(tmp_path, 1)
    save(first, 10, "good")
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, str(tmp_path), "20"],
        env={**os.environ, **env(1)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 9, done.stderr
    left = Path(done.stdout.strip())
    assert left.name.startswith(TEMP_PREFIX)
    assert (left / "weights.txt").read_text() == "partial"  # the debris is there ...
    second = fence(tmp_path, 2)
    assert second.latest() == Checkpoint(10, 1, first.path(10))  # ... and is never read
    assert not first.path(20).exists()


def test_a_folder_without_a_valid_marker_is_not_complete(tmp_path: Path) -> None:
    first = fence(tmp_path, 1)
    fake = first.path(99)
    fake.mkdir(parents=True)
    (fake / "weights.txt").write_text("copied by hand")
    assert first.latest() is None
    (fake / MARKER).write_text('{"attempt": 2, "step": 99}')  # names another attempt
    assert first.latest() is None
    (fake / MARKER).write_text("not json")
    assert first.latest() is None


def test_concurrent_writers_of_one_step_exactly_one_wins(tmp_path: Path) -> None:
    writers = 6
    barrier = threading.Barrier(writers)
    results: dict[int, str] = {}

    def write(index: int) -> None:
        fenced = fence(tmp_path, 1)
        try:
            with fenced.save(7) as folder:
                (folder / "weights.txt").write_text(f"writer-{index}" * 1000)
                barrier.wait(timeout=30)  # every writer has its files; now all commit at once
            results[index] = "won"
        except CheckpointExists:
            results[index] = "lost"

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results.values()) == ["lost"] * (writers - 1) + ["won"]
    winner = next(i for i, r in results.items() if r == "won")
    final = fence(tmp_path, 1).path(7)
    assert (final / "weights.txt").read_text() == f"writer-{winner}" * 1000
    assert [p.name for p in final.parent.iterdir()] == ["step-7"]  # the losers cleaned up


def test_a_process_of_one_attempt_refuses_to_write_for_another(tmp_path: Path) -> None:
    stale = CheckpointFence(tmp_path / JOB, 1, environ=env(2))
    with pytest.raises(FencedWrite, match="attempt 2 of job train-x7k2p"), stale.save(5):
        pytest.fail("must not run")  # pragma: no cover
    assert not (tmp_path / JOB / "attempt-1").exists()


def test_check_write_refuses_other_attempts_and_complete_checkpoints(tmp_path: Path) -> None:
    save(fence(tmp_path, 1), 10, "a1")
    second = fence(tmp_path, 2)
    save(second, 20, "a2")
    root = tmp_path / JOB
    with pytest.raises(FencedWrite, match="never into"):
        second.check_write(root / "attempt-1" / "step-10" / "weights.txt")
    with pytest.raises(FencedWrite, match="never into"):
        second.check_write(root / "attempt-1" / "metrics.json")
    with pytest.raises(FencedWrite, match="never into"):
        second.check_write(root / "notes.txt")
    with pytest.raises(FencedWrite, match="is a complete checkpoint"):
        second.check_write(root / "attempt-2" / "step-20" / "weights.txt")
    assert second.check_write(root / "attempt-2" / "metrics.json") == (
        root / "attempt-2" / "metrics.json"
    )
    assert second.check_write(tmp_path / "elsewhere.txt") == tmp_path / "elsewhere.txt"


def test_outside_a_job_a_manual_fence_is_used(tmp_path: Path) -> None:
    manual = checkpoints(tmp_path, environ={})
    assert (manual.root, manual.attempt) == (tmp_path / "manual", 1)
    named = checkpoints(tmp_path, job="mine", attempt=4, prefix="epoch", environ={})
    save(named, 3, "e3")
    assert named.latest() == Checkpoint(3, 4, tmp_path / "mine" / "attempt-4" / "epoch-3")


@pytest.mark.parametrize("step", [-1, True, 1.5, "3"])
def test_steps_are_whole_numbers(tmp_path: Path, step: object) -> None:
    with pytest.raises(ValueError, match="whole number"):
        fence(tmp_path, 1).path(step)  # type: ignore[arg-type]


def test_invalid_fences_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="numbered from 1"):
        CheckpointFence(tmp_path, 0)
    with pytest.raises(ValueError, match="prefix"):
        CheckpointFence(tmp_path, 1, prefix="../x")

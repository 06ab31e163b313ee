"""The status chain (sacct -> squeue -> jobcomp) on recorded outputs, through a fake runner
at the adapter's own seam (``transport.Runner``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.adapters.slurm.native import Source
from dispatch.adapters.slurm.status import StatusReader
from dispatch.adapters.slurm.transport import CommandResult, LocalTransport, Transport
from dispatch.model import SchedulerUnavailable
from tests.slurm import realslurm
from tests.slurm.test_probe import facts

RECORDED = Path(__file__).parent / "recorded"


class RecordedRunner:
    """Answers each Slurm tool with a recorded output; remembers what it was asked."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        self.transport: Transport = LocalTransport()
        self.answers = answers
        self.asked: list[list[str]] = []

    async def run(self, argv: Sequence[str], *, stdin: str | None = None) -> CommandResult:
        self.asked.append(list(argv))
        code, text = self.answers[argv[0]]
        return CommandResult(tuple(argv), code, text, "" if code == 0 else "error")


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def test_without_accounting_squeue_then_jobcomp_once_each_for_all_jobs() -> None:
    squeue = recorded("squeue-22.05.json")
    forgotten = "\n".join(
        line for line in recorded("jobcomp-22.05.txt").splitlines() if "JobId=32001 " in line
    ).replace("JobId=32001 ", "JobId=99001 ")
    runner = RecordedRunner({"squeue": (0, squeue), "grep": (0, forgotten)})
    reader = StatusReader(runner, facts(), "auto")
    snapshot = asyncio.run(reader.snapshot(["32000", "32004", "99001", "99002"]))
    assert snapshot.asked == (Source.SQUEUE, Source.JOBCOMP)
    assert [argv[0] for argv in runner.asked] == ["squeue", "grep"]
    assert runner.asked[1][2] == "^JobId=(99001|99002) "  # only the jobs squeue forgot
    assert {k: v.source for k, v in snapshot.jobs.items()} == {
        "32000": Source.SQUEUE,
        "32004": Source.SQUEUE,
        "99001": Source.JOBCOMP,
    }


def test_with_accounting_sacct_first() -> None:
    with_dbd = replace(
        facts(), config={**facts().config, "AccountingStorageType": "accounting_storage/slurmdbd"}
    )
    runner = RecordedRunner({"sacct": (0, recorded("sacct-handwritten-22.05.txt"))})
    snapshot = asyncio.run(StatusReader(runner, with_dbd, "auto").snapshot(["52003", "52001"]))
    assert snapshot.asked == (Source.SACCT,)
    assert runner.asked == [
        [
            "sacct",
            "--parsable2",
            "--noheader",
            "--format=JobID,JobName,State,ExitCode,DerivedExitCode,Reason,NodeList,Submit,Start,End,Comment",
            "--jobs=52001,52003",
        ]
    ]
    assert snapshot.jobs["52003"].steps[-1].state == "OUT_OF_MEMORY"


def test_a_controller_that_does_not_answer_is_unavailable() -> None:
    runner = RecordedRunner({"squeue": (1, "")})
    with pytest.raises(SchedulerUnavailable):
        asyncio.run(StatusReader(runner, facts(), "none").snapshot(["1"]))


def test_real_slurm_is_reported_missing_without_its_programs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv(realslurm.PREFIX_VARIABLE, raising=False)
    reason = realslurm.why_unavailable()
    assert reason is not None
    assert "slurmctld" in reason
    assert "install-slurm.sh" in reason


def test_a_prefix_without_a_slurm_build_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(realslurm.PREFIX_VARIABLE, str(tmp_path / "slurm-99.11"))
    reason = realslurm.why_unavailable()
    assert reason is not None
    assert f"DISPATCH_SLURM_PREFIX={tmp_path / 'slurm-99.11'} holds no Slurm build" in reason
    assert "build-slurm-from-source.sh" in reason
    assert realslurm.search_path().split(":")[:2] == [
        str(tmp_path / "slurm-99.11" / "bin"),
        str(tmp_path / "slurm-99.11" / "sbin"),
    ]


def test_an_id_that_is_not_a_number_is_never_looked_up_nor_found() -> None:
    runner = RecordedRunner({"squeue": (0, recorded("squeue-22.05.json"))})
    reader = StatusReader(runner, facts(), "auto")
    snapshot = asyncio.run(reader.snapshot(["job-1; rm -rf /", "32000"]))
    assert set(snapshot.jobs) == {"32000"}
    assert all("rm" not in " ".join(argv) for argv in runner.asked)
    alone = asyncio.run(reader.snapshot(["not-a-job"]))
    assert (alone.jobs, alone.asked) == ({}, ())


def test_with_accounting_a_pending_job_is_asked_to_squeue_too() -> None:
    """24.11's sacct keeps a held job's submission reason (None); squeue says JobHeldUser."""
    with_dbd = replace(
        facts("24.11"),
        config={**facts("24.11").config, "AccountingStorageType": "accounting_storage/slurmdbd"},
    )
    sacct = recorded("sacct-24.11.txt")
    ids = {line.split("|")[1]: line.split("|")[0] for line in sacct.splitlines()}
    held, done = ids["dispatch-held-a1"], ids["dispatch-ok-a1"]
    runner = RecordedRunner({"sacct": (0, sacct), "squeue": (0, recorded("squeue-24.11.json"))})
    reader = StatusReader(runner, with_dbd, "auto")
    snapshot = asyncio.run(reader.snapshot([held, done]))
    assert snapshot.asked == (Source.SACCT, Source.SQUEUE)
    assert runner.asked[1] == ["squeue", "--states=all", "--json=v0.0.42"]
    assert (snapshot.jobs[held].source, snapshot.jobs[held].reason) == (
        Source.SQUEUE,
        "JobHeldUser",
    )
    assert snapshot.jobs[done].source is Source.SACCT
    alone = asyncio.run(reader.snapshot([done]))
    assert alone.asked == (Source.SACCT,)  # an ended job: one command

"""Parsers on outputs recorded from Slurm 22.05 and on the 24.05 JSON shape (see recorded/README.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dispatch.adapters.slurm.native import ExitStatus, SlurmJob, Source, expand_hostlist
from dispatch.adapters.slurm.output import parse_batch_output
from dispatch.adapters.slurm.parsers import (
    SlurmOutputError,
    parse_jobcomp_output,
    parse_key_values,
    parse_sacct_output,
    parse_sbatch_output,
    parse_scontrol_jobs_output,
    parse_squeue_json_output,
    parse_squeue_names_output,
    squeue_json_version,
)
from dispatch.adapters.slurm.states import derive_outcome
from dispatch.model import Cause, State

RECORDED = Path(__file__).parent / "recorded"


def recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def by_name(jobs: list[SlurmJob]) -> dict[str, SlurmJob]:
    return {job.name: job for job in jobs}


def outcome_of(job: SlurmJob) -> tuple[State, Cause | None]:
    outcome = derive_outcome(job)
    return outcome.state, outcome.cause


#: What each recorded job must become, in every source that has it.
EXPECTED = {
    "dispatch-ok-a1": (State.SUCCEEDED, None),
    "dispatch-fail-a1": (State.FAILED, Cause.APP_ERROR),
    "dispatch-cancel-a1": (State.CANCELLED, Cause.CANCELLED),
    "dispatch-oom-a1": (State.FAILED, Cause.OUT_OF_MEMORY),
    "dispatch-timeout-a1": (State.FAILED, Cause.TIMEOUT),
    "dispatch-held-a1": (State.HELD, None),
    "dispatch-running-a1": (State.RUNNING, None),
}


@pytest.mark.parametrize("file", ["squeue-22.05.json", "squeue-24.05-v0.0.41.json"])
def test_squeue_json_of_both_versions_gives_the_same_outcomes(file: str) -> None:
    jobs = by_name(parse_squeue_json_output(recorded(file)))
    for name, expected in EXPECTED.items():
        assert outcome_of(jobs[name]) == expected, name
    assert all(job.source is Source.SQUEUE for job in jobs.values())


def test_squeue_json_v0_0_38_exit_codes_are_raw_wait_statuses() -> None:
    jobs = by_name(parse_squeue_json_output(recorded("squeue-22.05.json")))
    assert squeue_json_version(recorded("squeue-22.05.json")) == "openapi/v0.0.38"
    assert jobs["dispatch-fail-a1"].exit == ExitStatus(143, 0)  # 36608: srun killed by SIGTERM
    assert jobs["dispatch-fail-a1"].derived_exit == ExitStatus(3, 0)  # 768: the task's exit 3
    assert jobs["dispatch-oom-a1"].derived_exit == ExitStatus(0, 125)  # 253: SIG_OOM
    assert jobs["dispatch-cancel-a1"].exit == ExitStatus(0, 15)
    assert jobs["dispatch-fail-a1"].nodes == "xn[1-2]"
    assert jobs["dispatch-ok-a1"].start_time.endswith("Z")


def test_squeue_json_v0_0_41_lists_states_and_nests_numbers() -> None:
    text = recorded("squeue-24.05-v0.0.41.json")
    jobs = by_name(parse_squeue_json_output(text))
    assert squeue_json_version(text) == "data_parser/v0.0.41"
    assert jobs["dispatch-fail-a1"].derived_exit == ExitStatus(3, 0)
    assert jobs["dispatch-oom-a1"].derived_exit == ExitStatus(0, 125)
    assert jobs["dispatch-cancel-a1"].comment == "dispatch-cancel:alice"
    # the base state comes first even when a flag is listed before it
    completing = jobs["dispatch-completing-a1"]
    assert completing.states == ("FAILED", "COMPLETING")
    assert outcome_of(completing) == (State.RUNNING, None)
    assert outcome_of(jobs["dispatch-requeued-a1"]) == (State.FAILED, Cause.UNPLANNED_RECOVERY)
    assert outcome_of(jobs["dispatch-preempted-a1"]) == (State.FAILED, Cause.PREEMPTED)
    assert outcome_of(jobs["dispatch-nodefail-a1"]) == (State.FAILED, Cause.NODE_LOST)


def test_cancel_comment_names_the_actor() -> None:
    jobs = parse_squeue_json_output(recorded("squeue-22.05.json"))
    through_dispatch = next(j for j in jobs if j.comment.startswith("dispatch-cancel:"))
    assert "by alice" in derive_outcome(through_dispatch).summary
    outside = by_name(jobs)["dispatch-cancel-a1"]
    assert "outside dispatch" in derive_outcome(outside).summary


def test_scontrol_show_job_one_line_per_job() -> None:
    jobs = by_name(parse_scontrol_jobs_output(recorded("scontrol-show-job-22.05.txt")))
    for name, expected in EXPECTED.items():
        if name != "dispatch-oom-a1":  # scontrol shows FAILED 1:0 and no derived code
            assert outcome_of(jobs[name]) == expected, name
    assert jobs["dispatch-fail-a1"].batch_host == "xn1"
    assert jobs["dispatch-held-a1"].reason == "JobHeldUser"
    assert jobs["dispatch-oom-a1"].exit == ExitStatus(1, 0)


def test_scontrol_oom_is_found_in_the_batch_output() -> None:
    jobs = by_name(parse_scontrol_jobs_output(recorded("scontrol-show-job-22.05.txt")))
    output = parse_batch_output(recorded("batch-output-oom.txt"))
    outcome = derive_outcome(jobs["dispatch-oom-a1"], output)
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.OUT_OF_MEMORY)
    assert outcome.first_failure is not None
    assert outcome.first_failure.where == "xn2"


def test_jobcomp_file() -> None:
    jobs = by_name(parse_jobcomp_output(recorded("jobcomp-22.05.txt")))
    for name in ("dispatch-ok-a1", "dispatch-fail-a1", "dispatch-oom-a1", "dispatch-timeout-a1"):
        assert outcome_of(jobs[name]) == EXPECTED[name], name
    assert jobs["dispatch-oom-a1"].derived_exit == ExitStatus(0, 125)
    assert jobs["dispatch-timeout-a1"].exit == ExitStatus(0, 0)  # jobcomp writes 0:0 here
    assert all(job.source is Source.JOBCOMP for job in jobs.values())


#: NODE_FAIL (node set DOWN under a running job) and PREEMPTED (a job of a higher
#: PriorityTier partition) as Slurm 22.05 itself reports them, in every source without sacct.
SCHEDULER_ENDS = {
    "dispatch-nodefail-x1-a1": (State.FAILED, Cause.NODE_LOST),
    "dispatch-preempted-x1-a1": (State.FAILED, Cause.PREEMPTED),
}


@pytest.mark.parametrize(
    ("file", "parse"),
    [
        ("squeue-node-fail-preempted-22.05.json", parse_squeue_json_output),
        ("scontrol-show-job-node-fail-preempted-22.05.txt", parse_scontrol_jobs_output),
        ("jobcomp-node-fail-preempted-22.05.txt", parse_jobcomp_output),
    ],
)
def test_recorded_node_failure_and_preemption(
    file: str, parse: Callable[[str], list[SlurmJob]]
) -> None:
    jobs = by_name(parse(recorded(file)))
    for name, expected in SCHEDULER_ENDS.items():
        assert outcome_of(jobs[name]) == expected, name
    assert jobs["dispatch-nodefail-x1-a1"].states[0] == "NODE_FAIL"
    assert jobs["dispatch-preempted-x1-a1"].states[0] == "PREEMPTED"  # not CANCELLED


def test_node_failure_names_the_lost_node_from_the_batch_output() -> None:
    jobs = by_name(parse_squeue_json_output(recorded("squeue-node-fail-preempted-22.05.json")))
    output = parse_batch_output(recorded("batch-output-node-fail.txt"))
    assert [(n.node, n.line) for n in output.node_failures] == [
        ("xn2", "srun: error: Node failure on xn2")
    ]
    outcome = derive_outcome(jobs["dispatch-nodefail-x1-a1"], output)
    assert outcome.cause is Cause.NODE_LOST
    assert outcome.first_failure is not None
    assert (outcome.first_failure.where, outcome.first_failure.node) == ("xn2", 1)
    assert outcome.summary.endswith("NODE_FAIL: a node of the allocation failed (xn2)")
    # a preemption kills every task; no node failed, so none is named as lost
    preempted = parse_batch_output(recorded("batch-output-preempted.txt"))
    assert preempted.node_failures == ()
    assert "(xn" not in derive_outcome(jobs["dispatch-preempted-x1-a1"], preempted).summary


def test_sacct_jobs_with_steps() -> None:
    jobs = by_name(parse_sacct_output(recorded("sacct-handwritten-22.05.txt")))
    assert set(jobs) == {
        "dispatch-ok-a1",
        "dispatch-fail-a1",
        "dispatch-cancel-a1",
        "dispatch-oom-a1",
        "dispatch-timeout-a1",
        "dispatch-held-a1",
    }
    for name, job in jobs.items():
        assert outcome_of(job) == EXPECTED[name], name
    oom = jobs["dispatch-oom-a1"]
    assert [s.state for s in oom.steps] == ["FAILED", "OUT_OF_MEMORY"]
    assert jobs["dispatch-cancel-a1"].cancelled_by == "0"
    assert "uid 0" in derive_outcome(jobs["dispatch-cancel-a1"]).summary
    failure = derive_outcome(jobs["dispatch-fail-a1"]).first_failure
    assert failure is not None
    assert failure.exit_code == 3
    assert jobs["dispatch-held-a1"].nodes == ""


def test_batch_output_first_failure_is_not_the_collateral_kill() -> None:
    output = parse_batch_output(recorded("batch-output-app-error.txt"))
    first = output.first_failure()
    assert first is not None
    assert (first.node, first.task, first.exit_code) == ("xn2", 1, 3)
    assert [f.signal for f in output.failures] == [None, 15]
    assert not output.out_of_memory


def test_batch_output_task_ranges_and_start_failures() -> None:
    output = parse_batch_output(
        "srun: error: n2: tasks 2-3: Exited with exit code 127\n"
        "srun: error: n1: tasks [0-1]: Terminated\n"
    )
    assert [(f.node, f.task, f.exit_code) for f in output.failures[:2]] == [
        ("n2", 2, 127),
        ("n2", 3, 127),
    ]
    assert [f.task for f in output.failures[2:]] == [0, 1]
    assert output.could_not_start


def test_sbatch_and_squeue_name_outputs() -> None:
    assert parse_sbatch_output(recorded("sbatch-parsable-22.05.txt")) == "32009"
    assert parse_sbatch_output("123;other-cluster\n") == "123"
    with pytest.raises(SlurmOutputError):
        parse_sbatch_output("sbatch: error: Batch job submission failed\n")
    jobs = parse_squeue_names_output("32000|dispatch-x-a1|COMPLETED|None\n")
    assert (jobs[0].job_id, jobs[0].state) == ("32000", "COMPLETED")
    with pytest.raises(SlurmOutputError):
        parse_squeue_names_output("JOBID NAME\n")


def test_squeue_json_that_is_not_json_is_an_error() -> None:
    with pytest.raises(SlurmOutputError):
        parse_squeue_json_output("squeue: error: invalid option")
    with pytest.raises(SlurmOutputError):
        parse_squeue_json_output('{"meta": {}}')


def test_key_values_keep_spaces_inside_values() -> None:
    fields = parse_key_values("NodeName=n1 OS=Linux 6.1 #1 SMP  RealMemory=4000 Gres=(null)")
    assert fields == {
        "NodeName": "n1",
        "OS": "Linux 6.1 #1 SMP",
        "RealMemory": "4000",
        "Gres": "(null)",
    }


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("xn[1-2]", ["xn1", "xn2"]),
        ("gpu[01-03,07],cpu1", ["gpu01", "gpu02", "gpu03", "gpu07", "cpu1"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("", []),
        ("(null)", []),
    ],
)
def test_expand_hostlist(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names

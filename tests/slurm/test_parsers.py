"""Parsers on outputs recorded from Slurm 22.05 and 24.11 (see recorded/README.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


#: What each recorded job must become, in every source that has it (22.05 and 24.11).
EXPECTED = {
    "dispatch-ok-a1": (State.SUCCEEDED, None),
    "dispatch-fail-a1": (State.FAILED, Cause.APP_ERROR),
    "dispatch-cancel-a1": (State.CANCELLED, Cause.CANCELLED),
    "dispatch-oom-a1": (State.FAILED, Cause.OUT_OF_MEMORY),
    "dispatch-timeout-a1": (State.FAILED, Cause.TIMEOUT),
    "dispatch-held-a1": (State.HELD, None),
    "dispatch-running-a1": (State.RUNNING, None),
}
#: Recorded from 24.11 only, in the same files: the ends the scheduler imposes, and the batch
#: step itself killed for memory (the job OUT_OF_MEMORY, not FAILED).
EXPECTED_24_11 = {
    **EXPECTED,
    "dispatch-nodefail-a1": (State.FAILED, Cause.NODE_LOST),
    "dispatch-preempted-a1": (State.FAILED, Cause.PREEMPTED),
    "dispatch-batchoom-a1": (State.FAILED, Cause.OUT_OF_MEMORY),
    "dispatch-run-a1": (State.CANCELLED, Cause.CANCELLED),
}
#: Slurm 24.11's squeue --json in each data_parser version it offers, and scontrol --json
#: (the same job records): one parser, the same jobs.
JSON_24_11 = {
    "squeue-24.11.json": "v0.0.42",
    "squeue-24.11-v0.0.41.json": "v0.0.41",
    "squeue-24.11-v0.0.40.json": "v0.0.40",
    "scontrol-show-job-24.11.json": "v0.0.42",
}


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("squeue-22.05.json", EXPECTED),
        *((file, EXPECTED_24_11) for file in JSON_24_11),
    ],
)
def test_squeue_json_of_both_versions_gives_the_same_outcomes(
    file: str, expected: dict[str, tuple[State, Cause | None]]
) -> None:
    jobs = by_name(parse_squeue_json_output(recorded(file)))
    for name, outcome in expected.items():
        assert outcome_of(jobs[name]) == outcome, name
    assert all(job.source is Source.SQUEUE for job in jobs.values())


def test_squeue_json_v0_0_38_exit_codes_are_raw_wait_statuses() -> None:
    jobs = by_name(parse_squeue_json_output(recorded("squeue-22.05.json")))
    assert squeue_json_version(recorded("squeue-22.05.json")) == "v0.0.38"  # openapi/v0.0.38
    assert jobs["dispatch-fail-a1"].exit == ExitStatus(143, 0)  # 36608: srun killed by SIGTERM
    assert jobs["dispatch-fail-a1"].derived_exit == ExitStatus(3, 0)  # 768: the task's exit 3
    assert jobs["dispatch-oom-a1"].derived_exit == ExitStatus(0, 125)  # 253: SIG_OOM
    assert jobs["dispatch-cancel-a1"].exit == ExitStatus(0, 15)
    assert jobs["dispatch-fail-a1"].nodes == "xn[1-2]"
    assert jobs["dispatch-ok-a1"].start_time.endswith("Z")


@pytest.mark.parametrize(("file", "version"), JSON_24_11.items())
def test_squeue_json_of_24_11_lists_states_and_nests_numbers(file: str, version: str) -> None:
    text = recorded(file)
    jobs = by_name(parse_squeue_json_output(text))
    assert squeue_json_version(text) == version  # meta.plugin.data_parser data_parser/v0.0.4x
    assert jobs["dispatch-fail-a1"].states == ("FAILED",)  # a list of one in the JSON
    assert jobs["dispatch-fail-a1"].exit == ExitStatus(143, 0)
    assert jobs["dispatch-fail-a1"].derived_exit == ExitStatus(3, 0)
    # {status: [SIGNALED], return_code: {set: false}, signal: {id: {number: 125}}}
    assert jobs["dispatch-oom-a1"].derived_exit == ExitStatus(0, 125)
    assert jobs["dispatch-batchoom-a1"].states == ("OUT_OF_MEMORY",)
    assert jobs["dispatch-batchoom-a1"].exit == ExitStatus(0, 125)
    assert jobs["dispatch-nodefail-a1"].reason == "NodeDown"
    assert jobs["dispatch-run-a1"].comment == "dispatch-cancel:alice"
    assert jobs["dispatch-fail-a1"].batch_host == "xn1"
    assert jobs["dispatch-held-a1"].reason == "JobHeldUser"
    assert jobs["dispatch-ok-a1"].start_time.endswith("Z")
    assert jobs["dispatch-held-a1"].start_time == ""  # {set: false}


def test_the_three_formats_of_24_11_read_alike() -> None:
    def fields(file: str) -> list[tuple[object, ...]]:
        return [
            (j.job_id, j.name, j.states, j.reason, j.exit, j.derived_exit, j.nodes, j.end_time)
            for j in parse_squeue_json_output(recorded(file))
        ]

    newest = fields("squeue-24.11.json")
    assert len(newest) == 12
    assert all(fields(file) == newest for file in JSON_24_11)


def test_a_json_format_dispatch_does_not_read_is_refused_naming_both() -> None:
    text = recorded("squeue-24.11.json").replace("data_parser\\/v0.0.42", "data_parser\\/v0.0.43")
    assert squeue_json_version(text) == "v0.0.43"
    with pytest.raises(SlurmOutputError) as refused:
        parse_squeue_json_output(text)
    message = str(refused.value)
    assert message.startswith("Slurm printed JSON format data_parser v0.0.43; dispatch reads ")
    assert "v0.0.38 (Slurm 22.05)" in message and "v0.0.42 (Slurm 24.11 to 26.05)" in message


def test_cancel_comment_names_the_actor() -> None:
    jobs = parse_squeue_json_output(recorded("squeue-22.05.json"))
    through_dispatch = next(j for j in jobs if j.comment.startswith("dispatch-cancel:"))
    assert "by alice" in derive_outcome(through_dispatch).summary
    outside = by_name(jobs)["dispatch-cancel-a1"]
    assert "outside dispatch" in derive_outcome(outside).summary


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("scontrol-show-job-22.05.txt", EXPECTED),
        ("scontrol-show-job-24.11.txt", EXPECTED_24_11),
    ],
)
def test_scontrol_show_job_one_line_per_job(
    file: str, expected: dict[str, tuple[State, Cause | None]]
) -> None:
    jobs = by_name(parse_scontrol_jobs_output(recorded(file)))
    for name, outcome in expected.items():
        if name != "dispatch-oom-a1":  # scontrol shows FAILED 1:0 and no derived code
            assert outcome_of(jobs[name]) == outcome, name
    assert jobs["dispatch-fail-a1"].batch_host == "xn1"
    assert jobs["dispatch-held-a1"].reason == "JobHeldUser"
    assert jobs["dispatch-oom-a1"].exit == ExitStatus(1, 0)


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_scontrol_oom_is_found_in_the_batch_output(version: str) -> None:
    jobs = by_name(parse_scontrol_jobs_output(recorded(f"scontrol-show-job-{version}.txt")))
    oom = "batch-output-oom.txt" if version == "22.05" else "batch-output-oom-24.11.txt"
    outcome = derive_outcome(jobs["dispatch-oom-a1"], parse_batch_output(recorded(oom)))
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.OUT_OF_MEMORY)
    assert outcome.first_failure is not None
    assert outcome.first_failure.where == ("xn2" if version == "22.05" else "xn1")


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_jobcomp_file(version: str) -> None:
    jobs = by_name(parse_jobcomp_output(recorded(f"jobcomp-{version}.txt")))
    for name in ("dispatch-ok-a1", "dispatch-fail-a1", "dispatch-oom-a1", "dispatch-timeout-a1"):
        assert outcome_of(jobs[name]) == EXPECTED[name], name
    assert jobs["dispatch-oom-a1"].derived_exit == ExitStatus(0, 125)
    assert jobs["dispatch-timeout-a1"].exit == ExitStatus(0, 0)  # jobcomp writes 0:0 here
    assert all(job.source is Source.JOBCOMP for job in jobs.values())


def test_jobcomp_file_of_24_11_has_the_ends_the_scheduler_imposes() -> None:
    jobs = by_name(parse_jobcomp_output(recorded("jobcomp-24.11.txt")))
    for name in ("dispatch-nodefail-a1", "dispatch-preempted-a1", "dispatch-batchoom-a1"):
        assert outcome_of(jobs[name]) == EXPECTED_24_11[name], name
    assert jobs["dispatch-batchoom-a1"].exit == ExitStatus(0, 125)


#: NODE_FAIL (node set DOWN under a running job) and PREEMPTED (a job of a higher
#: PriorityTier partition) as Slurm itself reports them, in every source without sacct.
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
        ("squeue-24.11.json", parse_squeue_json_output),
        ("scontrol-show-job-24.11.txt", parse_scontrol_jobs_output),
        ("jobcomp-24.11.txt", parse_jobcomp_output),
    ],
)
def test_recorded_node_failure_and_preemption(
    file: str, parse: Callable[[str], list[SlurmJob]]
) -> None:
    # the 24.11 jobs are named without the -x1 of the 22.05 recording
    jobs = {name.replace("-x1-", "-"): job for name, job in by_name(parse(recorded(file))).items()}
    for name, expected in SCHEDULER_ENDS.items():
        assert outcome_of(jobs[name.replace("-x1-", "-")]) == expected, name
    assert jobs["dispatch-nodefail-a1"].states[0] == "NODE_FAIL"
    assert jobs["dispatch-preempted-a1"].states[0] == "PREEMPTED"  # not CANCELLED


@pytest.mark.parametrize(
    ("squeue", "node_failure", "preemption", "name"),
    [
        (
            "squeue-node-fail-preempted-22.05.json",
            "batch-output-node-fail.txt",
            "batch-output-preempted.txt",
            "dispatch-{}-x1-a1",
        ),
        (
            "squeue-24.11.json",
            "batch-output-nodefail-24.11.txt",
            "batch-output-preempted-24.11.txt",
            "dispatch-{}-a1",
        ),
    ],
)
def test_node_failure_names_the_lost_node_from_the_batch_output(
    squeue: str, node_failure: str, preemption: str, name: str
) -> None:
    jobs = by_name(parse_squeue_json_output(recorded(squeue)))
    output = parse_batch_output(recorded(node_failure))
    assert [(n.node, n.line) for n in output.node_failures] == [
        ("xn2", "srun: error: Node failure on xn2")
    ]
    outcome = derive_outcome(jobs[name.format("nodefail")], output)
    assert outcome.cause is Cause.NODE_LOST
    assert outcome.first_failure is not None
    assert (outcome.first_failure.where, outcome.first_failure.node) == ("xn2", 1)
    assert outcome.summary.endswith("NODE_FAIL: a node of the allocation failed (xn2)")
    # a preemption kills every task; no node failed, so none is named as lost
    preempted = parse_batch_output(recorded(preemption))
    assert preempted.node_failures == ()
    assert "(xn" not in derive_outcome(jobs[name.format("preempted")], preempted).summary


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


def test_sacct_of_24_11_recorded_with_slurmdbd() -> None:
    jobs = by_name(parse_sacct_output(recorded("sacct-24.11.txt")))
    for name, expected in EXPECTED_24_11.items():
        if name != "dispatch-held-a1":
            assert outcome_of(jobs[name]) == expected, name
    # the database keeps the reason of the submission: a held job is PENDING, reason None
    # (the status reader asks squeue about pending jobs, test_status.py)
    held = jobs["dispatch-held-a1"]
    assert (held.state, held.reason, outcome_of(held)) == ("PENDING", "None", (State.QUEUED, None))
    oom = jobs["dispatch-oom-a1"]
    assert [(s.step_id.split(".")[1], s.state) for s in oom.steps] == [
        ("batch", "FAILED"),
        ("0", "OUT_OF_MEMORY"),
    ]
    assert jobs["dispatch-cancel-a1"].cancelled_by == "0"
    assert "by alice (through dispatch)" in derive_outcome(jobs["dispatch-run-a1"]).summary
    failure = derive_outcome(jobs["dispatch-fail-a1"]).first_failure
    assert failure is not None and failure.exit_code == 3


def test_sacct_json_of_24_11_agrees_with_the_parsable_lines() -> None:
    """dispatch reads ``sacct --parsable2``; the JSON of the same jobs says the same."""
    parsed = {job.job_id: job for job in parse_sacct_output(recorded("sacct-24.11.txt"))}
    document = json.loads(recorded("sacct-24.11.json"))
    assert squeue_json_version(recorded("sacct-24.11.json")) == "v0.0.42"

    def exit_of(value: dict[str, Any]) -> ExitStatus:
        code = value["return_code"]["number"] if value["return_code"]["set"] else 0
        signal = value["signal"]["id"]["number"] if value["signal"]["id"]["set"] else 0
        return ExitStatus(code, signal)

    assert len(document["jobs"]) == len(parsed) == 12
    for raw in document["jobs"]:
        job = parsed[str(raw["job_id"])]
        assert (job.name, job.states) == (raw["name"], tuple(raw["state"]["current"]))
        assert job.derived_exit == exit_of(raw["derived_exit_code"])
        assert job.comment == raw["comment"]["job"]
        steps = [(s["step"]["id"], s["state"][0]) for s in raw["steps"]]
        assert steps == [(s.step_id, s.state) for s in job.steps]


@pytest.mark.parametrize("file", ["batch-output-app-error.txt", "batch-output-fail-24.11.txt"])
def test_batch_output_first_failure_is_not_the_collateral_kill(file: str) -> None:
    output = parse_batch_output(recorded(file))
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

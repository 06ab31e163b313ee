"""The native-state tables and the cause derivation, on records built directly."""

from __future__ import annotations

import pytest

from dispatch.adapters.slurm.native import BASE_STATE_NAMES, ExitStatus, SlurmJob, SlurmStep, Source
from dispatch.adapters.slurm.output import parse_batch_output
from dispatch.adapters.slurm.states import (
    BASE_STATES,
    FLAG_STATES,
    TERMINAL,
    derive_outcome,
    map_state,
)
from dispatch.model import TERMINAL_STATES, Cause, State

#: Every value of ``job_state`` in the v0.0.41 OpenAPI schema (Slurm 24.05, SchedMD/slurm
#: testsuite/python/data/openapi_specs/openapi_spec_v41.json, ``v0.0.41_job_state``); v0.0.42
#: (Slurm 24.11, src/plugins/data_parser/v0.0.42/parsers.c, the JOB_STATE flag array) has
#: the same names.
SCHEMA_JOB_STATES = [
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "LAUNCH_FAILED",
    "REQUEUED",
    "REQUEUE_HOLD",
    "SPECIAL_EXIT",
    "RESIZING",
    "CONFIGURING",
    "COMPLETING",
    "STOPPED",
    "RECONFIG_FAIL",
    "POWER_UP_NODE",
    "REVOKED",
    "REQUEUE_FED",
    "RESV_DEL_HOLD",
    "SIGNALING",
    "STAGE_OUT",
]


def job(*states: str, **fields: object) -> SlurmJob:
    return SlurmJob(job_id="7", name="dispatch-x-a1", states=states, source=Source.SQUEUE, **fields)  # type: ignore[arg-type]


def test_every_state_slurm_can_report_has_an_entry() -> None:
    assert set(BASE_STATES) == BASE_STATE_NAMES
    assert set(SCHEMA_JOB_STATES) == set(BASE_STATES) | set(FLAG_STATES)


def test_terminal_set_agrees_with_the_model() -> None:
    assert TERMINAL == TERMINAL_STATES


@pytest.mark.parametrize("name", SCHEMA_JOB_STATES)
def test_an_ended_entry_has_a_cause_and_a_live_one_has_none(name: str) -> None:
    mapped = BASE_STATES.get(name) or FLAG_STATES[name]
    if mapped.state in (State.FAILED, State.CANCELLED):
        assert mapped.cause is not None
    else:
        assert mapped.cause is None


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        (("FAILED", "COMPLETING"), State.RUNNING),  # not over until processes are gone
        (("CANCELLED", "COMPLETING"), State.RUNNING),
        (("PENDING", "REQUEUED"), State.FAILED),  # work would rerun inside the attempt
        (("PENDING", "CONFIGURING"), State.QUEUED),
        (("RUNNING", "UPDATE_DB"), State.RUNNING),  # an unlisted flag leaves the base in charge
    ],
)
def test_flags_decide_over_the_base_state(states: tuple[str, ...], expected: State) -> None:
    assert map_state(job(*states)).state is expected


def test_pending_with_a_hold_reason_is_held() -> None:
    assert map_state(job("PENDING", reason="JobHeldUser")).state is State.HELD
    assert map_state(job("PENDING", reason="JobHeldAdmin")).state is State.HELD
    assert map_state(job("PENDING", reason="Resources")).state is State.QUEUED


def test_an_unknown_state_is_never_reported_as_an_end() -> None:
    outcome = derive_outcome(job("WARPED"))
    assert outcome.state is State.RUNNING
    assert "WARPED" in outcome.summary


def test_a_flag_slurm_shows_as_the_state_is_known() -> None:
    # 22.05's squeue --json and scontrol name the flag alone while processes are cleaned up
    outcome = derive_outcome(job("COMPLETING", reason="NodeDown"))
    assert outcome.state is State.RUNNING
    assert outcome.summary.endswith("COMPLETING (NodeDown)")


def test_failed_with_an_oom_step_is_out_of_memory() -> None:
    by_derived = job("FAILED", exit=ExitStatus(1, 0), derived_exit=ExitStatus(0, 125))
    assert derive_outcome(by_derived).cause is Cause.OUT_OF_MEMORY
    by_step = job(
        "FAILED",
        exit=ExitStatus(1, 0),
        steps=(SlurmStep("7.0", "OUT_OF_MEMORY", ExitStatus(0, 125), "n2"),),
        nodes="n[1-2]",
    )
    outcome = derive_outcome(by_step)
    assert outcome.cause is Cause.OUT_OF_MEMORY
    assert outcome.first_failure is not None
    assert (outcome.first_failure.where, outcome.first_failure.node) == ("n2", 1)
    assert derive_outcome(job("OUT_OF_MEMORY")).cause is Cause.OUT_OF_MEMORY


def test_failed_for_a_command_that_could_not_start_is_a_start_failure() -> None:
    output = parse_batch_output("srun: error: n1: task 0: Exited with exit code 127\n")
    outcome = derive_outcome(job("FAILED", exit=ExitStatus(127, 0), nodes="n1"), output)
    assert outcome.cause is Cause.START_FAILURE
    launch = job("FAILED", reason="JobLaunchFailure")
    assert derive_outcome(launch).cause is Cause.START_FAILURE


def test_app_error_without_output_keeps_the_exit_code_but_names_no_node() -> None:
    outcome = derive_outcome(
        job("FAILED", exit=ExitStatus(143, 0), derived_exit=ExitStatus(3, 0), nodes="n[1-2]")
    )
    assert outcome.cause is Cause.APP_ERROR
    assert outcome.first_failure is not None
    assert (outcome.first_failure.exit_code, outcome.first_failure.node) == (3, None)


@pytest.mark.parametrize(
    ("state", "cause"),
    [
        ("TIMEOUT", Cause.TIMEOUT),
        ("DEADLINE", Cause.TIMEOUT),
        ("NODE_FAIL", Cause.NODE_LOST),
        ("BOOT_FAIL", Cause.NODE_LOST),
        ("PREEMPTED", Cause.PREEMPTED),
    ],
)
def test_scheduler_ends_are_not_app_errors(state: str, cause: Cause) -> None:
    outcome = derive_outcome(job(state, exit=ExitStatus(0, 15)))
    assert (outcome.state, outcome.cause) == (State.FAILED, cause)

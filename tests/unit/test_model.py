from __future__ import annotations

import pytest

from dispatch.model import (
    AttemptHandle,
    Capability,
    CapabilityReport,
    Cause,
    Evidence,
    ExecutionIdentity,
    Failure,
    Outcome,
    Reason,
    State,
    Unsupported,
)


def test_vocabulary_is_the_public_contract() -> None:
    assert [s.value for s in State] == [
        "pending",
        "held",
        "queued",
        "running",
        "succeeded",
        "failed",
        "cancelled",
    ]
    assert [c.value for c in Cause] == [
        "preempted",
        "node_lost",
        "out_of_memory",
        "timeout",
        "no_capacity",
        "start_failure",
        "app_error",
        "cancelled",
        "unplanned_recovery",
        "unknown",
    ]
    assert {s for s in State if s.is_terminal} == {State.SUCCEEDED, State.FAILED, State.CANCELLED}


def test_outcome_json_round_trip_with_plain_strings() -> None:
    outcome = Outcome(
        State.FAILED,
        Cause.OUT_OF_MEMORY,
        "rank 3 was OOM-killed",
        first_failure=Failure(rank=3, node=1, exit_code=137, where="pod x"),
        evidence=(Evidence("pod", "x/oom", 5.0, "OOMKilled", {"reason": "OOMKilled"}),),
    )
    raw = outcome.to_json()
    assert raw["state"] == "failed" and raw["cause"] == "out_of_memory"
    assert raw["firstFailure"]["rank"] == 3
    assert Outcome.from_json(raw) == outcome


@pytest.mark.parametrize(
    ("state", "cause"),
    [(State.SUCCEEDED, Cause.APP_ERROR), (State.FAILED, None), (State.CANCELLED, None)],
)
def test_outcomes_that_contradict_themselves_are_refused(state: State, cause: Cause | None) -> None:
    with pytest.raises(ValueError, match="cause"):
        Outcome(state, cause)


def test_identity_env_round_trip() -> None:
    identity = ExecutionIdentity("train-abc12", 2, "local")
    env = identity.env()
    assert env == {
        "DISPATCH_JOB": "train-abc12",
        "DISPATCH_ATTEMPT": "2",
        "DISPATCH_CLUSTER": "local",
    }
    assert ExecutionIdentity.from_env(env) == identity
    assert ExecutionIdentity.from_env({}) is None
    assert ExecutionIdentity.from_env({"DISPATCH_JOB": "x", "DISPATCH_ATTEMPT": "zero"}) is None


def test_weakened_identity_is_published() -> None:
    identity = ExecutionIdentity("j", 1, "prod", weakened="allowRankRestart: ...")
    assert ExecutionIdentity.from_env(identity.env()) == identity


def test_attempts_start_at_one() -> None:
    with pytest.raises(ValueError, match="from 1"):
        ExecutionIdentity("j", 0, "local")


def test_handle_json_round_trip() -> None:
    handle = AttemptHandle("j", 1, "prod", "j-a1", {"namespace": "ml"})
    assert AttemptHandle.from_json(handle.to_json()) == handle


def test_capability_report_refusals() -> None:
    report = CapabilityReport(
        cluster="prod",
        adapter="kubeflow",
        answers=(Capability("ProcsPerNode", False, "the runtime has no mlPolicy.torch"),),
        refusals=(Reason("restart-policy", "absent"),),
    )
    assert not report.accepted
    assert report.to_json()["capabilities"]["ProcsPerNode"]["supported"] is False
    with pytest.raises(Unsupported) as caught:
        report.raise_if_refused()
    assert caught.value.rules == ("restart-policy",)

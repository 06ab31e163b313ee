"""dispatch.identity(): the identity a rank reads from its environment."""

from __future__ import annotations

import os
import subprocess
import sys

import dispatch
from dispatch.injob import Identity, identity

JOB = {"DISPATCH_JOB": "train-x7k2p", "DISPATCH_ATTEMPT": "3", "DISPATCH_CLUSTER": "prod"}


def test_outside_a_job_the_value_says_so() -> None:
    me = identity({})
    assert not me.in_job
    assert (me.job_id, me.attempt, me.cluster, me.weakened) == (None, None, None, None)
    assert me.is_primary
    assert str(me) == "not in a dispatch job"


def test_a_rank_started_by_dispatch_reads_job_attempt_and_ranks() -> None:
    me = identity(
        {**JOB, "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "2"}
    )
    assert me.in_job
    assert (me.job_id, me.attempt, me.cluster) == ("train-x7k2p", 3, "prod")
    assert (me.rank, me.local_rank, me.world_size, me.local_world_size) == (5, 1, 8, 2)
    assert not me.is_primary
    assert not me.restarted
    assert me.execution == dispatch.ExecutionIdentity("train-x7k2p", 3, "prod")
    assert str(me) == "job train-x7k2p attempt 3 on prod, rank 5 of 8"


def test_a_node_process_before_torchrun_reads_the_pet_variables() -> None:
    me = identity({**JOB, "PET_NNODES": "4", "PET_NODE_RANK": "2", "PET_NPROC_PER_NODE": "8"})
    assert (me.nodes, me.node_rank, me.local_world_size) == (4, 2, 8)
    assert me.rank is None
    assert me.is_primary  # no rank known: a single process


def test_torchruns_group_rank_wins_over_the_node_variables() -> None:
    me = identity({"GROUP_RANK": "1", "PET_NODE_RANK": "0", "NODE_RANK": "0"})
    assert me.node_rank == 1


def test_a_weakened_identity_and_rank_failures_are_reported() -> None:
    reason = "allowRankRestart: the runtime's trainer job states backoffLimitPerIndex"
    me = identity({**JOB, "DISPATCH_IDENTITY_WEAKENED": reason, "DISPATCH_RANK_FAILURES": "2"})
    assert me.weakened == reason
    assert me.rank_failures == 2
    assert me.restarted
    assert str(me).endswith(f"(weakened identity: {reason})")
    # the downward API gives an empty value when the annotation is absent
    fresh = identity({**JOB, "DISPATCH_IDENTITY_WEAKENED": reason, "DISPATCH_RANK_FAILURES": ""})
    assert fresh.rank_failures is None
    assert not fresh.restarted


def test_malformed_values_read_as_unknown_never_raise() -> None:
    me = identity({"DISPATCH_JOB": "j", "DISPATCH_ATTEMPT": "0", "RANK": "-1", "WORLD_SIZE": "x"})
    assert me == Identity()
    assert identity({"DISPATCH_JOB": "j", "DISPATCH_ATTEMPT": "two"}).in_job is False


def test_identity_reads_the_process_environment_by_default() -> None:
    code = "import dispatch; me = dispatch.identity(); print(me.job_id, me.attempt, me.rank)"
    env = {**os.environ, **JOB, "RANK": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["train-x7k2p", "3", "0"]

"""Realistic records for the UI's tests and bench: jobs written through the ``Records``
contract exactly as a supervisor writes them (attempts, handles, outcomes with first
failures, evidence, decisions, requests), with times set job by job (``SetClock``).

``seed_job(records, clock, profile, ...)`` writes one job of a profile; ``seed_mix`` writes
many, spread over the last days, in a mix of states and causes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from dispatch.model import (
    AttemptHandle,
    Cause,
    Evidence,
    Failure,
    JobSpec,
    Outcome,
    State,
    parse_spec,
)
from dispatch.records import LogKind, Records

#: every profile ``seed_job`` knows, and how often ``seed_mix`` writes each (weights)
MIX: dict[str, int] = {
    "succeeded": 40,
    "app_error": 12,
    "preempted_then_succeeded": 10,
    "out_of_memory": 6,
    "node_lost": 3,
    "timeout": 3,
    "no_capacity": 2,
    "cancelled": 4,
    "running": 10,
    "queued": 5,
    "held": 2,
    "pending": 3,
}
CLUSTERS = ("local", "prod", "hpc")
USERS = ("alice", "bob", "chen", "dana")


class SetClock:
    """A clock whose time is set by the writer (the records read it for every write)."""

    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> float:
        return self.at

    async def sleep(self, seconds: float) -> None:
        self.at += seconds


def spec(name: str, cluster: str = "local", *, secret: bool = False) -> JobSpec:
    raw = {
        "name": name,
        "cluster": cluster,
        "nodes": 2,
        "procsPerNode": 2,
        "command": ["torchrun", "train.py"],
        "env": {"EPOCHS": "3", "WANDB_API_KEY": "plain-text-key-in-env"},
        "recovery": {
            "rules": [
                {"on": ["preempted", "node_lost"], "action": "retry", "limit": 3},
                {"on": ["app_error"], "action": "retry", "limit": 1},
            ],
            "unmatched": "fail",
        },
    }
    if secret:
        raw["secretEnv"] = {"HF_TOKEN": {"fromEnv": "HF_TOKEN"}}
    return parse_spec(raw)


def _decision(records: Records, job_id: str, action: str, attempt: int, reason: str) -> None:
    records.append_log(
        job_id,
        LogKind.DECISION,
        {"action": action, "attempt": attempt, "reason": reason, "owner": "seed-supervisor"},
    )


def _start(records: Records, clock: SetClock, job_id: str, n: int, *, run: bool = True) -> None:
    reason = "starting the first attempt" if n == 1 else f"retrying: starting attempt {n}"
    _decision(records, job_id, "start", n, reason)
    records.create_attempt(job_id, n)
    records.set_handle(job_id, n, AttemptHandle(job_id, n, "local", f"{job_id}/attempt-{n}"))
    records.set_job_status(job_id, State.QUEUED, None, f"attempt {n} queued")
    clock.at += 20
    records.add_evidence(
        job_id,
        n,
        [Evidence("workload", f"admitted-{n}", clock.at, "Kueue admitted the workload: quota")],
    )
    if run:
        clock.at += 10
        records.append_log(job_id, "attempt", {"attempt": n, "state": "running", "summary": ""})
        records.record_outcome(job_id, n, Outcome(State.RUNNING, summary="running"))
        records.set_job_status(job_id, State.RUNNING, None, f"attempt {n}: running")


def _end(
    records: Records,
    clock: SetClock,
    job_id: str,
    n: int,
    cause: Cause | None,
    summary: str,
    *,
    failure: Failure | None = None,
    evidence: Sequence[Evidence] = (),
) -> None:
    state = State.SUCCEEDED if cause is None else State.FAILED
    if cause is Cause.CANCELLED:
        state = State.CANCELLED
    records.add_evidence(job_id, n, evidence)
    records.record_outcome(job_id, n, Outcome(state, cause, summary, first_failure=failure))
    records.append_log(
        job_id,
        "attempt",
        {"attempt": n, "state": state.value, "cause": cause.value if cause else None,
         "summary": summary},
    )  # fmt: skip


def _rank_failure(clock: SetClock, rank: int, code: int) -> tuple[Failure, list[Evidence]]:
    failure = Failure(rank=rank, node=rank // 2, exit_code=code, at=clock.at,
                      where=f"pod train-node-{rank // 2}", message=f"exit code {code}")  # fmt: skip
    evidence = [
        Evidence("process", f"process-{r}", clock.at - (0 if r == rank else 1.5),
                 f"rank {r} (node {r // 2}) exited with code {code if r == rank else 143}",
                 {"rank": r, "node": r // 2, "exitCode": code if r == rank else 143})
        for r in range(4)
    ]  # fmt: skip
    evidence.append(
        Evidence("log", f"log-{rank}", clock.at, f"rank {rank}'s last 3 lines",
                 {"rank": rank, "lines": ["step 120 loss 2.31", "Traceback (most recent call last):",
                                          "ValueError: <script>alert(1)</script> bad batch"]})
    )  # fmt: skip
    return failure, evidence


def _finish(
    records: Records, job_id: str, n: int, state: State, cause: Cause | None, why: str
) -> None:
    _decision(records, job_id, "finish", n, why)
    records.set_job_status(job_id, state, cause, why)


def seed_job(
    records: Records,
    clock: SetClock,
    profile: str,
    *,
    name: str = "train",
    cluster: str = "local",
    user: str = "alice",
    secret: bool = False,
) -> str:
    """Write one job of ``profile`` (a key of ``MIX``) starting at ``clock.at``; its id."""
    job = records.create_job(
        spec(name, cluster, secret=secret),
        held_by=user if profile == "held" else None,
        environment={"PATH": "/usr/bin:/bin", "HOME": f"/home/{user}"},
        submitted_by=user,
    )
    job_id = job.id
    if profile in ("held", "pending"):
        return job_id
    clock.at += 2
    if profile == "queued":
        _start(records, clock, job_id, 1, run=False)
        return job_id
    _start(records, clock, job_id, 1)
    if profile == "running":
        return job_id
    clock.at += 600
    if profile == "succeeded":
        _end(records, clock, job_id, 1, None, "every rank exited 0")
        _finish(records, job_id, 1, State.SUCCEEDED, None, "attempt 1 succeeded")
    elif profile == "app_error":
        for n in (1, 2):
            failure, evidence = _rank_failure(clock, 1, 3)
            _end(records, clock, job_id, n, Cause.APP_ERROR, "rank 1 (node 0) exited with code 3",
                 failure=failure, evidence=evidence)  # fmt: skip
            if n == 1:
                _decision(records, job_id, "wait", 2, "attempt 1 ended app_error; rule 2 (retry on "
                          "app_error): retry 1 of 1, attempt 2 after backoff")  # fmt: skip
                clock.at += 30
                _start(records, clock, job_id, 2)
                clock.at += 300
        _finish(records, job_id, 2, State.FAILED, Cause.APP_ERROR,
                "attempt 2 ended app_error (rank 1 (node 0) exited with code 3); rule 2 (retry on "
                "app_error): retry limit 1 exhausted")  # fmt: skip
    elif profile == "preempted_then_succeeded":
        evicted = Evidence("workload", "evicted-1", clock.at,
                           "Kueue evicted the workload (Preempted): a higher priority workload")  # fmt: skip
        _end(records, clock, job_id, 1, Cause.PREEMPTED, "preempted by Kueue", evidence=[evicted])
        _decision(records, job_id, "start", 2, "attempt 1 ended preempted; rule 1 (retry on "
                  "preempted): retry 1 of 3, starting attempt 2")  # fmt: skip
        clock.at += 60
        _start(records, clock, job_id, 2)
        clock.at += 900
        _end(records, clock, job_id, 2, None, "every rank exited 0")
        _finish(records, job_id, 2, State.SUCCEEDED, None, "attempt 2 succeeded")
    elif profile in ("out_of_memory", "node_lost", "timeout", "no_capacity"):
        cause = Cause(profile)
        fact = Evidence("pod", f"{profile}-1", clock.at, f"{profile.replace('_', ' ')} on node 1",
                        {"rank": 2, "reason": profile})  # fmt: skip
        failure = Failure(rank=2, node=1, at=clock.at, message=f"{profile} on node 1")
        _end(records, clock, job_id, 1, cause, f"{profile.replace('_', ' ')} (rank 2)",
             failure=failure, evidence=[fact])  # fmt: skip
        _finish(
            records, job_id, 1, State.FAILED, cause, f"attempt 1 ended {profile}; unmatched: fail"
        )
    elif profile == "cancelled":
        records.request_cancel(job_id, user, "cancelled from the command line")
        clock.at += 5
        _end(records, clock, job_id, 1, Cause.CANCELLED, f"cancelled by {user}")
        _finish(records, job_id, 1, State.CANCELLED, Cause.CANCELLED, f"cancelled by {user}")
    else:
        raise ValueError(f"unknown profile {profile!r}")
    return job_id


@dataclass(frozen=True)
class Seeded:
    ids: list[str]
    profiles: dict[str, str]  # job id -> profile


def seed_mix(records: Records, clock: SetClock, jobs: int, *, days: float = 3.0,
             seed: int = 7) -> Seeded:  # fmt: skip
    """``jobs`` jobs of ``MIX``, created evenly over the ``days`` before ``clock.at``; open
    ones (running, queued, held, pending) are among the newest."""
    rng = random.Random(seed)
    now = clock.at
    names, weights = list(MIX), list(MIX.values())
    ids, profiles = [], {}
    for i in range(jobs):
        created = now - days * 86400 * (1 - i / max(jobs, 1))
        profile = rng.choices(names, weights)[0]
        if profile in ("running", "queued", "held", "pending") and i < jobs * 0.9:
            profile = "succeeded"
        clock.at = created
        job_id = seed_job(
            records, clock, profile, name=f"run{i % 50}", cluster=rng.choice(CLUSTERS),
            user=rng.choice(USERS),
        )  # fmt: skip
        ids.append(job_id)
        profiles[job_id] = profile
    clock.at = now
    return Seeded(ids, profiles)

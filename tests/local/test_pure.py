"""The pure parts: building launches and deriving causes from recorded facts."""

from __future__ import annotations

import signal
from typing import Any

from dispatch.adapters.local.causes import derive_outcome
from dispatch.adapters.local.launch import build_launch
from dispatch.model import Cause, Job, State, parse_spec


def _job(**fields: Any) -> Job:
    spec = {"name": "t", "nodes": 2, "procsPerNode": 2, "command": ["python", "a.py"], **fields}
    return Job("t-1", parse_spec(spec), 0.0)


def _launch(job: Job, path: str = "/usr/bin") -> Any:
    return build_launch(
        job,
        2,
        working_dir="/w",
        master_port=29500,
        inherited={"PATH": path},
        python_dir="/venv/bin",
    )


def test_torchrun_runs_once_per_node_with_the_pet_variables() -> None:
    launch = _launch(_job(command=["torchrun", "train.py"], args=["--lr", "1"]))
    assert launch.mode == "torchrun"
    assert [(p.node, p.rank, p.log) for p in launch.processes] == [
        (0, None, "logs/node-0.log"),
        (1, None, "logs/node-1.log"),
    ]
    env = launch.processes[1].env
    assert launch.processes[1].argv == ("torchrun", "train.py", "--lr", "1")
    assert (env["PET_NNODES"], env["PET_NODE_RANK"], env["PET_NPROC_PER_NODE"]) == ("2", "1", "2")
    assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("127.0.0.1", "29500")
    assert "RANK" not in env
    assert env["DISPATCH_ATTEMPT"] == "2" and env["DISPATCH_JOB"] == "t-1"


def test_torchrun_gets_the_omp_threads_it_would_set_unless_someone_set_them() -> None:
    # torchrun sets OMP_NUM_THREADS=1 for several processes per node, with a banner in every
    # node's log, when its environment lacks it; dispatch sets it first so there is no banner
    torchrun = {"command": ["torchrun", "train.py"]}
    assert _launch(_job(**torchrun)).processes[0].env["OMP_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in _launch(_job(**torchrun, procsPerNode=1)).processes[0].env
    mine = _job(**torchrun, env={"OMP_NUM_THREADS": "4"})
    assert _launch(mine).processes[0].env["OMP_NUM_THREADS"] == "4"
    inherited = build_launch(
        _job(**torchrun),
        1,
        working_dir="/w",
        master_port=29500,
        inherited={"PATH": "/usr/bin", "OMP_NUM_THREADS": "3"},
        python_dir="/venv/bin",
    )
    assert "OMP_NUM_THREADS" not in inherited.processes[0].env  # the caller's 3 is inherited


def test_per_rank_mode_sets_torch_variables_that_the_spec_cannot_override() -> None:
    launch = _launch(_job(env={"RANK": "9", "PATH": "/mine", "OMP_NUM_THREADS": "4"}))
    assert launch.mode == "per-rank"
    ranks = [(p.node, p.rank, p.local_rank) for p in launch.processes]
    assert ranks == [(0, 0, 0), (0, 1, 1), (1, 2, 0), (1, 3, 1)]
    env = launch.processes[2].env
    assert env["RANK"] == "2" and env["WORLD_SIZE"] == "4" and env["LOCAL_WORLD_SIZE"] == "2"
    assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "29500"
    assert env["PATH"] == "/mine" and env["OMP_NUM_THREADS"] == "4"  # defaults yield to spec


def test_interpreter_folder_goes_first_on_path() -> None:
    env = _launch(_job()).processes[0].env
    assert env["PATH"] == "/venv/bin:/usr/bin" and env["OMP_NUM_THREADS"] == "1"
    assert "PATH" not in _launch(_job(), path="/venv/bin:/usr/bin").processes[0].env


def _process(index: int, node: int, ended: float | None, **fields: Any) -> dict[str, Any]:
    return {
        "index": index,
        "node": node,
        "rank": index,
        "pid": 100 + index,
        "endedAt": ended,
        "exitCode": None,
        "signal": None,
        "stoppedBy": None,
        **fields,
    }


def _status(processes: list[dict[str, Any]], events: list[dict[str, Any]] | None = None) -> Any:
    return {"phase": "ended", "runnerPid": 1, "processes": processes, "events": events or []}


def test_first_failure_in_time_wins_and_stopped_peers_are_consequences() -> None:
    status = _status(
        [
            _process(0, 0, 12.0, signal=signal.SIGTERM, stoppedBy="dispatch"),
            _process(1, 0, 11.0, exitCode=7),
            _process(2, 1, 10.5, exitCode=1),
        ],
        [{"kind": "timeout", "at": 11.5, "limit": 60}],
    )
    outcome = derive_outcome(status, None, runner_alive=False, now=20.0)
    assert (outcome.cause, outcome.first_failure.rank) == (Cause.APP_ERROR, 2)  # type: ignore[union-attr]
    assert outcome.first_failure.exit_code == 1  # type: ignore[union-attr]


def test_a_crash_signal_is_an_application_error() -> None:
    status = _status([_process(0, 0, 10.0, signal=signal.SIGSEGV)])
    outcome = derive_outcome(status, None, runner_alive=False, now=20.0)
    assert outcome.cause is Cause.APP_ERROR and outcome.first_failure.signal == signal.SIGSEGV  # type: ignore[union-attr]


def test_an_exit_on_a_node_with_a_kernel_oom_kill_is_out_of_memory() -> None:
    # torchrun exits 1 after the kernel killed one of its workers
    status = _status(
        [_process(0, 0, 10.0, exitCode=1, rank=None)],
        [{"kind": "oom_kill", "node": 0, "count": 1, "at": 10.0}],
    )
    outcome = derive_outcome(status, None, runner_alive=False, now=20.0)
    assert outcome.cause is Cause.OUT_OF_MEMORY
    assert {e.kind for e in outcome.evidence} == {"process", "oom_kill"}


def test_a_runner_that_died_mid_attempt_means_node_lost_and_running_means_running() -> None:
    status = {**_status([_process(0, 0, None)]), "phase": "running"}
    assert derive_outcome(status, None, runner_alive=True, now=5.0).state is State.RUNNING
    lost = {"at": 6.0, "runnerPid": 1, "killed": [100]}
    outcome = derive_outcome(status, lost, runner_alive=False, now=7.0)
    assert (outcome.state, outcome.cause) == (State.FAILED, Cause.NODE_LOST)
    assert [e.key for e in outcome.evidence] == ["runner-lost"]


def test_success_needs_every_process_to_exit_zero() -> None:
    status = _status([_process(0, 0, 1.0, exitCode=0), _process(1, 0, 1.0, exitCode=0)])
    outcome = derive_outcome(status, None, runner_alive=False, now=2.0)
    assert outcome.state is State.SUCCEEDED and outcome.cause is None


def test_a_failure_recorded_before_the_runner_died_still_wins() -> None:
    status = {
        **_status([_process(0, 0, 3.0, exitCode=2), _process(1, 0, None, stoppedBy="dispatch")]),
        "phase": "stopping",
    }
    outcome = derive_outcome(status, {"at": 4.0, "killed": [101]}, runner_alive=False, now=9.0)
    assert (outcome.cause, outcome.first_failure.exit_code) == (Cause.APP_ERROR, 2)  # type: ignore[union-attr]

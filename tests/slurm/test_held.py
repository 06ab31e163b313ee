"""Submit held on the real two-node Slurm: the hold is dispatch's own (design note 0005,
"Hold at submit"), so nothing reaches Slurm until the release: no ``sbatch``, no job in
``squeue``. After ``release`` attempt 1 is one Slurm job that runs; a held job that is
cancelled ends ``cancelled`` with no attempt and no Slurm job.

The job is submitted through the real ``AsyncClient`` (its capability check asks the real
Slurm) and driven by the real ``Supervisor``, whose adapter records every command it runs.
"""

from __future__ import annotations

from pathlib import Path

from dispatch.api import AsyncClient, Environment
from dispatch.clock import SystemClock
from dispatch.config import ClusterConfig
from dispatch.model import Cause, State, parse_spec
from dispatch.supervise import Supervisor
from tests.slurm.conftest import run
from tests.slurm.realslurm import RealSlurm
from tests.slurm.test_real_slurm import RecordingRunner, recording_adapter

PRINT_ATTEMPT = 'echo "attempt=$DISPATCH_ATTEMPT node=$PET_NODE_RANK"'


def _setup(
    slurm_cluster: ClusterConfig, slurm_config_file: Path, tmp_path: Path
) -> tuple[AsyncClient, Supervisor, RecordingRunner]:
    env = Environment.load(config_path=slurm_config_file, state=tmp_path / "state")
    client = AsyncClient(env, background=False)
    slurm, runner = recording_adapter(slurm_cluster, tmp_path)
    supervisor = Supervisor(
        client.records, lambda _: slurm, SystemClock(), "held-test", poll_interval=0.5
    )
    return client, supervisor, runner


def _slurm_jobs(real_slurm: RealSlurm, job_id: str) -> list[str]:
    listed = real_slurm.run("squeue", "-h", "-t", "all", "-o", "%j %T").stdout.splitlines()
    return sorted(line for line in listed if line.startswith(f"dispatch-{job_id}-"))


def _commands(runner: RecordingRunner) -> set[str]:
    return {argv[0] for argv in runner.argvs}


def test_a_held_job_reaches_slurm_only_after_its_release(
    slurm_cluster: ClusterConfig, slurm_config_file: Path, real_slurm: RealSlurm, tmp_path: Path
) -> None:
    client, supervisor, runner = _setup(slurm_cluster, slurm_config_file, tmp_path)
    spec = parse_spec(
        {"name": "held", "cluster": "testslurm", "nodes": 2, "command": ["sh", "-c", PRINT_ATTEMPT]}
    )

    async def scenario() -> tuple[str, State, list[str], set[str], State]:
        submitted = await client.submit(spec, hold=True)
        for _ in range(3):
            await supervisor.step()
        held = await client.get(submitted.id)
        before = _slurm_jobs(real_slurm, submitted.id)
        commands = _commands(runner)
        released = await client.release(submitted.id)
        await supervisor.drive(submitted.id)
        return submitted.id, held.state, before, commands, released.state

    job_id, held_state, before, commands, released_state = run(scenario())
    assert held_state is State.HELD
    assert before == []
    assert "sbatch" not in commands  # nothing was submitted while held
    assert released_state is State.HELD  # until a supervisor starts attempt 1

    final = run(client.get(job_id))
    assert (final.state, final.cause) == (State.SUCCEEDED, None)
    assert [a.number for a in final.attempts] == [1]
    assert _slurm_jobs(real_slurm, job_id) == [f"dispatch-{job_id}-a1 COMPLETED"]
    sbatches = [argv for argv in runner.argvs if argv[0] == "sbatch"]
    assert len(sbatches) == 1
    assert final.decision is not None
    assert final.decision["action"] == "finish"
    client.close()


def test_a_held_job_cancelled_never_reaches_slurm(
    slurm_cluster: ClusterConfig, slurm_config_file: Path, real_slurm: RealSlurm, tmp_path: Path
) -> None:
    client, supervisor, runner = _setup(slurm_cluster, slurm_config_file, tmp_path)
    spec = parse_spec(
        {"name": "heldcancel", "cluster": "testslurm", "nodes": 1, "command": ["true"]}
    )

    async def scenario() -> str:
        submitted = await client.submit(spec, hold=True)
        await supervisor.step()
        await client.cancel(submitted.id, actor="alice", reason="not needed")
        await supervisor.drive(submitted.id)
        return submitted.id

    job_id = run(scenario())
    final = run(client.get(job_id))
    assert (final.state, final.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert final.attempts == ()
    assert final.cancel_requested_by == "alice"
    assert "no attempt was started" in final.summary
    assert _slurm_jobs(real_slurm, job_id) == []
    assert not {"sbatch", "scancel"} & _commands(runner)
    client.close()

"""The environment a job's ranks see is fixed at submit (docs/reference/job-spec.md,
"Environment"), whichever supervisor starts them; secret values reach the ranks only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.api.test_cli_local import SLEEPS, job_processes, wait_for

JOB = """
    name: envdump
    nodes: 1
    procsPerNode: 2
    inheritEnv: [FOO]
    env: {FROM_SPEC: "1"}
    secretEnv:
      TOKEN: {fromEnv: MY_TOKEN}
      FILED: {fromFile: token.txt}
    command: ["python", "main.py"]
"""
SCRIPT = """
    import json, os
    with open(f"env-{os.environ['DISPATCH_JOB']}-{os.environ['RANK']}.json", "w") as f:
        json.dump(dict(os.environ), f)
"""
#: differ between two jobs by design: their ids and the ports chosen at start
PER_JOB = {"DISPATCH_JOB", "DISPATCH_LOCAL_TAG", "MASTER_PORT", "PET_MASTER_PORT"}
SECRET = "s3cret-value-77"
FILE_SECRET = "from-a-file-88"


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dispatch", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def submitted(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return str(json.loads(result.stdout)["job"])


def wait_succeeded(job_id: str, env: dict[str, str]) -> None:
    def ended() -> str | None:
        state = json.loads(cli("status", job_id, "-o", "json", env=env).stdout)["state"]
        return state if state in ("succeeded", "failed", "cancelled") else None

    status = wait_for(ended)
    shown = cli("status", job_id, "-o", "json", env=env).stdout
    assert status == "succeeded", shown


def rank_env(folder: Path, job_id: str, rank: int) -> dict[str, str]:
    found = json.loads((folder / f"env-{job_id}-{rank}.json").read_text())
    return {k: v for k, v in found.items() if k not in PER_JOB}


def test_ranks_see_the_same_environment_with_or_without_a_running_supervisor(
    write_job, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("envdump", JOB, SCRIPT)
    (spec.parent / "token.txt").write_text(FILE_SECRET + "\n")
    plain = {k: v for k, v in os.environ.items() if k not in ("FOO", "BAR", "MY_TOKEN")}
    # a supervisor already runs, started from a shell without FOO
    holder = submitted(cli("submit", str(write_job("sleeps", SLEEPS)), "-o", "json", env=plain))
    wait_for(lambda: len(job_processes(holder)) == 2)
    submitter = {**plain, "FOO": "bar", "BAR": "not-named", "MY_TOKEN": SECRET}
    try:
        busy = submitted(cli("submit", str(spec), "-o", "json", env=submitter))
        wait_succeeded(busy, submitter)
    finally:
        cli("cancel", holder, env=plain)
    # the same submit into a state directory where no supervisor runs: it starts one
    fresh_env = {**submitter, "DISPATCH_STATE_DIR": str(tmp_path / "other-state")}
    fresh = submitted(cli("submit", str(spec), "-o", "json", env=fresh_env))
    wait_succeeded(fresh, fresh_env)

    for rank in (0, 1):
        seen_busy, seen_fresh = (
            rank_env(spec.parent, busy, rank),
            rank_env(spec.parent, fresh, rank),
        )
        assert seen_busy == seen_fresh
        assert (seen_busy["FOO"], seen_busy["FROM_SPEC"]) == ("bar", "1")
        assert (seen_busy["TOKEN"], seen_busy["FILED"]) == (SECRET, FILE_SECRET)
        assert "BAR" not in seen_busy and "MY_TOKEN" not in seen_busy
        assert seen_busy["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
        assert seen_busy["HOME"] == submitter["HOME"]

    # the secret's values are nowhere under the state directories but the ranks' own env
    # (the kept fromEnv value is in secrets/, 0600)
    for state in (tmp_path / "state", tmp_path / "other-state"):
        for path in state.rglob("*"):
            if path.is_file() and path.parent.name != "secrets":
                data = path.read_bytes()
                assert SECRET.encode() not in data, path
                assert FILE_SECRET.encode() not in data, path
        kept = list((state / "secrets").iterdir())
        assert [oct(p.stat().st_mode & 0o777) for p in kept] == ["0o600"]
    plan = cli("plan", str(spec), "-o", "json", env=submitter)
    assert plan.returncode == 0, plan.stderr
    assert SECRET not in plan.stdout and FILE_SECRET not in plan.stdout
    assert '"TOKEN": "(secret)"' in plan.stdout


def test_a_missing_inherited_variable_or_secret_is_refused_and_nothing_recorded(
    write_job,
) -> None:  # type: ignore[no-untyped-def]
    spec = write_job("envdump", JOB, SCRIPT)
    plain = {k: v for k, v in os.environ.items() if k not in ("FOO", "MY_TOKEN")}
    refused = cli("submit", str(spec), env=plain)
    assert refused.returncode != 0
    assert "inheritEnv" in refused.stderr and "FOO" in refused.stderr
    with_foo = {**plain, "FOO": "bar"}
    refused = cli("submit", str(spec), env=with_foo)
    assert refused.returncode != 0
    assert "MY_TOKEN" in refused.stderr and "token.txt" in refused.stderr
    assert json.loads(cli("list", "-o", "json", env=with_foo).stdout) == []

"""The public API of ``import dispatch``: light to import, complete, typed failures on request."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dispatch
from dispatch.api import Client

HEAVY = ("kubernetes", "kubernetes_asyncio", "kubeflow", "torch", "rich", "click")
HEAVY_OURS = ("dispatch.adapters", "dispatch.cli", "dispatch.api", "dispatch.records")

PROBE = """
import json, sys
import dispatch
after_import = sorted(sys.modules)
me = dispatch.identity()
fence = dispatch.checkpoints(sys.argv[1])
after_injob = sorted(sys.modules)
print(json.dumps({"import": after_import, "injob": after_injob}))
"""


def _loaded(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_import_dispatch_and_the_in_job_helpers_load_no_client(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, check=True
    )
    seen = json.loads(done.stdout)
    assert _loaded(seen["import"], (*HEAVY, "dispatch.model", "dispatch.injob")) == []
    assert [m for m in seen["import"] if m.startswith("dispatch")] == ["dispatch"]
    assert _loaded(seen["injob"], (*HEAVY, *HEAVY_OURS)) == []
    assert "dispatch.injob" in seen["injob"]


def test_every_exported_name_resolves_and_all_lists_exactly_them() -> None:
    exported = set(dispatch.__all__)
    for name in exported:
        assert getattr(dispatch, name) is not None, name
    assert exported <= set(dir(dispatch))
    assert dispatch.Client is Client
    assert issubclass(dispatch.JobFailed, dispatch.DispatchError)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = dispatch.nope  # type: ignore[attr-defined]


def test_the_documented_names_are_exported() -> None:
    documented = {
        "Client", "AsyncClient", "JobSpec", "load_spec", "parse_spec", "State", "Cause",
        "Outcome", "JobStatus", "DispatchError", "JobFailed", "InvalidSpec", "Unsupported",
        "identity", "checkpoints", "run", "submit", "get", "wait", "cancel", "release", "logs",
        "plan",
    }  # fmt: skip
    assert documented <= set(dispatch.__all__)


FAILS = """
    name: fails
    nodes: 1
    procsPerNode: 2
    command: ["python", "main.py"]
"""
FAILS_SCRIPT = """
    import os, sys
    sys.exit(3 if os.environ["RANK"] == "1" else 0)
"""


def _write(folder: Path, body: str, script: str) -> Path:
    folder.mkdir()
    (folder / "main.py").write_text(textwrap.dedent(script))
    spec = folder / "job.yaml"
    spec.write_text(textwrap.dedent(body))
    return spec


def test_raise_on_failure_carries_the_final_status_and_outcome(tmp_path: Path) -> None:
    spec_file = _write(tmp_path / "fails", FAILS, FAILS_SCRIPT)
    with Client(background=False) as client:
        with pytest.raises(dispatch.JobFailed) as raised:
            client.run(spec_file, raise_on_failure=True)  # a path is loaded like the CLI does
        failure = raised.value
        assert failure.outcome.state is dispatch.State.FAILED
        assert failure.outcome.cause is dispatch.Cause.APP_ERROR
        assert failure.outcome.first_failure is not None
        assert (failure.outcome.first_failure.rank, failure.outcome.first_failure.exit_code) == (
            1,
            3,
        )
        assert failure.status.id == failure.job
        assert f"job {failure.job} failed (app_error)" in str(failure)

        # without the flag the same final status is returned; with it, wait raises too
        assert client.wait(failure.job).outcome == failure.outcome
        with pytest.raises(dispatch.JobFailed):
            client.wait(failure.job, timeout=30, raise_on_failure=True)


def test_raise_on_failure_returns_a_succeeded_job(tmp_path: Path) -> None:
    spec_file = _write(tmp_path / "ok", FAILS.replace("fails", "ok"), "print('fine')")
    spec = dispatch.load_spec(spec_file)
    with Client(background=False) as client:
        final = client.run(spec, spec_file=spec_file, raise_on_failure=True)
        assert final.succeeded
        assert client.wait(final.id, raise_on_failure=True) == final


def test_submit_held_then_release_from_python(tmp_path: Path) -> None:
    """``Client.submit(hold=True)`` on the local cluster: held, nothing started; after
    ``release`` a supervisor (``AsyncClient.drive`` here) starts attempt 1."""
    spec_file = _write(tmp_path / "ok", FAILS.replace("fails", "ok"), "print('fine')")
    with Client(background=False) as client:
        held = client.submit(spec_file, hold=True)
        assert (held.state, held.cause, held.attempts) == (dispatch.State.HELD, None, ())
        assert held.summary.endswith(f"release with `dispatch release {held.id}`")
        assert held.to_json()["state"] == "held"
        assert client.release(held.id).state is dispatch.State.HELD  # until a supervisor acts

    async def drive() -> dispatch.JobStatus:
        async with dispatch.AsyncClient(background=False) as driver:
            return await driver.drive(held.id)

    final = asyncio.run(drive())
    assert final.succeeded
    assert [a.number for a in final.attempts] == [1]

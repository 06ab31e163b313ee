"""The conformance suite against the local scheduler: real processes, real time.

Tiny ``python -c`` commands; generous patience, since the machine may be busy.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from dispatch.adapters.base import Adapter, AdapterContext
from dispatch.adapters.local import LocalAdapter
from dispatch.config import ClusterConfig
from dispatch.conformance import AdapterFixture, Check, checks_parameters, run_under_pytest
from dispatch.model import JobSpec, parse_spec

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the local adapter needs Linux")


def _spec(root: Path, name: str, code: str, **extra: object) -> JobSpec:
    fields = {
        "name": name,
        "cluster": "local",
        "nodes": 1,
        "procsPerNode": 1,
        "command": ["python", "-c", code],
        "workingDir": str(root),
        **extra,
    }
    return parse_spec(fields)


def local_fixture(root: Path) -> AdapterFixture:
    state = root / "state"
    cluster = ClusterConfig("local", "local", {"killGrace": 2.0})

    def make() -> Adapter:
        return LocalAdapter(cluster, AdapterContext(state_dir=state))

    async def advance(seconds: float) -> None:
        await asyncio.sleep(seconds)

    def footprint() -> tuple[str, ...]:
        jobs = state / "jobs"
        return tuple(sorted(str(p.relative_to(jobs)) for p in jobs.glob("*/attempt-*")))

    return AdapterFixture(
        name="local",
        make_adapter=make,
        succeeds=_spec(root, "quick", "print('hello from rank 0')"),
        fails=_spec(root, "fails", "import sys; print('failing'); sys.exit(3)"),
        runs_long=_spec(root, "long", "import time; time.sleep(120)"),
        refused=_spec(root, "huge", "pass", resources={"gpu": 64}),
        advance=advance,
        patience=60.0,
        poll=0.1,
        real_timeout=60.0,
        footprint=footprint,
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("check", checks_parameters())
def test_local_scheduler_conforms(check: Check, tmp_path: Path) -> None:
    run_under_pytest(check, local_fixture(tmp_path))

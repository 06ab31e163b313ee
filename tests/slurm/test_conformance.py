"""The conformance suite (``dispatch.conformance``) against the real two-node Slurm.

Real time, real jobs: tiny shell commands, a few seconds each. The Slurm adapter is also a
``Holder`` and an ``OutputReader``, so those checks must run here, not be skipped.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from dispatch.adapters.base import Adapter, AdapterContext
from dispatch.adapters.slurm import SlurmAdapter
from dispatch.config import ClusterConfig
from dispatch.conformance import AdapterFixture, Check, checks_parameters, run_under_pytest
from dispatch.model import JobSpec, parse_spec
from tests.slurm.realslurm import RealSlurm

#: every fixture gets its own job-id prefix: the session's Slurm remembers earlier jobs
_FIXTURES = itertools.count()
#: checks of optional parts the Slurm adapter has: skipping them would be a failure
MUST_RUN = {"holder", "output_reader", "plan_creates_nothing", "refusal"}
FAILS_ON_RANK_1 = 'echo failing; if [ "$RANK" = 1 ]; then exit 3; fi; sleep 30'


def _spec(name: str, script: str, **extra: object) -> JobSpec:
    fields = {"name": name, "cluster": "testslurm", "command": ["sh", "-c", script], **extra}
    return parse_spec(fields)


def slurm_fixture(cluster: ClusterConfig, slurm: RealSlurm, state: Path) -> AdapterFixture:
    prefix = f"conf{next(_FIXTURES)}"

    def make() -> Adapter:
        return SlurmAdapter(cluster, AdapterContext(state_dir=state))

    async def advance(seconds: float) -> None:
        await asyncio.sleep(seconds)

    def footprint() -> tuple[str, ...]:
        """Every Slurm job (id and name) this fixture's jobs created, whatever its state."""
        listed = slurm.run("squeue", "-h", "-t", "all", "-o", "%i %j").stdout.splitlines()
        mine = f"dispatch-{prefix}-"
        return tuple(sorted(line for line in listed if line.split(" ", 1)[-1].startswith(mine)))

    return AdapterFixture(
        name="slurm",
        make_adapter=make,
        succeeds=_spec("quick", "echo hello from $PET_NODE_RANK", nodes=2),
        fails=_spec("fails", FAILS_ON_RANK_1, nodes=2),
        runs_long=_spec("long", "sleep 300", nodes=1),
        refused=_spec("huge", "true", nodes=3, resources={"gpu": 1}),
        advance=advance,
        patience=90.0,
        poll=0.3,
        real_timeout=90.0,
        footprint=footprint,
        job_prefix=prefix,
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("check", checks_parameters())
def test_slurm_conforms(
    check: Check, slurm_cluster: ClusterConfig, real_slurm: RealSlurm, tmp_path: Path
) -> None:
    fixture = slurm_fixture(slurm_cluster, real_slurm, tmp_path / "state")
    if check.name in MUST_RUN:
        asyncio.run(check.run(fixture))  # a Skip here is an error, not a skipped test
    else:
        run_under_pytest(check, fixture)

"""Fixtures for the Slurm tests: a real two-node Slurm for the session, and adapters on it.

Without Slurm installed (or not as root) the real-Slurm tests are skipped with the reason,
except in CI (``CI=true``), where a missing Slurm fails them: CI installs it
(``scripts/install-slurm.sh``).

``DISPATCH_SLURM_PREFIX=/opt/slurm-24.11`` runs the same tests on a Slurm built from source
(``scripts/build-slurm-from-source.sh``): the session puts its ``bin`` and ``sbin`` first on
``PATH``, for the daemons, the adapter's commands and the jobs. Tests that need that build
use ``built_slurm`` and are skipped without it (CI has Debian's 22.05 only).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.slurm import SlurmAdapter
from dispatch.config import ClusterConfig
from tests.slurm import realslurm

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


@pytest.fixture(scope="session")
def real_slurm() -> Iterator[realslurm.RealSlurm]:
    reason = realslurm.why_unavailable()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but a real Slurm cannot be started: {reason}")
        pytest.skip(reason)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", realslurm.search_path())
        cluster = realslurm.start(tag=f"d{os.getpid() % 1000}")
        try:
            yield cluster
        finally:
            realslurm.stop(cluster)


@pytest.fixture
def built_slurm(request: pytest.FixtureRequest) -> Path:
    """The install folder of the Slurm built from source that the session's cluster runs;
    skipped when ``DISPATCH_SLURM_PREFIX`` is unset or names no build."""
    chosen = realslurm.prefix()
    if chosen is None:
        pytest.skip(
            f"needs a Slurm built from source: {realslurm.PREFIX_VARIABLE} is unset "
            "(build one with scripts/build-slurm-from-source.sh)"
        )
    request.getfixturevalue("real_slurm")  # skips, with the reason, when the build is missing
    return chosen


@pytest.fixture
def slurm_cluster(real_slurm: realslurm.RealSlurm, tmp_path: Path) -> ClusterConfig:
    """The configuration entry of the test cluster; outputs under the cluster's scratch."""
    return ClusterConfig(
        name="testslurm",
        adapter="slurm",
        settings={
            "slurmConf": str(real_slurm.conf),
            "outputDir": str(real_slurm.scratch / "out" / tmp_path.name),
            "pollInterval": 0.3,
            "commandTimeout": 30,
        },
    )


@pytest.fixture
def slurm(slurm_cluster: ClusterConfig, tmp_path: Path) -> SlurmAdapter:
    return SlurmAdapter(slurm_cluster, AdapterContext(state_dir=tmp_path / "state"))


@pytest.fixture
def slurm_config_file(slurm_cluster: ClusterConfig, tmp_path: Path) -> Path:
    """A dispatch configuration file naming the test cluster, as a user would write it."""
    entry = {"name": slurm_cluster.name, "adapter": "slurm", **slurm_cluster.settings}
    path = tmp_path / "dispatch-config.yaml"
    path.write_text(yaml.safe_dump({"clusters": [entry]}))
    return path

"""The deterministic simulator on PostgreSQL: racing supervisors (up to three per seed) share
one database, every invariant is checked after every step, and each seed takes exactly the
steps it takes on SQLite (the stores decide every race the same way)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dispatch.sim import SimConfig, run_batch
from dispatch.sim.simulation import Simulation
from dispatch.testing.postgres import PostgresServer

SEEDS = 12


def _trace(seed: int, config: SimConfig) -> tuple[list[str], bool]:
    simulation = Simulation(seed, config)
    try:
        result = simulation.run()
        return simulation.trace, result.ok
    finally:
        simulation.close()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_seed_keeps_every_invariant_and_matches_sqlite_step_for_step(
    postgres: PostgresServer,
) -> None:
    on_postgres = SimConfig(steps=300, records=postgres.url)
    report = run_batch(range(SEEDS), on_postgres)
    assert report.ok, [f"seed {r.seed}: {r.violation}" for r in report.failures]
    assert 3 in set(report.supervisors)
    assert report.events["crash"] + report.events["kill"] > 0
    for seed in range(4):
        assert _trace(seed, on_postgres) == _trace(seed, SimConfig(steps=300)), seed


def test_dispatch_sim_records_runs_on_the_server_and_leaves_no_database(
    postgres: PostgresServer,
) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "dispatch", "sim", "--seeds", "2", "--supervisors", "3",
         "--records", postgres.url, "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["seeds"] == 2 and report["config"]["records"] == "postgresql"
    import psycopg

    with psycopg.connect(postgres.url) as conn:
        left = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'dispatch_sim_%'")
        assert left.fetchall() == []

"""`dispatch sim`: run the deterministic simulator over seeded interleavings and faults.

``dispatch sim --seeds 2000 --steps 300`` runs seeds 0..1999; a failing seed is listed with
the command that replays it (``--seed S``), which can stop at a step (``--stop-at N``) and
dump the trace, the records and the ground truth (``--dump DIR``).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from dispatch.cli.common import EXIT_FAILED, emit_json, output_option
from dispatch.sim import (
    BROKEN_MODES,
    QUIET_STEPS,
    SHAPES,
    BatchReport,
    SimConfig,
    Simulation,
    dump,
    replay_command,
    run_batch,
)


def _supervisor_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    try:
        pair = int(low), int(high or low)
    except ValueError:
        raise click.BadParameter(f"{text!r}: write N or N-M, e.g. 1-3") from None
    if not 1 <= pair[0] <= pair[1] <= 9:
        raise click.BadParameter(f"{text!r}: between 1 and 9 supervisors, the lower first")
    return pair


class _Progress:
    """A progress line on stderr, at most every ``every`` seconds."""

    def __init__(self, total: int, every: float = 2.0) -> None:
        self.total, self.every, self.last = total, every, time.monotonic()

    def __call__(self, report: BatchReport) -> None:
        now = time.monotonic()
        if now - self.last < self.every and report.seeds < self.total:
            return
        self.last = now
        click.echo(
            f"sim: {report.seeds}/{self.total} seeds, {report.steps} steps, "
            f"{report.steps_per_second:,.0f} steps/s, {len(report.failures)} violations",
            err=True,
        )


def _replay(
    seed: int, config: SimConfig, stop_at: int | None, folder: Path | None, output: str
) -> bool:
    simulation = Simulation(seed, config)
    try:
        result = simulation.run(stop_at=stop_at)
        written = dump(simulation, folder) if folder is not None else []
        if output == "json":
            emit_json(
                {
                    **result.to_json(),
                    "replay": replay_command(simulation),
                    "dumped": [str(p) for p in written],
                }
            )
            return result.ok
        if folder is None:
            for line in simulation.trace[-40:]:
                click.echo(line)
        verdict = "ok" if result.ok else f"VIOLATION {result.violation}"
        click.echo(
            f"seed {seed} ({result.shape}, {result.supervisors} supervisors): "
            f"{result.steps} steps, {verdict}"
        )
        for path in written:
            click.echo(f"wrote {path}")
        return result.ok
    finally:
        simulation.close()


def _print_batch(report: BatchReport, first: int) -> None:
    click.echo(
        f"{report.seeds} seeds (from {first}), {report.steps} steps "
        f"({report.quiet_steps} after faults stopped) in {report.wall_seconds:.1f} s: "
        f"{report.steps_per_second:,.0f} steps/s with {report.workers} worker(s), "
        f"{report.steps_per_cpu_second:,.0f} steps per CPU second"
    )
    click.echo(f"shapes {dict(report.shapes)}; supervisors {dict(report.supervisors)}")
    click.echo(f"jobs ended {dict(report.jobs)}; faults {dict(report.events)}")
    if report.ok:
        click.echo("no invariant violated")
        return
    click.echo(f"{len(report.failures)} seed(s) violated an invariant:")
    for result in report.failures[:20]:
        violation = result.violation
        assert violation is not None  # failures always carry their violation
        click.echo(
            f"  seed {result.seed}: step {violation.step}: [{violation.invariant}] "
            f"{violation.message}"
        )
    click.echo("replay one with: dispatch sim --seed S (same options) [--stop-at N --dump DIR]")


@click.command("sim")
@click.option(
    "--seeds",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="How many seeds to run.",
)
@click.option("--first-seed", type=int, default=0, show_default=True, help="The first seed.")
@click.option(
    "--steps",
    type=click.IntRange(min=0),
    default=300,
    show_default=True,
    help="Steps with faults on, per seed (then faults stop until the jobs settle).",
)
@click.option(
    "--shape",
    type=click.Choice(["slurm", "kubernetes", "both"]),
    default="both",
    show_default=True,
    help="The memory scheduler's shape; both: each seed draws one.",
)
@click.option(
    "--supervisors",
    default="1-3",
    show_default=True,
    help="Supervisors per run, N or N-M (each seed draws one in the range).",
)
@click.option(
    "--quiet-steps",
    type=click.IntRange(min=1),
    default=QUIET_STEPS,
    show_default=True,
    help="Steps allowed for every job to settle once faults stop.",
)
@click.option("--no-faults", is_flag=True, help="No crashes, faults or distortions.")
@click.option(
    "--broken",
    type=click.Choice(BROKEN_MODES),
    help="Run a deliberately broken supervisor (the simulator must catch it).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes (results do not depend on it).",
)
@click.option(
    "--records",
    metavar="URL",
    envvar="DISPATCH_SIM_RECORDS",
    help="A PostgreSQL server (postgresql://user@host/db, a user who may create databases): "
    "each seed's records are a new database there, dropped after the run. Default: SQLite "
    "in memory.",
)
@click.option("--seed", type=int, help="Run (replay) this one seed only.")
@click.option("--stop-at", type=click.IntRange(min=0), help="With --seed: stop at this step.")
@click.option(
    "--dump",
    "dump_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --seed: write trace, records and ground truth into this folder.",
)
@output_option
def command(
    seeds: int,
    first_seed: int,
    steps: int,
    shape: str,
    supervisors: str,
    quiet_steps: int,
    no_faults: bool,
    broken: str | None,
    workers: int,
    records: str | None,
    seed: int | None,
    stop_at: int | None,
    dump_dir: Path | None,
    output: str,
) -> None:
    """Run the deterministic simulator: the real supervisors, records and memory scheduler,
    seeded interleavings, crashes and faults; every invariant checked after every step.

    Exits 1 when a seed violates an invariant.
    """
    config = SimConfig(
        steps=steps,
        shapes=SHAPES if shape == "both" else (shape,),
        supervisors=_supervisor_range(supervisors),
        quiet_steps=quiet_steps,
        faults=not no_faults,
        broken=broken,
        records=records,
    )
    if seed is not None:
        ok = _replay(seed, config, stop_at, dump_dir, output)
    else:
        if stop_at is not None or dump_dir is not None:
            raise click.UsageError("--stop-at and --dump need --seed S")
        chosen = range(first_seed, first_seed + seeds)
        report = run_batch(chosen, config, workers=workers, progress=_Progress(seeds))
        if output == "json":
            emit_json(report.to_json())
        else:
            _print_batch(report, first_seed)
        ok = report.ok
    if not ok:
        sys.exit(EXIT_FAILED)

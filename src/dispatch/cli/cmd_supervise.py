"""`dispatch supervise`: run the supervisor: drive every open job until it ends, crash-safely."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections import Counter
from typing import Any

import click

from dispatch.adapters.base import Adapter, AdapterContext
from dispatch.adapters.registry import open_adapter
from dispatch.cli.common import Settings, emit_json, output_option, report_errors
from dispatch.clock import SystemClock
from dispatch.config import records_location, state_dir
from dispatch.records import open_records
from dispatch.supervise import StepReport, Supervisor


def default_owner() -> str:
    """How this supervisor is named in leases and intents: host and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


def _print_step(report: StepReport) -> None:
    for line in report.reconciled:
        click.echo(f"reconciled: {line}")
    for job in report.jobs:
        for line in job.reconciled:
            click.echo(f"reconciled: {line}")
        for decision in job.decisions:
            if decision.kind.value not in ("observe", "nothing"):
                click.echo(f"{job.job_id}: {decision.kind.value}: {decision.reason}")
        if job.note:
            click.echo(f"{job.job_id}: {job.note}")


def _summary(owner: str, reports: list[StepReport]) -> dict[str, Any]:
    actions: Counter[str] = Counter(
        d.kind.value for r in reports for j in r.jobs for d in j.decisions
    )
    return {
        "owner": owner,
        "passes": len(reports),
        "actions": dict(sorted(actions.items())),
        "last": reports[-1].to_json() if reports else None,
    }


async def _supervise(supervisor: Supervisor, until_idle: bool, output: str) -> list[StepReport]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    reports: list[StepReport] = []

    def seen(report: StepReport) -> None:
        reports.append(report)
        if output == "text":
            _print_step(report)

    try:
        await supervisor.run(stop, on_step=seen, until_idle=until_idle)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return reports


@click.command("supervise")
@click.option("--once", is_flag=True, help="Make one pass over the open jobs, then exit.")
@click.option(
    "--exit-when-idle", is_flag=True, help="Exit once no job is open (instead of waiting)."
)
@click.option("--owner", help="This supervisor's name in leases (default: host-pid).")
@click.option("--poll-interval", type=float, default=5.0, show_default=True, help="Seconds.")
@click.option("--lease-ttl", type=float, default=30.0, show_default=True, help="Seconds.")
@click.option(
    "--cluster",
    "clusters",
    multiple=True,
    help="Drive only this cluster's jobs (repeatable; default: every cluster's).",
)
@output_option
@click.pass_obj
@report_errors
def command(
    settings: Settings,
    once: bool,
    exit_when_idle: bool,
    owner: str | None,
    poll_interval: float,
    lease_ttl: float,
    clusters: tuple[str, ...],
    output: str,
) -> None:
    """Run the supervisor: drive every open job until it ends, crash-safely.

    Several supervisors may run at once against the same records; each job is driven by the
    one holding its lease. Stop with Ctrl-C; a supervisor killed at any point is safe to
    restart (open intents are reconciled first).
    """
    config = settings.config
    for cluster in clusters:
        config.cluster(cluster)  # an unknown name is refused before anything runs
    state = state_dir()
    clock = SystemClock()
    records = open_records(records_location(config, state), clock=clock)

    def adapters(cluster: str) -> Adapter:
        context = AdapterContext(state_dir=state / "clusters" / cluster, clock=clock)
        return open_adapter(config.cluster(cluster), context)

    name = owner or default_owner()
    supervisor = Supervisor(
        records,
        adapters,
        clock,
        name,
        lease_ttl=lease_ttl,
        poll_interval=poll_interval,
        clusters=clusters or None,
    )
    try:
        if once:
            reports = [asyncio.run(supervisor.step())]
            if output == "text":
                _print_step(reports[0])
        else:
            reports = asyncio.run(_supervise(supervisor, exit_when_idle, output))
    finally:
        records.close()
    if output == "json":
        emit_json(reports[0].to_json() if once else _summary(name, reports))
    elif once and not any(j.decisions or j.note for j in reports[0].jobs):
        click.echo("no open jobs" if not reports[0].jobs else "nothing to do")

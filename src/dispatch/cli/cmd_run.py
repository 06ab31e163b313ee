"""`dispatch run JOB.yaml`: submit a job and follow it to the end in this terminal."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import click

from dispatch.api import AsyncClient, JobStatus
from dispatch.cli import display
from dispatch.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    Settings,
    emit_json,
    output_option,
    report_errors,
)
from dispatch.cli.session import client
from dispatch.model import NotFound, State, load_spec

EXIT_INTERRUPTED = 130


async def follow(api: AsyncClient, job_id: str) -> None:
    """Print state changes and every rank's output (prefixed) until the job ends."""
    shown_state: State | None = None
    shown_attempt = 0
    while True:
        status = await api.get(job_id)
        if status.state is not shown_state:
            shown_state = status.state
            click.echo(click.style(f"» {job_id}: ", dim=True) + display.state_text(status.state))
        attempt = status.last_attempt
        if attempt is not None and attempt.native is not None and attempt.number > shown_attempt:
            shown_attempt = attempt.number
            click.echo(click.style(f"» attempt {attempt.number} started", dim=True))
            with contextlib.suppress(NotFound):
                async for line in api.logs(job_id, follow=True, attempt=attempt.number):
                    click.echo(line)
            continue
        if status.is_terminal:
            return
        await asyncio.sleep(0.2)


async def run_and_follow(api: AsyncClient, spec_file: str, live: bool) -> JobStatus:
    spec = load_spec(spec_file)
    followers: list[asyncio.Task[None]] = []

    def submitted(status: JobStatus) -> None:
        if live:
            click.echo(click.style(f"» submitted {status.id} to {status.cluster}", dim=True))
            followers.append(asyncio.create_task(follow(api, status.id)))

    try:
        final = await api.run(spec, spec_file=spec_file, on_submitted=submitted)
    finally:
        for task in followers:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=2.0)  # let the last output drain
            task.cancel()
    return final


@click.command("run")
@click.argument("spec_file", metavar="JOB.yaml")
@output_option
@click.pass_obj
@report_errors
def command(settings: Settings, spec_file: str, output: str) -> None:
    """Submit a job and follow it to the end: every rank's output while it runs, then state,
    cause and evidence. Ctrl-C cancels the job cleanly. Exit 0 only if it succeeded."""
    api = client(settings)
    try:
        final = asyncio.run(run_and_follow(api, spec_file, live=output == "text"))
    except KeyboardInterrupt:
        click.echo("interrupted: the job was cancelled", err=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        api.close()
    if output == "json":
        emit_json(final.to_json())
    else:
        click.echo("")
        for line in display.status_lines(final):
            click.echo(line)
    sys.exit(EXIT_OK if final.succeeded else EXIT_FAILED)

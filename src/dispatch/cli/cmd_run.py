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
    """Print state changes and every rank's output (prefixed) until the job ends, in the order
    they happened: the state is watched while an attempt's output streams, and a change that
    came after the attempt ended (its outcome, a retry) waits for the rest of that output."""
    shown_state: State | None = None
    shown_attempt = 0  # the last attempt whose output was (or is being) followed
    finished = 0  # the last attempt whose output has been printed to its end
    output: asyncio.Task[None] | None = None
    try:
        while True:
            status = await api.get(job_id)
            if output is not None and (output.done() or _over(status, shown_attempt)):
                await output
                output, finished = None, shown_attempt
                continue  # read the state again: it may have moved on meanwhile
            attempt = status.last_attempt
            late = (
                status.state is State.RUNNING and attempt is not None and attempt.number == finished
            )
            if status.state is not shown_state and not late:
                shown_state = status.state
                click.echo(
                    click.style(f"» {job_id}: ", dim=True) + display.state_text(status.state)
                )
            if (
                attempt is not None
                and attempt.native is not None
                and attempt.number > shown_attempt
            ):
                shown_attempt = attempt.number
                click.echo(click.style(f"» attempt {attempt.number} started", dim=True))
                output = asyncio.create_task(_echo_output(api, job_id, attempt.number))
                continue
            if status.is_terminal and output is None:
                return
            await asyncio.sleep(0.2)
    finally:
        if output is not None:
            output.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await output


def _over(status: JobStatus, attempt: int) -> bool:
    """Whether ``attempt`` has ended as far as the records of ``status`` know."""
    last = status.last_attempt
    if last is None or last.number != attempt:
        return True
    return last.ended_at is not None or status.is_terminal


async def _echo_output(api: AsyncClient, job_id: str, attempt: int) -> None:
    with contextlib.suppress(NotFound):
        async for line in api.logs(job_id, follow=True, attempt=attempt):
            click.echo(line)


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

"""`dispatch cancel JOB`: stop a job's running attempt and start no new one."""

from __future__ import annotations

import asyncio

import click

from dispatch.api import JobStatus
from dispatch.cli import display
from dispatch.cli.common import Settings, fail, output_option, report_errors
from dispatch.cli.session import client
from dispatch.model import NotFound


@click.command("cancel")
@click.argument("job")
@click.option("--reason", default="cancelled from the command line", help="Recorded with it.")
@click.option(
    "--wait",
    "wait_seconds",
    type=float,
    default=None,
    help="Wait up to N seconds for the job to end.",
)
@output_option
@click.pass_obj
@report_errors
def command(
    settings: Settings, job: str, reason: str, wait_seconds: float | None, output: str
) -> None:
    """Cancel a job: its running attempt is stopped and no new attempt starts. The cancel is
    recorded with who asked and why; cancelling an ended job changes nothing."""
    api = client(settings)

    async def cancel() -> JobStatus:
        status = await api.cancel(job, reason=reason)
        if wait_seconds is not None and not status.is_terminal:
            status = await api.wait(status.id, timeout=wait_seconds)
        return status

    try:
        status = asyncio.run(cancel())
    except NotFound as exc:
        fail(str(exc), output=output)
    except TimeoutError:
        fail(
            f"the job did not end within {wait_seconds:g} s; see `dispatch status {job}`",
            output=output,
        )
    finally:
        api.close()
    display.show_status(status, output)

"""`dispatch cancel JOB`: stop a job's running attempt and start no new one."""

from __future__ import annotations

import asyncio

import click

from dispatch.api import JobStatus
from dispatch.cli import display
from dispatch.cli.common import Settings, emit_json, fail, output_option, report_errors
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
    recorded with who asked and why. A job that already ended is left as it is: that is said,
    and the exit code is 1."""
    api = client(settings)

    async def cancel() -> tuple[JobStatus, bool]:
        before = await api.get(job)
        if before.is_terminal:
            return before, False
        status = await api.cancel(before.id, reason=reason)
        if wait_seconds is not None and not status.is_terminal:
            status = await api.wait(status.id, timeout=wait_seconds)
        return status, True

    try:
        status, requested = asyncio.run(cancel())
    except NotFound as exc:
        fail(str(exc), output=output)
    except TimeoutError:
        fail(
            f"the job did not end within {wait_seconds:g} s; see `dispatch status {job}`",
            output=output,
        )
    finally:
        api.close()
    if not requested:
        fail(
            f"job {status.id} already ended ({status.state.value}): nothing to cancel",
            output=output,
            job=status.to_json(),
        )
    if output == "json":
        emit_json({**status.to_json(), "cancel": "requested"})
        return
    click.echo(
        f"cancel requested for {status.id}"
        + ("" if status.is_terminal else ": the supervisor stops it")
    )
    display.show_status(status, output)

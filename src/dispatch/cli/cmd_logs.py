"""`dispatch logs JOB`: what a job's ranks printed."""

from __future__ import annotations

import asyncio

import click

from dispatch.cli.common import Settings, emit_json, fail, output_option, report_errors
from dispatch.cli.session import client
from dispatch.model import NotFound


@click.command("logs")
@click.argument("job")
@click.option("--rank", type=int, help="Only this rank (default: every rank, prefixed).")
@click.option("--attempt", type=int, help="This attempt (default: the latest started).")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the attempt ends.")
@output_option
@click.pass_obj
@report_errors
def command(
    settings: Settings,
    job: str,
    rank: int | None,
    attempt: int | None,
    follow: bool,
    output: str,
) -> None:
    """Print the output of a job's ranks (json: one object with all lines)."""
    api = client(settings, background=False)

    async def read() -> list[str]:
        lines: list[str] = []
        async for line in api.logs(job, rank=rank, follow=follow, attempt=attempt):
            if output == "json":
                lines.append(line)
            else:
                click.echo(line)
        return lines

    try:
        lines = asyncio.run(read())
    except NotFound as exc:
        fail(str(exc), output=output)
    except KeyboardInterrupt:
        return
    finally:
        api.close()
    if output == "json":
        emit_json({"job": job, "rank": rank, "attempt": attempt, "lines": lines})

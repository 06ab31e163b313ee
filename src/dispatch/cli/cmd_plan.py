"""`dispatch plan JOB.yaml`: what a job would become on its cluster, creating nothing."""

from __future__ import annotations

import asyncio
import sys

import click
import yaml

from dispatch.cli import display
from dispatch.cli.common import EXIT_FAILED, Settings, emit_json, output_option, report_errors
from dispatch.cli.session import client
from dispatch.model import load_spec


@click.command("plan")
@click.argument("spec_file", metavar="JOB.yaml")
@click.option(
    "--show-jobset",
    is_flag=True,
    help="Kubeflow: also show the JobSet Trainer would create from the TrainJob.",
)
@output_option
@click.pass_obj
@report_errors
def command(settings: Settings, spec_file: str, show_jobset: bool, output: str) -> None:
    """Show the capability answers, every refusal, the weakened-identity reason and the exact
    objects (or processes, or script) the job's first attempt would create, with what each
    runs: its command line, working directory and the names of the variables it sets (their
    values only with -o json, and never secretEnv's). Creates nothing.
    Exit 1 when the job would be refused, 3 when its cluster cannot be asked."""
    spec = load_spec(spec_file)
    api = client(settings, background=False)
    try:
        plan = asyncio.run(api.plan(spec, spec_file=spec_file))
    finally:
        api.close()
    if show_jobset and plan.adapter == "kubeflow":
        from dispatch.adapters.kubeflow.planning.plan import with_jobset

        plan = with_jobset(plan)
    if output == "json":
        emit_json(plan.to_json())
    else:
        for line in display.plan_lines(plan):
            click.echo(line)
        for artifact in plan.artifacts:
            if show_jobset and artifact.kind == "JobSet":
                click.echo(yaml.safe_dump(artifact.to_json()["content"], sort_keys=False), nl=False)
    if not plan.accepted:
        sys.exit(EXIT_FAILED)

"""`dispatch validate JOB.yaml`: parse a job spec and report every problem in it."""

from __future__ import annotations

import sys
from typing import Any

import click

from dispatch.cli.common import EXIT_FAILED, emit_json, output_option
from dispatch.model import InvalidSpec, load_spec


@click.command("validate")
@click.argument("spec_files", metavar="JOB.yaml...", nargs=-1, required=True)
@output_option
def command(spec_files: tuple[str, ...], output: str) -> None:
    """Check job specs without running anything. Exit 1 if any has a problem."""
    results: list[dict[str, Any]] = []
    for path in spec_files:
        try:
            spec = load_spec(path)
        except InvalidSpec as exc:
            results.append(
                {
                    "file": path,
                    "valid": False,
                    "problems": [
                        {"field": p.field, "message": p.message, "fix": p.fix} for p in exc.problems
                    ],
                }
            )
        else:
            results.append({"file": path, "valid": True, "name": spec.name, "problems": []})
    if output == "json":
        emit_json(results[0] if len(results) == 1 else results)
    else:
        for result in results:
            if result["valid"]:
                click.echo(f"{result['file']}: ok ({result['name']})")
                continue
            problems = result["problems"]
            count = len(problems)
            click.echo(f"{result['file']}: {count} problem{'s' if count != 1 else ''}")
            for p in problems:
                fix = f"\n      fix: {p['fix']}" if p["fix"] else ""
                click.echo(f"  - {p['field']}: {p['message']}{fix}")
    if not all(r["valid"] for r in results):
        sys.exit(EXIT_FAILED)

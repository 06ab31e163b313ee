"""What every verb shares: output format, error reporting, exit codes, configuration."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from dispatch.config import Config, load_config
from dispatch.model import (
    ConfigError,
    DispatchError,
    Forbidden,
    InvalidSpec,
    NotBuiltYet,
    NotFound,
    TransientError,
    Unsupported,
)

#: exit codes: 0 success; 1 the job or check failed / the input was refused; 2 bad usage or
#: a part not built; 3 an internal or scheduler error
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Settings:
    """Global options, available to every verb as the click context object."""

    config_path: Path | None = None
    _config: Config | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.config_path)
        return self._config


def output_option(func: F) -> F:
    """``--output text|json`` (``-o``): json prints one object for scripts."""
    return click.option(
        "--output",
        "-o",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Output format; json prints one machine-readable object.",
    )(func)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, sort_keys=False, default=str))


def fail(message: str, *, code: int = EXIT_FAILED, output: str = "text", **extra: Any) -> NoReturn:
    """Report an error the way the output format wants it, and exit."""
    if output == "json":
        emit_json({"error": message, **extra})
    else:
        click.secho(f"error: {message}", fg="red", err=True)
    sys.exit(code)


def not_built(verb: str, issue: int, output: str = "text") -> NoReturn:
    """The verb is registered but this version does not implement it yet (exit 2)."""
    message = f"`dispatch {verb}` is not built yet in this version (tracked in issue {issue})"
    if output == "json":
        emit_json({"error": message, "notBuilt": True})
    else:
        click.echo(f"dispatch {verb}: not built yet (tracked in issue {issue}).", err=True)
    sys.exit(EXIT_USAGE)


def report_errors(func: F) -> F:
    """Turn dispatch's errors into a clear message and the right exit code."""
    import functools

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        output = str(kwargs.get("output", "text"))
        try:
            return func(*args, **kwargs)
        except InvalidSpec as exc:
            fail(
                str(exc),
                output=output,
                problems=[
                    {"field": p.field, "message": p.message, "fix": p.fix} for p in exc.problems
                ],
            )
        except Unsupported as exc:
            fail(
                str(exc),
                output=output,
                reasons=[{"rule": r.rule, "message": r.message} for r in exc.reasons],
            )
        except (ConfigError, NotBuiltYet) as exc:
            fail(str(exc), code=EXIT_USAGE, output=output)
        except NotFound as exc:
            fail(str(exc), output=output)
        except Forbidden as exc:
            fail(f"not allowed: {exc}", code=EXIT_ERROR, output=output)
        except TransientError as exc:
            fail(
                f"{exc} (a temporary condition: try again"
                + (f" in {exc.delay:g} s)" if exc.delay else ")"),
                code=EXIT_ERROR,
                output=output,
                transient=True,
            )
        except DispatchError as exc:
            fail(str(exc), output=output)

    return wrapper  # type: ignore[return-value]

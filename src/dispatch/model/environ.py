"""Where a rank's environment comes from, besides the spec's ``env``: pure, no I/O.

The contract (docs/reference/job-spec.md, "Environment"): a rank's environment is exactly

1. the *base*: the variables of ``BASE_ENV`` (and every ``LC_*``) that are set in the
   environment of the process that submits the job, captured at submit;
2. the variables the spec names in ``inheritEnv``, captured from the same environment at the
   same moment (a name that is not set there is an error at submit);
3. the spec's ``env``;
4. the spec's ``secretEnv``, read from their sources (``SecretSource``), never recorded;
5. what dispatch adds (launcher and identity variables), which nothing overrides.

Captured values are stored with the job, so the ranks of every attempt see the same
environment whichever process (a new background supervisor, one already running,
``dispatch supervise``) starts them. Container schedulers take the base from the image
instead: there only 2 to 5 apply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: what a program needs to start the way the user's shell would start it
BASE_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "VIRTUAL_ENV",
)
BASE_ENV_PREFIXES = ("LC_",)


class SecretSource(BaseModel):
    """Where a secret variable's value comes from: exactly one of ``fromEnv`` (a variable of
    the submitting process, captured at submit) or ``fromFile`` (a file read when each
    attempt starts; ``~`` and a path relative to the spec file's folder are resolved at
    submit). Trailing newlines of a file are dropped."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    from_env: str | None = Field(default=None, alias="fromEnv")
    from_file: str | None = Field(default=None, alias="fromFile")

    @field_validator("from_env")
    @classmethod
    def _variable(cls, value: str | None) -> str | None:
        if value is not None and not ENV_NAME.match(value):
            raise ValueError(f"{value[:60]!r} is not a variable name: use letters, digits and '_'")
        return value

    @field_validator("from_file")
    @classmethod
    def _file(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\0" in value):
            raise ValueError("must be a path to a file (not empty, no NUL character)")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretSource:
        if (self.from_env is None) == (self.from_file is None):
            raise ValueError(
                "give exactly one of fromEnv (a variable of the submitting shell) or "
                "fromFile (a path), e.g. {fromEnv: MY_TOKEN}"
            )
        return self


def is_base(name: str) -> bool:
    return name in BASE_ENV or name.startswith(BASE_ENV_PREFIXES)


def base_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The base variables set in ``environ``."""
    return {k: v for k, v in environ.items() if is_base(k)}


def capture_environment(
    inherit: tuple[str, ...], environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The base and the ``inherit`` variables of ``environ``, and the inherited names that
    ``environ`` does not set (an error for the caller to report)."""
    captured = base_environment(environ)
    missing = [name for name in inherit if name not in environ]
    captured.update({name: environ[name] for name in inherit if name in environ})
    return captured, missing

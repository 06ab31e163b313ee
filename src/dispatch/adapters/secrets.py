"""Values of a job's ``secretEnv``: kept out of records, plans and logs.

What is captured when (docs/reference/job-spec.md, "Secrets"):

* ``fromEnv``: the submitting process's variable, read at submit (the supervisor that starts
  the attempt later runs in another process, with another environment) and kept in
  ``<state dir>/secrets/<job id>.json``, 0600 in a 0700 folder, never in the records;
* ``fromFile``: the file is checked at submit and read again when each attempt starts, so
  a rotated token is used by the next attempt; its value is never kept by dispatch.

Adapters call ``SecretStore.values`` in ``start`` and hand the values to the scheduler by
the private way each has (the runner's process environment, sbatch's process environment,
a Kubernetes Secret); plans show the names only.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from dispatch.model import InvalidSpec, Job, JobSpec, SpecProblem
from dispatch.model.environ import SecretSource

#: what a plan shows in place of a secret's value
HIDDEN = "(secret)"
#: a secret file larger than this is not a token: refuse it rather than read it whole
MAX_SECRET_BYTES = 1 << 20


def resolve_secret_files(spec: JobSpec, spec_file: str | Path | None) -> JobSpec:
    """The spec with every ``fromFile`` made absolute (``~`` expanded, a relative path taken
    from the spec file's folder), as ``workingDir`` is."""
    if not any(s.from_file for s in spec.secret_env.values()):
        return spec
    base = Path(spec_file).resolve().parent if spec_file else Path.cwd()
    resolved = {}
    for name, source in spec.secret_env.items():
        if source.from_file is not None:
            path = Path(source.from_file).expanduser()
            source = source.model_copy(update={"from_file": str(base / path)})
        resolved[name] = source
    return spec.model_copy(update={"secret_env": resolved})


def _problem(name: str, message: str, fix: str) -> InvalidSpec:
    return InvalidSpec([SpecProblem(f"secretEnv.{name}", message, fix)])


def read_secret_file(name: str, source: SecretSource) -> str:
    """The value of a ``fromFile`` secret now; ``InvalidSpec`` naming the file, never its
    content, when it cannot be read."""
    path = Path(str(source.from_file))
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise _problem(
            name, f"cannot read {path}: {exc.strerror or exc}", "create the file or fix the path"
        ) from None
    if len(data) > MAX_SECRET_BYTES:
        raise _problem(name, f"{path} is larger than 1 MiB", "name a file holding the value only")
    try:
        text = data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise _problem(name, f"{path} is not UTF-8 text", "store the value as text") from None
    if "\0" in text:
        raise _problem(name, f"{path} holds a NUL character", "no environment can hold it")
    return text


def capture_secrets(spec: JobSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """At submit: the values of the ``fromEnv`` secrets, and a check that every ``fromFile``
    can be read now. ``InvalidSpec`` (every problem, no value) when one cannot be had."""
    captured: dict[str, str] = {}
    problems: list[SpecProblem] = []
    for name, source in spec.secret_env.items():
        if source.from_env is not None:
            value = environ.get(source.from_env)
            if value is None:
                problems.append(
                    SpecProblem(
                        f"secretEnv.{name}",
                        f"takes its value from ${source.from_env}, which is not set here",
                        f"export {source.from_env} in the shell that submits the job",
                    )
                )
            elif "\0" in value:
                problems.append(
                    SpecProblem(f"secretEnv.{name}", f"${source.from_env} holds a NUL character")
                )
            else:
                captured[name] = value
        else:
            try:
                read_secret_file(name, source)
            except InvalidSpec as exc:
                problems.extend(exc.problems)
    if problems:
        raise InvalidSpec(problems)
    return captured


class SecretStore:
    """The kept ``fromEnv`` values of every job, one private file per job."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, job_id: str) -> Path:
        return self.root / f"{job_id}.json"

    def keep(self, job_id: str, values: Mapping[str, str]) -> None:
        """Write ``values`` for ``job_id`` (0600, created anew, never through a link)."""
        if not values:
            return
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(self.path(job_id), flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(dict(values), handle)

    def forget(self, job_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(job_id).unlink()

    def values(self, job: Job) -> dict[str, str]:
        """Every ``secretEnv`` value of ``job`` now: kept ``fromEnv`` values and files read
        anew. ``InvalidSpec`` naming the variable (never a value) when one is missing."""
        secrets = job.spec.secret_env
        if not secrets:
            return {}
        kept: dict[str, str] = {}
        if any(s.from_env is not None for s in secrets.values()):
            try:
                with open(self.path(job.id), encoding="utf-8") as handle:
                    kept = dict(json.load(handle))
            except (OSError, ValueError):
                kept = {}
        values: dict[str, str] = {}
        for name, source in secrets.items():
            if source.from_file is not None:
                values[name] = read_secret_file(name, source)
            elif name in kept:
                values[name] = kept[name]
            else:
                raise _problem(
                    name,
                    f"the value captured at submit from ${source.from_env} is not in "
                    f"{self.path(job.id)}",
                    "submit the job again from a shell that sets it",
                )
        return values

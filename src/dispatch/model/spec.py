"""The job spec: what to run, where, with which resources, and what to do when it ends badly.

``parse_spec`` is the one entry point for untrusted input: it returns a ``JobSpec`` or raises
``InvalidSpec`` naming every problem found (field, message, fix) and never another exception.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from dispatch.model import yaml12
from dispatch.model.environ import SecretSource
from dispatch.model.errors import MAX_LISTED, InvalidSpec, SpecProblem
from dispatch.model.recovery import RecoveryPolicy
from dispatch.model.shown import listed, show
from dispatch.model.units import parse_cpu, parse_duration, parse_memory

NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
NAME_MAX = 40
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_ENV_PREFIX = "DISPATCH_"
#: ranks one job may have (nodes x procsPerNode): above the largest machines built, and what
#: keeps planning and launching a job bounded work
MAX_WORLD_SIZE = 131_072


class RuntimeKind(StrEnum):
    CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
    TRAINING_RUNTIME = "TrainingRuntime"


class RuntimeRef(BaseModel):
    """The Kubeflow Trainer runtime a job runs on (Kubeflow clusters only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: RuntimeKind = RuntimeKind.CLUSTER_TRAINING_RUNTIME
    name: str = Field(min_length=1)


class Resources(BaseModel):
    """Resources per node. Quantities are written as Kubernetes writes them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu: str | None = None
    memory: str | None = None
    gpu: int = Field(default=0, ge=0)

    @field_validator("cpu", mode="before")
    @classmethod
    def _cpu(cls, value: Any) -> Any:
        if value is None:
            return None
        parse_cpu(value)
        return str(value)

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> Any:
        if value is None:
            return None
        parse_memory(value)
        return str(value)

    @property
    def memory_bytes(self) -> int | None:
        return parse_memory(self.memory) if self.memory is not None else None

    @property
    def cpu_count(self) -> float | None:
        return parse_cpu(self.cpu) if self.cpu is not None else None


class JobSpec(BaseModel):
    """A multi-node job. Field names are camelCase in YAML and JSON, snake_case in Python."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str
    cluster: str = "local"
    nodes: int = Field(default=1, ge=1, le=10_000)
    procs_per_node: int | None = Field(default=None, alias="procsPerNode", ge=1, le=1024)
    command: tuple[str, ...] = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    inherit_env: tuple[str, ...] = Field(default=(), alias="inheritEnv")
    secret_env: dict[str, SecretSource] = Field(default_factory=dict, alias="secretEnv")
    image: str | None = None
    resources: Resources = Resources()
    time_limit: float | None = Field(default=None, alias="timeLimit")
    working_dir: str | None = Field(default=None, alias="workingDir")
    queue: str | None = None
    runtime: RuntimeRef | None = None
    recovery: RecoveryPolicy = RecoveryPolicy()

    @field_validator("nodes", "procs_per_node", mode="before")
    @classmethod
    def _whole_number(cls, value: Any) -> Any:
        if isinstance(value, bool):  # YAML `nodes: true` is not a count
            raise ValueError(f"is {str(value).lower()}, not a whole number")
        return value

    @field_validator("command", "args", mode="after")
    @classmethod
    def _no_nul_in_argv(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any("\0" in item for item in value):
            raise ValueError("contains a NUL character, which no program argument can hold")
        return value

    @field_validator("working_dir", mode="after")
    @classmethod
    def _no_nul_in_path(cls, value: str | None) -> str | None:
        if value is not None and "\0" in value:
            raise ValueError("contains a NUL character, which no path can hold")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if len(value) > NAME_MAX:
            raise ValueError(f"is {len(value)} characters long; at most {NAME_MAX} are allowed")
        if not NAME_PATTERN.match(value):
            raise ValueError(
                "must be lowercase letters, digits and '-', start with a letter "
                "and not end with '-'"
            )
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value[0].strip():
            raise ValueError("the first element (the program) is empty")
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value  # pydantic reports the wrong type
        problems: list[str] = []
        # YAML turns `EPOCHS: 3` into an int; environment values are strings, so say so.
        for key, item in value.items():
            if not isinstance(item, str):
                name = key if isinstance(key, str) and len(key) <= 60 else show(key)
                problems.append(
                    f"value of {show(key)} is {type(item).__name__}, not a string; "
                    f'quote it in YAML, e.g. {name}: "{show(item)}"'
                )
            elif "\0" in item:
                problems.append(
                    f"value of {show(key)} contains a NUL character, which no environment holds"
                )
        bad = [show(k) for k in value if not isinstance(k, str) or not ENV_NAME.match(k)]
        if bad:
            problems.append(
                f"invalid variable name(s) {', '.join(bad[:5])}"
                + (f" and {len(bad) - 5:,} more" if bad[5:] else "")
                + ": use letters, digits and '_'"
            )
        reserved = sorted(
            k for k in value if isinstance(k, str) and k.upper().startswith(RESERVED_ENV_PREFIX)
        )
        if reserved:
            problems.append(
                f"sets {', '.join(show(k) for k in reserved[:5])}"
                + (" ..." if reserved[5:] else "")
                + ": the prefix DISPATCH_ is reserved for the identity dispatch publishes to "
                "every rank; rename the variable(s)"
            )
        if problems:
            raise ValueError(listed(problems, 5))
        return value

    @field_validator("inherit_env", "secret_env", mode="after")
    @classmethod
    def _env_names(cls, value: Any) -> Any:
        bad = [k for k in value if not ENV_NAME.match(k)]
        if bad:
            shown = [k[:60] for k in bad[:5]]
            raise ValueError(f"invalid variable name(s) {shown}: use letters, digits and '_'")
        reserved = sorted(k for k in value if k.upper().startswith(RESERVED_ENV_PREFIX))
        if reserved:
            raise ValueError(f"names {', '.join(reserved[:5])}: the prefix DISPATCH_ is reserved")
        return value

    @field_validator("time_limit", mode="before")
    @classmethod
    def _time_limit(cls, value: Any) -> Any:
        return None if value is None else parse_duration(value)

    @model_validator(mode="after")
    def _cross_field(self) -> JobSpec:
        if self.queue is not None and not self.queue.strip():
            raise ValueError("queue is empty; remove it or name a queue")
        named = [set(self.env), set(self.inherit_env), set(self.secret_env)]
        twice = sorted((named[0] & named[1]) | (named[0] & named[2]) | (named[1] & named[2]))
        if twice:
            raise ValueError(
                f"{', '.join(twice[:5])} given in more than one of env, inheritEnv and "
                "secretEnv: a variable comes from one place"
            )
        if self.nodes * self.ranks_per_node > MAX_WORLD_SIZE:
            raise ValueError(
                f"nodes x procsPerNode is {self.nodes * self.ranks_per_node:,} ranks; at most "
                f"{MAX_WORLD_SIZE:,} are allowed"
            )
        return self

    @property
    def launches_torchrun(self) -> bool:
        """True when the command starts torchrun, which then starts the ranks of each node."""
        program = Path(self.command[0]).name
        return program == "torchrun" or tuple(self.command[:3]) == (
            self.command[0],
            "-m",
            "torch.distributed.run",
        )

    @property
    def ranks_per_node(self) -> int:
        return self.procs_per_node or 1

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    def to_yaml_dict(self) -> dict[str, Any]:
        """The spec as it would be written in YAML (camelCase, defaults left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True)


# --- parsing untrusted input -------------------------------------------------------------

_FIELD_FIXES = {
    "name": "use e.g. 'mnist-ddp'",
    "nodes": "set nodes to a whole number of at least 1",
    "procsPerNode": "set procsPerNode to a whole number of at least 1, or leave it out",
    "command": 'write the command as a list, e.g. command: ["python", "train.py"]',
    "timeLimit": "write it as e.g. '30m' or '2h'",
    "env": 'write env as a mapping of strings, e.g. env: {EPOCHS: "3"}',
    "inheritEnv": "write inheritEnv as a list of variable names, e.g. inheritEnv: [WANDB_MODE]",
    "secretEnv": "write e.g. secretEnv: {HF_TOKEN: {fromEnv: HF_TOKEN}} or "
    "{TOKEN: {fromFile: ~/.secrets/token}}",
}


_FRIENDLY = {
    "greater_than_equal": "must be at least {ge}",
    "less_than_equal": "must be at most {le}",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping of fields",
    "too_short": "must not be empty",
    "enum": "must be one of: {expected}",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
}


class _SafeContext(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def _loc_to_field(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("function-after", "function-before", "function-plain"):
            continue
        else:
            text = str(item)  # a key of the input: bounded as every echoed value
            parts.append(("." if parts else "") + (text if len(text) <= 60 else text[:57] + "..."))
    return "".join(parts) or "(document)"


def _known_fields(model: type[BaseModel]) -> list[str]:
    names: list[str] = []
    for name, info in model.model_fields.items():
        names.append(info.alias or name)
    return names


def _nested_model(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model a location's parent belongs to, for 'did you mean' suggestions."""
    model: type[BaseModel] = JobSpec
    for item in loc[:-1]:
        if isinstance(item, int):
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == item), None)
        if field is None:
            return None
        annotation = field.annotation
        inner = getattr(annotation, "__args__", (annotation,))
        candidates = [a for a in (annotation, *inner) if isinstance(a, type)]
        nested = next((a for a in candidates if issubclass(a, BaseModel)), None)
        if nested is None:
            # tuple[RecoveryRule, ...] and similar: look one level deeper
            deeper = [
                b
                for a in inner
                for b in getattr(a, "__args__", ())
                if isinstance(b, type) and issubclass(b, BaseModel)
            ]
            nested = deeper[0] if deeper else None
        if nested is None:
            return None
        model = nested
    return model


def _problem(error: ErrorDetails) -> SpecProblem:
    loc = tuple(error["loc"])
    field = _loc_to_field(loc)
    kind = error["type"]
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    fix = ""
    if kind == "extra_forbidden" and loc and isinstance(loc[-1], str):
        model = _nested_model(loc)
        known = _known_fields(model) if model else []
        guess = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        message = "is not a field of the job spec" if len(loc) == 1 else "is not a known field"
        fix = f"did you mean {guess[0]!r}?" if guess else f"known fields: {', '.join(known)}"
    elif kind == "missing":
        message = "is required"
        fix = _FIELD_FIXES.get(field, "add it")
    else:
        if kind in _FRIENDLY:
            message = _FRIENDLY[kind].format_map(_SafeContext(error.get("ctx") or {}))
        top = str(loc[0]) if loc else ""
        fix = _FIELD_FIXES.get(top, "")
        if "input" in error and kind not in ("value_error",):
            shown = show(error["input"])  # bounded work on any value, huge integers too
            if len(shown) <= 60:
                message = f"{message} (got {shown})"
    return SpecProblem(field=field, message=message, fix=fix)


def spec_problems(error: ValidationError) -> list[SpecProblem]:
    """The problems in a pydantic validation error, translated for people: the first
    ``MAX_LISTED`` (``error.error_count()`` says how many there are)."""
    return [_problem(e) for e in error.errors(include_url=False)[:MAX_LISTED]]


def parse_spec(data: Any, *, source: str | None = None) -> JobSpec:
    """Validate a decoded YAML/JSON document as a ``JobSpec``.

    Raises ``InvalidSpec`` with every problem found; never another exception.
    """
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise InvalidSpec(
            [
                SpecProblem(
                    "(document)",
                    f"the job spec is {kind}, not a mapping of fields",
                    "start from an example in examples/",
                )
            ],
            source=source,
        )
    non_string = [k for k in data if not isinstance(k, str)]
    if non_string:
        raise InvalidSpec(
            [
                SpecProblem(repr(k), "field names must be strings", "quote the key")
                for k in non_string
            ],
            source=source,
        )
    try:
        return JobSpec.model_validate(dict(data))
    except ValidationError as exc:
        raise InvalidSpec(spec_problems(exc), source=source, total=exc.error_count()) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # A validator tripped on input it could not even describe; still an InvalidSpec.
        raise InvalidSpec([SpecProblem("(document)", str(exc))], source=source) from None


def parse_spec_text(text: str, *, source: str | None = None) -> JobSpec:
    """Parse YAML (or JSON, which is YAML) text as a job spec."""
    try:
        data = yaml12.load(text)
    except yaml12.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(document)"
        problem = getattr(exc, "problem", None) or str(exc)
        raise InvalidSpec(
            [SpecProblem(where, f"not valid YAML: {problem}", "fix the YAML syntax")],
            source=source,
        ) from None
    return parse_spec(data, source=source)


def load_spec(path: str | Path) -> JobSpec:
    """Read and parse a job spec file. A relative ``workingDir`` is kept as written; resolve it
    against the spec file's folder with ``resolve_working_dir``."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidSpec(
            [SpecProblem("(file)", f"cannot read {file}: {exc.strerror or exc}")], source=str(file)
        ) from None
    except UnicodeDecodeError:
        raise InvalidSpec(
            [SpecProblem("(file)", f"{file} is not UTF-8 text")], source=str(file)
        ) from None
    return parse_spec_text(text, source=str(file))


def resolve_working_dir(spec: JobSpec, spec_file: str | Path | None) -> JobSpec:
    """The spec with ``workingDir`` made absolute, relative to the spec file's folder."""
    base = Path(spec_file).resolve().parent if spec_file else Path.cwd()
    target = Path(spec.working_dir) if spec.working_dir else Path(".")
    absolute = target if target.is_absolute() else (base / target).resolve()
    return spec.model_copy(update={"working_dir": str(absolute)})

"""dispatch: submit and supervise multi-node training jobs, with typed outcomes.

The public API, in three parts:

* **Submitting and following jobs**: ``Client`` (synchronous, for scripts and notebooks) and
  ``AsyncClient`` (the one implementation), plus module-level shortcuts on a default client:
  ``run``, ``submit``, ``get``, ``wait``, ``cancel``, ``release``, ``logs``, ``plan``,
  ``jobs``.
* **Values**: ``JobSpec`` (``load_spec``, ``parse_spec``), ``State``, ``Cause``, ``Outcome``,
  ``Failure``, ``Evidence``, ``JobStatus``, ``RecoveryPolicy`` and the error tree rooted at
  ``DispatchError`` (``JobFailed``, ``InvalidSpec``, ``Unsupported`` …).
* **Inside a job**: ``identity()`` and ``checkpoints()``, which need nothing but the
  standard library and dispatch's value types.

``import dispatch`` loads none of these until they are first used (module ``__getattr__``),
so it is fast and never imports an adapter, a scheduler client, torch, rich or the CLI.

>>> import dispatch
>>> dispatch.Cause("app_error") is dispatch.Cause.APP_ERROR
True
>>> dispatch.identity({}).in_job
False
"""

from __future__ import annotations

import importlib

#: typing.TYPE_CHECKING without importing typing: the local attempt runner, which imports this
#: package, starts faster without it
TYPE_CHECKING = False

#: public name -> the module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    # submitting and following jobs
    "AsyncClient": "dispatch.api",
    "Client": "dispatch.api",
    "Environment": "dispatch.api",
    "JobStatus": "dispatch.api",
    "AttemptStatus": "dispatch.api",
    "run": "dispatch.api.default",
    "submit": "dispatch.api.default",
    "get": "dispatch.api.default",
    "wait": "dispatch.api.default",
    "cancel": "dispatch.api.default",
    "release": "dispatch.api.default",
    "logs": "dispatch.api.default",
    "plan": "dispatch.api.default",
    "jobs": "dispatch.api.default",
    # values
    "JobSpec": "dispatch.model",
    "Resources": "dispatch.model",
    "RuntimeRef": "dispatch.model",
    "RecoveryPolicy": "dispatch.model",
    "RecoveryRule": "dispatch.model",
    "Backoff": "dispatch.model",
    "Action": "dispatch.model",
    "load_spec": "dispatch.model",
    "parse_spec": "dispatch.model",
    "State": "dispatch.model",
    "Cause": "dispatch.model",
    "Outcome": "dispatch.model",
    "Failure": "dispatch.model",
    "Evidence": "dispatch.model",
    "Plan": "dispatch.model",
    "CapabilityReport": "dispatch.model",
    "ExecutionIdentity": "dispatch.model",
    # errors
    "DispatchError": "dispatch.model",
    "TransientError": "dispatch.model",
    "PermanentError": "dispatch.model",
    "JobFailed": "dispatch.model",
    "InvalidSpec": "dispatch.model",
    "Unsupported": "dispatch.model",
    "ConfigError": "dispatch.model",
    "StateError": "dispatch.model",
    "NotFound": "dispatch.model",
    "Forbidden": "dispatch.model",
    "OutcomeUnknown": "dispatch.model",
    "SchedulerUnavailable": "dispatch.model",
    "NotBuiltYet": "dispatch.model",
    # inside a job
    "Identity": "dispatch.injob",
    "identity": "dispatch.injob",
    "Checkpoint": "dispatch.injob",
    "CheckpointFence": "dispatch.injob",
    "CheckpointExists": "dispatch.injob",
    "FencedWrite": "dispatch.injob",
    "checkpoints": "dispatch.injob",
}

#: kept literal for linters; a test checks it names exactly the exports
__all__ = [
    "Action",
    "AsyncClient",
    "AttemptStatus",
    "Backoff",
    "CapabilityReport",
    "Cause",
    "Checkpoint",
    "CheckpointExists",
    "CheckpointFence",
    "Client",
    "ConfigError",
    "DispatchError",
    "Environment",
    "Evidence",
    "ExecutionIdentity",
    "Failure",
    "FencedWrite",
    "Forbidden",
    "Identity",
    "InvalidSpec",
    "JobFailed",
    "JobSpec",
    "JobStatus",
    "NotBuiltYet",
    "NotFound",
    "Outcome",
    "OutcomeUnknown",
    "PermanentError",
    "Plan",
    "RecoveryPolicy",
    "RecoveryRule",
    "Resources",
    "RuntimeRef",
    "SchedulerUnavailable",
    "State",
    "StateError",
    "TransientError",
    "Unsupported",
    "__version__",
    "cancel",
    "checkpoints",
    "get",
    "identity",
    "jobs",
    "load_spec",
    "logs",
    "parse_spec",
    "plan",
    "release",
    "run",
    "submit",
    "wait",
]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dispatch-train")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":  # importlib.metadata is slow to import: only when asked
        globals()[name] = value = _version()
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dispatch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # for type checkers and IDEs; at run time these load lazily
    from typing import Any

    __version__: str
    from dispatch.api import AsyncClient, AttemptStatus, Client, Environment, JobStatus
    from dispatch.api.default import (
        cancel,
        get,
        jobs,
        logs,
        plan,
        release,
        run,
        submit,
        wait,
    )
    from dispatch.injob import (
        Checkpoint,
        CheckpointExists,
        CheckpointFence,
        FencedWrite,
        Identity,
        checkpoints,
        identity,
    )
    from dispatch.model import (
        Action,
        Backoff,
        CapabilityReport,
        Cause,
        ConfigError,
        DispatchError,
        Evidence,
        ExecutionIdentity,
        Failure,
        Forbidden,
        InvalidSpec,
        JobFailed,
        JobSpec,
        NotBuiltYet,
        NotFound,
        Outcome,
        OutcomeUnknown,
        PermanentError,
        Plan,
        RecoveryPolicy,
        RecoveryRule,
        Resources,
        RuntimeRef,
        SchedulerUnavailable,
        State,
        StateError,
        TransientError,
        Unsupported,
        load_spec,
        parse_spec,
    )

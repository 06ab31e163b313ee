"""Module-level shortcuts (``dispatch.run``, ``dispatch.submit`` …) on one default ``Client``.

The default client is made on first use from this process's configuration and state
directory (``$DISPATCH_CONFIG``, ``$DISPATCH_STATE_DIR``) and kept for the life of the
process; ``reset()`` closes it, so the next call reads the environment again. Each shortcut
only delegates to the ``Client`` method of the same name, which delegates to ``AsyncClient``.
Like ``Client``, they must not be called from inside a running event loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dispatch.api.client import SpecLike
from dispatch.api.status import JobStatus
from dispatch.api.sync import Client
from dispatch.model import Plan

_default: Client | None = None


def client() -> Client:
    """The default client, made on first use."""
    global _default
    if _default is None:
        _default = Client()
    return _default


def reset() -> None:
    """Close the default client; the next shortcut makes a new one from the environment."""
    global _default
    if _default is not None:
        _default.close()
        _default = None


def run(
    spec: SpecLike, *, spec_file: str | Path | None = None, raise_on_failure: bool = False
) -> JobStatus:
    """Submit ``spec`` (a ``JobSpec`` or a spec file's path) and drive it here to its end."""
    return client().run(spec, spec_file=spec_file, raise_on_failure=raise_on_failure)


def submit(spec: SpecLike, *, spec_file: str | Path | None = None, hold: bool = False) -> JobStatus:
    """Submit ``spec`` and return at once; a background supervisor drives it. With ``hold``
    no attempt starts until ``release``; see ``AsyncClient.submit``."""
    return client().submit(spec, spec_file=spec_file, hold=hold)


def get(job: str) -> JobStatus:
    """The recorded status of ``job`` (an id or an unambiguous prefix of one)."""
    return client().get(job)


def wait(job: str, *, timeout: float | None = None, raise_on_failure: bool = False) -> JobStatus:
    """Wait until ``job`` has ended; see ``AsyncClient.wait``."""
    return client().wait(job, timeout=timeout, raise_on_failure=raise_on_failure)


def cancel(job: str, *, actor: str | None = None, reason: str = "cancelled") -> JobStatus:
    """Ask for ``job`` to be cancelled; see ``AsyncClient.cancel``."""
    return client().cancel(job, actor=actor, reason=reason)


def release(job: str) -> JobStatus:
    """Release a held ``job``: its next attempt starts; see ``AsyncClient.release``."""
    return client().release(job)


def logs(job: str, *, rank: int | None = None, follow: bool = False) -> Iterator[str]:
    """Output lines of the latest attempt of ``job`` (one rank, or all ranks prefixed)."""
    return client().logs(job, rank=rank, follow=follow)


def plan(spec: SpecLike, *, spec_file: str | Path | None = None) -> Plan:
    """What attempt 1 of ``spec`` would be on its cluster; creates nothing."""
    return client().plan(spec, spec_file=spec_file)


def jobs(*, include_ended: bool = True, limit: int | None = None) -> list[JobStatus]:
    """Recorded jobs, newest first."""
    return client().list(include_ended=include_ended, limit=limit)

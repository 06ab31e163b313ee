"""How an argv reaches the cluster: run here (``local``) or on a login node (``ssh``).

A ``Transport`` only rewrites the argv (pure, testable); the ``Runner`` is the one place that
starts processes. Errors are translated here: a command that cannot be started or a login
node that cannot be reached is ``SchedulerUnavailable``; a timeout is ``OutcomeUnknown``
(the command may have taken effect).
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dispatch.model import ConfigError, OutcomeUnknown, SchedulerUnavailable

#: ssh's own exit status when the connection (not the remote command) failed
SSH_FAILED = 255


@dataclass(frozen=True, slots=True)
class Invocation:
    """An argv ready to start on this machine, with the environment variables to add."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


class Transport(Protocol):
    """Turns a Slurm command (with the variables it needs) into what runs on this machine."""

    @property
    def name(self) -> str: ...

    def invocation(self, argv: Sequence[str], env: Mapping[str, str]) -> Invocation: ...


@dataclass(frozen=True, slots=True)
class LocalTransport:
    """Commands run on this machine, which is a Slurm submit host."""

    name: str = "local"

    def invocation(self, argv: Sequence[str], env: Mapping[str, str]) -> Invocation:
        return Invocation(tuple(argv), dict(env))


@dataclass(frozen=True, slots=True)
class SshTransport:
    """Commands run on a login node through ``ssh`` (key-based, never prompting).

    The remote command is one shell-quoted string, so arguments arrive intact; variables
    are passed with ``env`` on the remote side.
    """

    host: str
    user: str | None = None
    port: int | None = None
    options: tuple[str, ...] = ()
    name: str = "ssh"

    def invocation(self, argv: Sequence[str], env: Mapping[str, str]) -> Invocation:
        remote = list(argv)
        if env:
            remote = ["env", *(f"{k}={v}" for k, v in env.items()), *remote]
        target = f"{self.user}@{self.host}" if self.user else self.host
        command = ["ssh", "-o", "BatchMode=yes"]
        if self.port:
            command += ["-p", str(self.port)]
        command += [*self.options, target, "--", shlex.join(remote)]
        return Invocation(tuple(command))


@dataclass(frozen=True, slots=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        message = (self.stderr.strip() or self.stdout.strip())[:500]
        return f"{shlex.join(self.argv)} exited {self.returncode}: {message}"


class Runner(Protocol):
    """Runs one Slurm command on the cluster and returns what it printed."""

    transport: Transport

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """``env``: variables for this command only (sbatch's ``--export`` takes the job's
        environment and secrets from them); never logged."""
        ...


#: what Slurm commands and ssh print when the cluster's configuration, not its load, is wrong
CONFIGURATION_MARKERS = (
    "s_p_parse_file: cannot stat file",
    "Unable to process configuration file",
    "Could not establish a configuration source",
    "getaddrinfo() failed: Name or service not known",
    "Could not resolve hostname",
)


def configuration_problem(stderr: str) -> str | None:
    """The first line of ``stderr`` that shows a configuration error, or None."""
    for line in stderr.splitlines():
        if any(marker in line for marker in CONFIGURATION_MARKERS):
            return line.strip()[:300]
    return None


class ProcessRunner:
    """Runs commands as child processes through a transport. The only I/O of the adapter's
    commands. Never raises for a non-zero exit: callers decide from ``CommandResult``."""

    def __init__(
        self, transport: Transport, env: Mapping[str, str] | None = None, timeout: float = 60.0
    ) -> None:
        self.transport = transport
        self.env = dict(env or {})
        self.timeout = timeout

    async def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        call = self.transport.invocation(argv, {**(env or {}), **self.env})
        self._check_configuration(call)
        try:
            process = await asyncio.create_subprocess_exec(
                *call.argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **call.env},
            )
        except FileNotFoundError:
            raise ConfigError(
                f"{call.argv[0]!r} is not installed here (not on PATH): install Slurm's client "
                "commands, or reach a login node with `transport: ssh`"
            ) from None
        except OSError as exc:
            raise SchedulerUnavailable(
                f"cannot run {call.argv[0]!r} for the Slurm cluster: {exc.strerror or exc}"
            ) from None
        try:
            out, err = await asyncio.wait_for(
                process.communicate(stdin.encode() if stdin is not None else None), self.timeout
            )
        except TimeoutError:
            process.kill()
            await process.wait()
            raise OutcomeUnknown(
                f"{shlex.join(argv)} did not finish within {self.timeout:g} s"
            ) from None
        result = CommandResult(
            tuple(call.argv),
            process.returncode if process.returncode is not None else -1,
            out.decode(errors="replace"),
            err.decode(errors="replace"),
        )
        if not result.ok:
            problem = configuration_problem(result.stderr)
            if problem is not None:
                raise ConfigError(
                    f"the Slurm cluster is misconfigured, not busy: {problem} (from "
                    f"{shlex.join(argv)}); fix the cluster's slurmConf, its hosts or the ssh host"
                )
        if self.transport.name == "ssh" and result.returncode == SSH_FAILED:
            raise SchedulerUnavailable(f"ssh to the login node failed: {result.describe()}")
        return result

    def _check_configuration(self, call: Invocation) -> None:
        """A ``SLURM_CONF`` that names no file: every command would retry for 60 s, then fail."""
        conf = call.env.get("SLURM_CONF")
        if self.transport.name == "local" and conf and not os.path.isfile(conf):
            raise ConfigError(
                f"slurmConf {conf} is not a file here: fix `slurmConf` in the configuration"
            )

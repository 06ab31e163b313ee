"""``AsyncClient``: the one implementation of dispatch's Python API (the CLI calls it too).

Submitting checks the cluster's capabilities first, so a refused job is never recorded nor
created. A submitted job is driven by a supervisor: in-process for ``run`` (the caller follows
it), or by a detached background supervisor for ``submit`` (the job outlives the caller).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from pathlib import Path

from dispatch.adapters.base import OUTPUT_GONE, OutputReader
from dispatch.adapters.secrets import capture_secrets, resolve_secret_files
from dispatch.api.background import ensure_supervisor
from dispatch.api.environment import Environment
from dispatch.api.status import JobStatus
from dispatch.model import (
    CapabilityReport,
    Evidence,
    InvalidSpec,
    Job,
    JobFailed,
    JobSpec,
    NotBuiltYet,
    NotFound,
    PermanentError,
    Plan,
    SpecProblem,
    State,
    load_spec,
    resolve_working_dir,
)
from dispatch.model.environ import capture_environment
from dispatch.records import Records
from dispatch.supervise import Supervisor

#: the id ``plan`` shows for a job that has not been submitted yet
PREVIEW_SUFFIX = "preview"
#: seconds between observations while ``run`` drives a job in the foreground
DRIVE_POLL_INTERVAL = 0.25
#: seconds after which a killed ``run`` process's job is taken over by the background supervisor
FOREGROUND_LEASE_TTL = 10.0


#: what the submitting methods accept: a ``JobSpec``, or the path of a job spec file
SpecLike = JobSpec | str | Path


def as_spec(spec: SpecLike, spec_file: str | Path | None) -> tuple[JobSpec, str | Path | None]:
    """A spec and the file its ``workingDir`` is relative to; a path is loaded (``InvalidSpec``)."""
    if isinstance(spec, JobSpec):
        return spec, spec_file
    return load_spec(spec), spec_file if spec_file is not None else spec


def raise_if_failed(status: JobStatus) -> JobStatus:
    """``status`` itself when the job succeeded; ``JobFailed`` when it ended otherwise."""
    if status.is_terminal and not status.succeeded:
        raise JobFailed(status.id, status.outcome, status)
    return status


def default_actor() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (containers)
        return "unknown-user"


class AsyncClient:
    """Submit, follow, inspect and cancel jobs. Every method is a coroutine.

    ``env`` defaults to the configuration and state directory of this process
    (``$DISPATCH_CONFIG``, ``$DISPATCH_STATE_DIR``). ``background=False`` stops ``submit``
    and ``cancel`` from starting a background supervisor (tests, or when a long-lived
    ``dispatch supervise`` already runs).
    """

    def __init__(self, env: Environment | None = None, *, background: bool = True) -> None:
        self.env = env or Environment.load()
        self.background = background
        self._records: Records | None = None

    @property
    def records(self) -> Records:
        if self._records is None:
            self._records = self.env.open_records()
        return self._records

    def close(self) -> None:
        if self._records is not None:
            self._records.close()
            self._records = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()

    # --- before anything exists -------------------------------------------------------------

    async def capabilities(self, spec: JobSpec) -> CapabilityReport:
        """The spec's cluster's answers and its refusals for ``spec``; creates nothing."""
        return await self.env.adapter(spec.cluster).capabilities(spec)

    async def plan(self, spec: SpecLike, *, spec_file: str | Path | None = None) -> Plan:
        """What attempt 1 of ``spec`` would be on its cluster, and every refusal; creates nothing.

        ``spec`` is a ``JobSpec`` or the path of a job spec file (as for every submitting
        method); a relative ``workingDir`` is resolved against ``spec_file``'s folder.
        """
        spec, spec_file = as_spec(spec, spec_file)
        spec = resolve_secret_files(resolve_working_dir(spec, spec_file), spec_file)
        environment, _ = capture_environment(spec.inherit_env, os.environ)
        job = Job(
            id=f"{spec.name}-{PREVIEW_SUFFIX}",
            spec=spec,
            created_at=self.env.clock.now(),
            environment=environment,
        )
        return await self.env.adapter(spec.cluster).plan(job, 1)

    # --- submitting ---------------------------------------------------------------------------

    async def _accept(
        self, spec: SpecLike, spec_file: str | Path | None, *, held_by: str | None = None
    ) -> Job:
        spec, spec_file = as_spec(spec, spec_file)
        spec = resolve_secret_files(resolve_working_dir(spec, spec_file), spec_file)
        # the ranks' environment is captured here, whatever process later starts them
        environment, missing = capture_environment(spec.inherit_env, os.environ)
        if missing:
            raise InvalidSpec(
                [
                    SpecProblem(
                        "inheritEnv",
                        f"names {', '.join(missing)}, not set in the environment of this submit",
                        "set it in the shell that submits, or remove it from inheritEnv",
                    )
                ]
            )
        secrets = capture_secrets(spec, os.environ)
        (await self.capabilities(spec)).raise_if_refused()
        job = self.records.create_job(
            spec, held_by=held_by, environment=environment, submitted_by=default_actor()
        )
        self.env.secrets.keep(job.id, secrets)
        return job

    async def submit(
        self, spec: SpecLike, *, spec_file: str | Path | None = None, hold: bool = False
    ) -> JobStatus:
        """Record the job and return at once; a background supervisor drives it.

        With ``hold`` the job is recorded ``held`` (held at submission by this user, in the
        same write that records it) and nothing is created on the scheduler: no attempt
        starts until ``release``, and ``cancel`` ends it ``cancelled`` with no attempt. The
        hold is dispatch's own, so it works on every cluster.

        Raises ``Unsupported`` (nothing recorded or created) when the cluster refuses it,
        ``ConfigError`` for an unknown cluster.
        """
        job = await self._accept(spec, spec_file, held_by=default_actor() if hold else None)
        cluster = self.env.config.cluster(job.cluster)
        # a held job needs no supervisor until its release; a remote-supervised cluster's jobs
        # are driven by the team's supervisors, from the shared records
        if self.background and not hold and cluster.supervised_here:
            ensure_supervisor(self.env)
        return await self.get(job.id)

    async def run(
        self,
        spec: SpecLike,
        *,
        spec_file: str | Path | None = None,
        on_submitted: Callable[[JobStatus], Awaitable[None] | None] | None = None,
        raise_on_failure: bool = False,
    ) -> JobStatus:
        """Submit and drive the job in this process until it ends; returns its final status.

        If the caller is cancelled (Ctrl-C), the job is cancelled and driven to its end first.
        With ``raise_on_failure`` a job that ends failed or cancelled raises ``JobFailed``
        (carrying the final status and outcome) instead of being returned.
        """
        job = await self._accept(spec, spec_file)
        if self.background:
            # A standby: if this process dies without a chance to cancel (kill -9), the
            # background supervisor takes the job's lease when it expires and drives the job
            # to its end, so its ranks are never left running unsupervised.
            ensure_supervisor(self.env)
        if on_submitted is not None:
            result = on_submitted(await self.get(job.id))
            if result is not None:
                await result
        final = await self.drive(job.id)
        return raise_if_failed(final) if raise_on_failure else final

    async def drive(self, job_id: str) -> JobStatus:
        """Drive ``job_id`` in this process until it is terminal (cancelling it if interrupted)."""
        supervisor = Supervisor(
            self.records,
            self.env.adapter,
            self.env.clock,
            f"{default_actor()}-run",
            poll_interval=DRIVE_POLL_INTERVAL,
            lease_ttl=FOREGROUND_LEASE_TTL,
        )
        try:
            await supervisor.drive(job_id)
        except (asyncio.CancelledError, KeyboardInterrupt):
            self.records.request_cancel(job_id, default_actor(), "interrupted (Ctrl-C)")
            await asyncio.shield(supervisor.drive(job_id))
            raise
        return await self.get(job_id)

    # --- reading --------------------------------------------------------------------------------

    def resolve(self, job: str) -> str:
        """A job id from an id or an unambiguous prefix of one. Raises ``NotFound``."""
        if not job.strip():
            raise NotFound("no job named: give a job id or a prefix of one (see `dispatch list`)")
        try:
            return self.records.get_job(job).id
        except NotFound:
            matches = [r.id for r in self.records.list_jobs() if r.id.startswith(job)]
            if len(matches) == 1:
                return matches[0]
            if matches:
                raise NotFound(
                    f"{job!r} matches several jobs: {', '.join(sorted(matches)[:5])}"
                ) from None
            raise

    async def get(self, job: str) -> JobStatus:
        """The job's recorded status (raises ``NotFound``)."""
        job_id = self.resolve(job)
        record = self.records.get_job(job_id)
        attempts = self.records.attempts(job_id)
        evidence = {a.attempt: self.records.evidence(job_id, a.attempt) for a in attempts}
        return JobStatus.of(record, attempts, self.records.log(job_id), evidence)

    async def list(
        self, *, include_ended: bool = True, limit: int | None = None
    ) -> list[JobStatus]:
        """Jobs, newest first (``include_ended=False``: only those not yet ended)."""
        records = self.records.list_jobs(open_only=not include_ended, limit=limit)
        return [JobStatus.of(r) for r in records]

    async def wait(
        self,
        job: str,
        *,
        timeout: float | None = None,
        poll: float = 0.5,
        raise_on_failure: bool = False,
    ) -> JobStatus:
        """Wait until the job has ended and return its status.

        Raises ``TimeoutError`` when ``timeout`` seconds pass first (the job is left running),
        and with ``raise_on_failure``, ``JobFailed`` when it ended failed or cancelled.
        """
        job_id = self.resolve(job)

        async def ended() -> JobStatus:
            while True:
                status = await self.get(job_id)
                if status.is_terminal:
                    return status
                await self.env.clock.sleep(poll)

        final = await asyncio.wait_for(ended(), timeout)
        return raise_if_failed(final) if raise_on_failure else final

    # --- acting ---------------------------------------------------------------------------------

    async def cancel(
        self, job: str, *, actor: str | None = None, reason: str = "cancelled"
    ) -> JobStatus:
        """Ask for the job to be cancelled; the supervisor stops its attempt and starts no new
        one. Cancelling an ended job changes nothing."""
        job_id = self.resolve(job)
        status = await self.get(job_id)
        if not status.is_terminal:
            self.records.request_cancel(job_id, actor or default_actor(), reason)
            if self.background:
                ensure_supervisor(self.env)
        return await self.get(job_id)

    async def release(self, job: str) -> JobStatus:
        """Release a held job (held by its recovery policy, or at submission): the supervisor
        starts its next attempt (attempt 1 for a job held at submission). Raises
        ``PermanentError`` when the job is not held."""
        job_id = self.resolve(job)
        status = await self.get(job_id)
        if status.state is not State.HELD:
            raise PermanentError(
                f"job {job_id} is {status.state.value}, not held; only a held job can be released"
            )
        self.records.request_release(job_id)
        if self.background:
            ensure_supervisor(self.env)
        return await self.get(job_id)

    async def logs(
        self, job: str, *, rank: int | None = None, follow: bool = False, attempt: int | None = None
    ) -> AsyncGenerator[str, None]:
        """Output lines of one rank (or all ranks, prefixed) of the job's latest attempt."""
        job_id = self.resolve(job)
        record = self.records.get_job(job_id)
        handles = [
            a.handle
            for a in self.records.attempts(job_id)
            if a.handle is not None and attempt in (None, a.attempt)
        ]
        if not handles:
            raise NotFound(f"job {job_id} has no started attempt yet")
        handle = handles[-1]
        adapter = self.env.adapter(record.job.spec.cluster)
        if not isinstance(adapter, OutputReader):
            raise NotBuiltYet(f"the {adapter.kind!r} adapter cannot read output")
        kept = kept_output(self.records.evidence(job_id, handle.attempt))
        try:
            async for line in adapter.read_output(handle, rank=rank, follow=follow):
                gone = _GONE.match(line) if rank is None else None
                if gone is None or int(gone.group(1)) not in kept:
                    yield line
                    continue
                for kept_line in _kept_lines(int(gone.group(1)), kept):
                    yield f"[rank {gone.group(1)}] {kept_line}"
        except NotFound:
            if rank is None or rank not in kept:
                raise
            for kept_line in _kept_lines(rank, kept):
                yield kept_line


#: an ``OutputReader``'s line for a rank whose pod (and output) is gone
_GONE = re.compile(r"^\[rank (\d+)\] \(.*" + re.escape(OUTPUT_GONE) + r"\)$")


def kept_output(evidence: Sequence[Evidence]) -> dict[int, list[Evidence]]:
    """The last output of ranks that dispatch kept in the records (evidence of kind ``log``:
    before a failed rank's pod was deleted), by rank; a restarted container's earlier run
    first."""
    found: dict[int, list[Evidence]] = {}
    for item in evidence:
        data = item.data if isinstance(item.data, dict) else {}
        rank = data.get("rank")
        if item.kind == "log" and isinstance(rank, int) and isinstance(data.get("lines"), list):
            found.setdefault(rank, []).append(item)
    for items in found.values():
        items.sort(key=lambda e: (not e.data.get("previous"), e.observed_at))
    return found


def _kept_lines(rank: int, kept: dict[int, list[Evidence]]) -> list[str]:
    """A kept tail as ``dispatch logs`` prints it: marked, since the live log is gone."""
    lines: list[str] = []
    for item in kept[rank]:
        cut = ", cut to its end" if item.data.get("truncated") else ""
        lines.append(f"(kept by dispatch: {item.summary}{cut}; the pod and its log are gone)")
        lines.extend(str(line) for line in item.data["lines"])
    return lines

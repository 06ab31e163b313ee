"""The adapter contract (SPI): what every scheduler binding promises dispatch.

An adapter is bound to one configured cluster. Every method is a coroutine (or an async
iterator); none blocks the event loop. Errors raised are from ``dispatch.model.errors``:

* ``Unsupported`` — the job cannot run on this cluster; *every* reason is attached and nothing
  of the attempt exists on the scheduler afterwards.
* ``TransientError`` (``SchedulerUnavailable``, ``OutcomeUnknown``) — try again later. After
  ``OutcomeUnknown`` the caller must ``observe`` before acting; only ``start`` may be repeated
  blindly, because it adopts what already exists.
* ``PermanentError`` (``NotFound``, ``Forbidden``, ``InvalidSpec``) — retrying cannot help.

Third-party exceptions never escape an adapter.

Optional features are named Protocols below, each detected with ``isinstance`` (never with
``getattr``): ``OutputReader``, ``IdentityWeakener``, ``Holder``, ``HeldStarter``,
``EvidenceSeeder``, ``LateEvidence`` and ``Draining``. The conformance suite checks each
feature an adapter has.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from dispatch.adapters.secrets import SecretStore
from dispatch.clock import Clock, SystemClock
from dispatch.config import ClusterConfig
from dispatch.model import (
    AttemptHandle,
    CapabilityReport,
    Evidence,
    Job,
    JobSpec,
    Observation,
    Plan,
)


@dataclass(frozen=True, slots=True)
class AdapterContext:
    """What an adapter is given besides its cluster: time, a folder of its own for state, and
    where the kept values of jobs' ``secretEnv`` are (``adapters.secrets``)."""

    state_dir: Path
    clock: Clock = field(default_factory=SystemClock)
    secrets: SecretStore | None = None

    def secret_values(self, job: Job) -> dict[str, str]:
        """The values of ``job``'s ``secretEnv`` now (``InvalidSpec`` when one is missing)."""
        return (self.secrets or SecretStore(self.state_dir / "secrets")).values(job)


@runtime_checkable
class Adapter(Protocol):
    """The core calls every adapter implements."""

    #: the adapter's registered name ("local", "kubeflow", "slurm", "memory")
    kind: str
    #: the cluster this instance is bound to
    cluster: ClusterConfig

    async def capabilities(self, spec: JobSpec | None = None) -> CapabilityReport:
        """The cluster's answers, probed once and cached; with ``spec``, the refusals for it.

        Creates nothing. A report with refusals is returned, not raised: callers decide
        (``CapabilityReport.raise_if_refused``). Raises ``TransientError`` when the cluster
        cannot be probed right now.
        """
        ...

    async def plan(self, job: Job, attempt: int) -> Plan:
        """The dry run of ``start(job, attempt)`` as a value: the exact objects, script or argv.

        Creates nothing; a refused job yields a plan whose capabilities carry the refusals.
        """
        ...

    async def start(self, job: Job, attempt: int) -> AttemptHandle:
        """Create attempt ``attempt`` of ``job`` on the scheduler and return its handle.

        Idempotent: names are deterministic from (job id, attempt), so a second call for the
        same pair adopts what exists and returns an equal handle; it never creates a second
        execution. A successful return guarantees the scheduler has accepted the attempt
        (it may still be queued). Raises ``Unsupported`` (nothing left behind) when the job
        cannot run, ``OutcomeUnknown`` when the request's effect is not known.
        """
        ...

    async def observe(self, handle: AttemptHandle) -> Observation:
        """The attempt's current outcome and the evidence seen for it.

        Never changes anything. An attempt the scheduler no longer knows is reported with
        ``gone=True`` and the outcome derived from what was seen before, else ``unknown``.
        """
        ...

    def watch(self, handles: Sequence[AttemptHandle]) -> AsyncIterator[Observation]:
        """Observations for these attempts as they change, until the caller stops iterating.

        Must not poll per job: one stream (or one query per cycle) per kind of object,
        however many attempts are watched. Each attempt's first observation is yielded
        promptly, so a watcher learns the present state without waiting for a change.
        """
        ...

    async def cancel(self, handle: AttemptHandle, actor: str, reason: str) -> None:
        """Ask the scheduler to stop the attempt; returns once the request is accepted.

        Idempotent: cancelling an ended or unknown attempt is not an error. The attempt's
        outcome becomes ``cancelled`` (cause ``cancelled``, naming ``actor``) unless it had
        already ended otherwise.
        """
        ...


#: what an ``OutputReader`` says of a rank whose output is gone with its pod (all ranks:
#: the line ``[rank N] (<GONE>)``; one rank: ``NotFound`` naming it)
OUTPUT_GONE = "its output was deleted with it"


@runtime_checkable
class OutputReader(Protocol):
    """Optional: read what the ranks of an attempt printed."""

    def read_output(
        self, handle: AttemptHandle, rank: int | None = None, follow: bool = False
    ) -> AsyncIterator[str]:
        """Lines of output (without trailing newline) of one rank, or of all ranks prefixed
        with ``[rank N]`` when ``rank`` is None. With ``follow`` the iterator continues until
        the attempt ends. Raises ``NotFound`` for a rank the attempt does not have.
        """
        ...


@runtime_checkable
class IdentityWeakener(Protocol):
    """Optional: adapters whose cluster settings can let a rank run twice within an attempt."""

    def weakened_identity(self, spec: JobSpec) -> str | None:
        """Why ranks of this spec may run more than once per attempt here, or None."""
        ...


@runtime_checkable
class Holder(Protocol):
    """Optional: schedulers that can accept an attempt without starting it."""

    async def hold(self, handle: AttemptHandle) -> None:
        """Keep the attempt from starting. Idempotent; an attempt already running is an
        ``Unsupported`` refusal with rule ``hold-running``."""
        ...

    async def release(self, handle: AttemptHandle) -> None:
        """Let a held attempt start. Idempotent."""
        ...


@runtime_checkable
class HeldStarter(Protocol):
    """Optional: schedulers that can create an attempt held, accepted but not started.

    ``start(job, attempt, held=True)`` makes the attempt exist on the scheduler (a suspended
    TrainJob, a held Slurm job) without letting any rank run; it is observed ``held`` (or
    ``queued``) until something releases it, and ``cancel`` removes it like any attempt. The
    other guarantees of ``Adapter.start`` hold unchanged (idempotent; adopting an existing
    attempt leaves it as it is). ``plan(job, attempt, held=True)`` is its dry run.
    """

    #: always True; marks the feature, since ``isinstance`` cannot see a keyword argument
    starts_held: bool

    async def plan(self, job: Job, attempt: int, *, held: bool = False) -> Plan: ...

    async def start(self, job: Job, attempt: int, *, held: bool = False) -> AttemptHandle: ...


@runtime_checkable
class EvidenceSeeder(Protocol):
    """Optional: adapters that derive outcomes over evidence the cluster may have deleted
    since it was recorded, and so want the records store's evidence of an attempt back."""

    def seed_evidence(self, handle: AttemptHandle, evidence: Sequence[Evidence]) -> None:
        """Evidence recorded earlier for this attempt (by this or another process), handed
        back before the attempt is observed or watched. Idempotent: a record seen twice
        counts once. Never blocks and never raises for evidence it cannot read."""
        ...


@runtime_checkable
class LateEvidence(Protocol):
    """Optional: adapters that learn facts about an attempt after its outcome was final and
    it stopped being watched (e.g. the cluster refused to resume an ended attempt)."""

    def late_evidence(self) -> list[tuple[str, int, tuple[Evidence, ...]]]:
        """(job id, attempt, records) found since the last call; drained. Never blocks and
        never raises. The records add to the attempt's evidence; they never change its
        outcome."""
        ...


@runtime_checkable
class Draining(Protocol):
    """Optional: adapters that finish some of a call's work in the background after the call
    returned (the Kubeflow adapter makes each runtime copy owned by its TrainJob so)."""

    async def drain(self) -> None:
        """Wait until the work started on the running event loop is done, for a bounded time
        (what is left is found again later, by the adapter's own means). Never raises but
        for the caller's cancellation."""
        ...


@runtime_checkable
class Backlogged(Protocol):
    """Optional: adapters whose reports of ends can fall behind what the cluster did (the
    Kubeflow adapter's evidence streams, when the supervisor's loop is too busy to read them)."""

    def behind(self) -> float:
        """Seconds the adapter's reports lag behind the cluster, as measured lately (0: on
        time, or nothing measured for a while). Never blocks and never raises."""
        ...

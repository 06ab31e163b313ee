"""The Kubeflow adapter: dispatch's contract carried out with Trainer v2 TrainJobs.

Differences from the SPI's general guarantees (``dispatch.adapters.base``):

* ``capabilities`` probes the cluster once per adapter (APIs, Trainer version, namespace, one
  SelfSubjectAccessReview per verb) and reads the job's runtime on every call; the runtime
  rules apply there, the job checks (``procs-per-node``, ``reserved-env``, ``name-length``)
  only in ``plan`` and ``start`` (spec/kubeflow-adapter.md, sections 1 and 2).
* ``start(job, attempt, held=False)`` adopts the attempt's TrainJob when it exists (even if
  the job would be refused now); otherwise it plans, creates the runtime copy, then the
  TrainJob (suspended when ``held``), and returns; the patch making the copy owned by the
  TrainJob is sent in the background, and a copy a crash left unowned is found by the sweep
  of the next start or watch in its namespace (``api/owners.py``); see ``api/submit.py`` for
  adoption and clean-up. ``plan`` takes the same ``held``. ``aclose`` waits up to
  ``OWNERS_DRAIN`` seconds for the patches still owed.
* ``cancel`` writes ``dispatch.dev/cancelled-by`` / ``dispatch.dev/cancel-reason`` on the
  TrainJob, then deletes it with *foreground* propagation: the TrainJob (annotated, so read as
  cancelled) stays visible until its JobSet and pods are gone, and takes the runtime copy with
  it. An attempt that already ended is left as it is.
* Identity is the uid, not the name (``live/identity.py``): ``start`` records the TrainJob's
  uid in the handle; reads are checked against it, patches and deletes carry it (the API
  server refuses another object), and a TrainJob of another uid under the name ends the
  attempt ``unknown`` with evidence naming both uids, and is never touched. Handles without a
  uid (recorded before) act by name.
* ``watch`` follows every attempt over one stream per object kind (``live/capture.py``,
  ``api/kinds.py``) and derives outcomes with the cause function over all evidence kept per
  attempt (``live/verdict.py``, design note 0006); each observation carries the new evidence.
  ``observe`` reads one attempt's objects once (``live/snapshot.py``) and adds what
  ``seed_evidence`` handed back from the records store.
* ``watch`` also *retires* TrainJobs that must not run again: one whose attempt ended but
  that could still run (evicted by Kueue after a rank started, ended by dispatch) or that ran
  again after it ended (platform reference A.7) is annotated ``dispatch.dev/retired`` and
  deleted. ``observe`` changes nothing.
* ``read_output`` (``OutputReader``) reads the trainer containers' logs by rank, once or
  followed until the attempt ends (``live/output.py``); a rank whose pod is gone says so.
* ``weakened_identity`` answers from the runtime as last read by this adapter (every
  submission reads it); before any read, a cluster with ``allowRankRestart: true`` answers a
  conservative reason saying the runtime has not been read.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.kubeflow.api import owners as owners_api
from dispatch.adapters.kubeflow.api import submit
from dispatch.adapters.kubeflow.api.client import (
    REQUEST_TIMEOUT,
    RUNTIMES,
    TRAINJOBS,
    Connection,
    Session,
)
from dispatch.adapters.kubeflow.api.credentials import SERVICE_ACCOUNT, default_namespace, locate
from dispatch.adapters.kubeflow.api.errors import ApiRejected, Conflict
from dispatch.adapters.kubeflow.api.kinds import WatchedKind
from dispatch.adapters.kubeflow.api.owners import CopyOwners
from dispatch.adapters.kubeflow.api.probe import ClusterFacts, answers, probe, refusals
from dispatch.adapters.kubeflow.api.secret import with_secret_values
from dispatch.adapters.kubeflow.api.throttle import submitting
from dispatch.adapters.kubeflow.causes.coarse import (
    ANNOTATION_CANCEL_REASON,
    ANNOTATION_CANCELLED_BY,
    ANNOTATION_ENDED,
    ANNOTATION_RETIRED,
    ANNOTATION_STARTED,
    trainjob_outcome,
)
from dispatch.adapters.kubeflow.live.alongside import Read, alongside
from dispatch.adapters.kubeflow.live.attribution import TrainJobRef
from dispatch.adapters.kubeflow.live.capture import Capture, Sleep
from dispatch.adapters.kubeflow.live.identity import (
    REPLACED,
    is_replaced,
    recorded_uid,
    replaced_by,
    replaced_outcome,
)
from dispatch.adapters.kubeflow.live.lastwords import last_words
from dispatch.adapters.kubeflow.live.output import read_output
from dispatch.adapters.kubeflow.live.snapshot import merged, snapshot
from dispatch.adapters.kubeflow.live.streams import key_of
from dispatch.adapters.kubeflow.live.verdict import DEFAULT_SETTLE, Verdicts
from dispatch.adapters.kubeflow.live.watching import RetireSweep, watch_attempts
from dispatch.adapters.kubeflow.objects import as_list, dig, format_time, text_of
from dispatch.adapters.kubeflow.planning.names import trainjob_name
from dispatch.adapters.kubeflow.planning.plan import NO_RUNTIME, plan_objects, runtime_verdict
from dispatch.adapters.kubeflow.planning.rules import RuntimeVerdict, check_runtime
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings, parse_settings
from dispatch.adapters.kubeflow.planning.trainjob import LABEL_QUEUE
from dispatch.aio import stop
from dispatch.config import ClusterConfig
from dispatch.log import logger
from dispatch.model import (
    AttemptHandle,
    Capability,
    CapabilityReport,
    Cause,
    DispatchError,
    Evidence,
    Job,
    JobSpec,
    NotFound,
    Observation,
    Outcome,
    Plan,
    State,
    TransientError,
)
from dispatch.model.identity import ENV_ATTEMPT, ENV_JOB

RuntimeKey = tuple[str, str]
#: seconds one read of a runtime serves the starts that need it (``_shared_runtime``)
RUNTIME_FRESH = 2.0

#: real seconds ``drain`` (and so ``aclose``) waits for the owner patches still owed
#: (``api/owners.py``)
OWNERS_DRAIN = 10.0

#: ended attempts remembered as delivered with their last output (a restarted watch repeats
#: their ends while the supervisor has not recorded them yet: not read again)
SPOKEN_KEPT = 10_000

log = logger(__name__)

T = TypeVar("T")
#: work several callers share: the event loop it runs on, and its task
Shared = tuple[asyncio.AbstractEventLoop, "asyncio.Future[T]"]


def _shared(current: Shared[T] | None, begin: Callable[[], Awaitable[T]]) -> Shared[T]:
    """``current`` if it can still serve (on this event loop, not failed), else ``begin()``
    started as a task on this loop."""
    loop = asyncio.get_running_loop()
    if current is not None and current[0] is loop:
        task = current[1]
        if not task.done() or (not task.cancelled() and task.exception() is None):
            return current
    return loop, asyncio.ensure_future(begin())


#: the stream a start's TrainJob comes back in (``Streams.created``)
TRAINJOB_STREAM = WatchedKind(TRAINJOBS).name


class KubeflowAdapter:
    """One Kubeflow cluster (a kubeconfig context and a namespace). An ``IdentityWeakener``."""

    kind = "kubeflow"
    starts_held = True  # ``HeldStarter``: a held attempt is a suspended TrainJob

    def __init__(
        self,
        cluster: ClusterConfig,
        context: AdapterContext,
        *,
        request_timeout: float | None = None,
        sleep: Sleep = asyncio.sleep,
        settle: float = DEFAULT_SETTLE,
        service_account: Path = SERVICE_ACCOUNT,
    ) -> None:
        """``service_account``: where a pod's service account files are, used inside a pod
        when the cluster names no kubeconfig (``api/credentials.py``)."""
        self.cluster = cluster
        self.context = context
        self.settings = parse_settings(cluster)
        source = locate(
            self.settings.kubeconfig, self.settings.context, service_account=service_account
        )
        self.connection = Connection(
            source,
            self.settings.context,
            request_timeout=REQUEST_TIMEOUT if request_timeout is None else request_timeout,
            max_in_flight=self.settings.max_in_flight,
        )
        self._resolved: KubeflowSettings | None = None
        self._facts: ClusterFacts | None = None
        self._probed_at: float | None = None
        self._runtimes: dict[RuntimeKey, Any] = {}  # last read of each runtime (None: absent)
        #: the read of each runtime the starts share: (when it began, the read)
        self._runtime_reads: dict[RuntimeKey, tuple[float, Shared[Any] | None]] = {}
        self._probe: Shared[ClusterFacts] | None = None  # the probe starts share
        self._sleep = sleep
        self._capture: Capture | None = None
        self._capture_loop: asyncio.AbstractEventLoop | None = None
        #: the owner patches of runtime copies, and the namespaces swept, on one event loop
        self._owners: CopyOwners | None = None
        self._owners_loop: asyncio.AbstractEventLoop | None = None
        self._sweeps: dict[str, tuple[asyncio.Task[int], float]] = {}  # (sweep, when begun)
        self._seeded: dict[TrainJobRef, list[Evidence]] = {}
        self._cancelled: dict[TrainJobRef, str] = {}  # who cancelled, through this adapter
        #: the uid each followed TrainJob had when dispatch created it (``live/identity.py``)
        self._uids: dict[TrainJobRef, str] = {}
        #: the (job, attempt) of each TrainJob name followed, for ``late_evidence``
        self._attempts: dict[str, tuple[str, int]] = {}
        #: the TrainJobs marked ``dispatch.dev/started`` (or found marked) by this adapter
        self._started: set[TrainJobRef] = set()
        #: what the watches still check for retirement, across the watches' restarts
        self._sweep = RetireSweep()
        #: failed ranks' last output read before their pods could go, until an observation
        #: carries it to the records (``live/lastwords.py``); the reads under way
        self._words: dict[TrainJobRef, list[Evidence]] = {}
        self._reading: dict[TrainJobRef, asyncio.Future[None]] = {}
        #: ended attempts whose observation (with that output) the consumer took
        self._spoken: OrderedDict[TrainJobRef, None] = OrderedDict()
        self._verdicts = Verdicts(
            patience=self.settings.patience,
            restarts_allowed=self.settings.allow_rank_restart,
            settle=settle,
        )

    # --- settings and facts -------------------------------------------------------------------

    def resolved_settings(self) -> KubeflowSettings:
        """The settings with the namespace resolved: configured, else the kubeconfig
        context's (or in a pod the service account's), else ``default``. Raises
        ``ConfigError`` for an unreadable kubeconfig."""
        if self._resolved is None:
            namespace = self.settings.namespace or default_namespace(
                self.connection.source, self.settings.context
            )
            self._resolved = replace(self.settings, namespace=namespace or "default")
        return self._resolved

    @property
    def namespace(self) -> str:
        return self.resolved_settings().effective_namespace

    async def facts(self, session: Session) -> ClusterFacts:
        """The cluster's probed facts, probed once and cached for this adapter's lifetime
        (starts asking at the same moment share the one probe)."""
        if self._facts is None:
            found = _shared(self._probe, lambda: probe(session, self.namespace))
            self._probe = found
            facts = await asyncio.shield(found[1])
            if self._facts is None:
                self._facts, self._probed_at = facts, self.context.clock.now()
        return self._facts

    async def read_runtime(self, session: Session, kind: str, name: str) -> Any:
        """The raw runtime ``kind``/``name`` (a TrainingRuntime in the cluster's namespace), or
        None when it does not exist; remembered for ``weakened_identity``."""
        resource = RUNTIMES.get(kind)
        if resource is None:
            raw = None
        else:
            raw = await session.get(resource, name, self.namespace if resource.namespaced else None)
        self._runtimes[(kind, name)] = raw
        return raw

    async def _shared_runtime(self, session: Session, kind: str, name: str) -> Any:
        """The runtime ``kind``/``name`` as read at most ``RUNTIME_FRESH`` seconds ago, or read
        now; starts at the same moment share one read. A runtime edited is seen by the starts
        that begin ``RUNTIME_FRESH`` seconds after the edit at the latest; each attempt's copy
        is made from the very state its rules were checked on, whichever read that was."""
        key, now = (kind, name), self.context.clock.now()
        began, shared = self._runtime_reads.get(key, (now, None))
        if now - began > RUNTIME_FRESH:
            began, shared = now, None
        shared = _shared(shared, lambda: self.read_runtime(session, kind, name))
        self._runtime_reads[key] = (began, shared)
        return await asyncio.shield(shared[1])

    async def _spec_runtime(self, session: Session, spec: JobSpec) -> Any:
        if spec.runtime is None:
            return None
        return await self.read_runtime(session, spec.runtime.kind.value, spec.runtime.name)

    def _queue(self, spec: JobSpec) -> str | None:
        return spec.queue or self.settings.queue

    # --- capabilities and plan ----------------------------------------------------------------

    async def capabilities(self, spec: JobSpec | None = None) -> CapabilityReport:
        settings = self.resolved_settings()
        async with self.connection.session() as session:
            facts = await self.facts(session)
            raw = await self._spec_runtime(session, spec) if spec is not None else None
        found = answers(facts)
        if spec is None:
            return self._report(found, refusals(facts, None))
        if spec.runtime is None:
            procs = Capability("ProcsPerNode", False, "the job names no runtime")
            return self._report((*found, procs), (*refusals(facts, self._queue(spec)), NO_RUNTIME))
        verdict = runtime_verdict(spec, raw, settings)
        return self._report(
            (*found, verdict.procs_per_node),
            (*refusals(facts, self._queue(spec)), *verdict.reasons),
            verdict.weakened_identity,
        )

    def _report(
        self, found: Sequence[Capability], refused: Sequence[Any], weakened: str | None = None
    ) -> CapabilityReport:
        return CapabilityReport(
            cluster=self.cluster.name,
            adapter=self.kind,
            answers=tuple(found),
            refusals=tuple(refused),
            weakened_identity=weakened,
            probed_at=self._probed_at,
        )

    async def plan(self, job: Job, attempt: int, *, held: bool = False) -> Plan:
        async with self.connection.session() as session:
            return await self._plan(session, job, attempt, held)

    async def _plan(
        self, session: Session, job: Job, attempt: int, held: bool, *, shared_read: bool = False
    ) -> Plan:
        """``shared_read``: the runtime as read for the starts of the last ``RUNTIME_FRESH``
        seconds (one read serves a burst of starts; see ``_shared_runtime``)."""
        settings = self.resolved_settings()
        facts = await self.facts(session)
        if shared_read and job.spec.runtime is not None:
            runtime = job.spec.runtime
            raw = await self._shared_runtime(session, runtime.kind.value, runtime.name)
        else:
            raw = await self._spec_runtime(session, job.spec)
        planned = plan_objects(job, attempt, raw, settings, held=held)
        cluster_refusals = refusals(facts, self._queue(job.spec))
        report = replace(
            planned.capabilities,
            cluster=self.cluster.name,
            answers=(*answers(facts), *planned.capabilities.answers),
            refusals=(*cluster_refusals, *planned.capabilities.refusals),
            probed_at=self._probed_at,
        )
        artifacts = () if report.refusals else planned.artifacts
        extra = {"held": held, "namespace": settings.effective_namespace}
        return replace(planned, capabilities=report, artifacts=artifacts, extra=extra)

    async def check_runtime(self, kind: str, name: str) -> RuntimeVerdict:
        """The runtime rules for the live runtime ``kind``/``name`` under this cluster's settings
        (``dispatch check-runtime --cluster``); ``not-found`` applies."""
        async with self.connection.session() as session:
            raw = await self.read_runtime(session, kind, name)
        return check_runtime(raw, self.resolved_settings(), kind=kind, name=name)

    def weakened_identity(self, spec: JobSpec) -> str | None:
        if not self.settings.allow_rank_restart or spec.runtime is None:
            return None
        key = (spec.runtime.kind.value, spec.runtime.name)
        if key not in self._runtimes:
            return (
                f"allowRankRestart: {key[0]} {key[1]!r} has not been read yet, so a failed rank "
                "may rerun under the same DISPATCH_ATTEMPT on this cluster"
            )
        return runtime_verdict(
            spec, self._runtimes[key], self.resolved_settings()
        ).weakened_identity

    # --- start --------------------------------------------------------------------------------

    async def start(self, job: Job, attempt: int, *, held: bool = False) -> AttemptHandle:
        """Also makes sure the evidence streams run on this event loop before anything is
        created, so the attempt's objects are recorded from their first state."""
        name = trainjob_name(job.id, attempt)
        self.capture().cover([self.namespace])
        self._sweep_copies(self.namespace)
        with submitting():  # following requests go first (``api.throttle``)
            return await self._start(job, attempt, name, held)

    async def _start(self, job: Job, attempt: int, name: str, held: bool) -> AttemptHandle:
        async with self.connection.session() as session:
            plan = await self._plan(session, job, attempt, held, shared_read=True)
            if plan.accepted:  # created, or adopted when a start before this one made it
                if job.spec.secret_env:  # the values, for the API server only
                    plan = with_secret_values(plan, self.context.secret_values(job))
                created = await submit.create_attempt(
                    session, plan, job, attempt, self.namespace, cluster=self.cluster.name
                )
            else:  # a TrainJob made before its runtime changed is still the attempt's
                found = await submit.adopt_existing(session, name, job, attempt, self.namespace)
                if found is None:
                    await submit.discard_copy(session, name, job, attempt, self.namespace)
                    plan.capabilities.raise_if_refused()
                    raise AssertionError("a plan not accepted names its refusals")
                created = found
        # The creation's answer is the TrainJob as stored, at the version its stream delivers
        # next: filed now (``start`` made the streams of this loop), the watch of the new
        # attempt judges it at once instead of reading it, its JobSet and its lists again
        # (``live.watching.Lookups``) for the milliseconds its event takes.
        self.capture().seen(created.trainjob)
        if not created.adopted:  # made now: its stream's delivery times the streams' lag
            self.capture().streams.created(TRAINJOB_STREAM, key_of(created.trainjob))
        if not created.copy_owned and created.copy_uid:
            self.copy_owners().owe(self.namespace, created.name, created.uid, created.copy_uid)
        return AttemptHandle(
            job_id=job.id,
            attempt=attempt,
            cluster=self.cluster.name,
            native=created.name,
            data={
                "namespace": self.namespace,
                "trainJob": created.name,
                "uid": created.uid,
                "runtimeCopy": created.name,
                "runtimeCopyOwned": created.copy_owned,
                "adopted": created.adopted,
            },
        )

    # --- evidence, observe, watch, cancel --------------------------------------------------

    def _namespace_of(self, handle: AttemptHandle) -> str:
        return str(handle.data.get("namespace") or self.namespace)

    def _ref(self, handle: AttemptHandle) -> TrainJobRef:
        return (self._namespace_of(handle), handle.native)

    def _uid(self, handle: AttemptHandle) -> str | None:
        """The attempt's recorded TrainJob uid (remembered for retirement), or None."""
        uid = recorded_uid(handle)
        if uid is not None:
            self._uids[self._ref(handle)] = uid
        self._attempts[handle.native] = (handle.job_id, handle.attempt)
        return uid

    def capture(self) -> Capture:
        """The evidence streams of this cluster, on the running event loop (made once per
        loop; they run until ``aclose`` or the loop ends)."""
        loop = asyncio.get_running_loop()
        if self._capture is None or self._capture_loop is not loop:
            self._capture = Capture(
                self.connection, self.cluster.name, self.context.clock, sleep=self._sleep
            )
            self._capture_loop = loop
            self._sweep = RetireSweep()  # a new capture knows every TrainJob afresh
            for ref, records in self._seeded.items():
                self._capture.seed(ref, records)
        return self._capture

    def copy_owners(self) -> CopyOwners:
        """The owner patches of the runtime copies started on the running event loop."""
        loop = asyncio.get_running_loop()
        if self._owners is None or self._owners_loop is not loop:
            self._owners, self._owners_loop = CopyOwners(self.connection, sleep=self._sleep), loop
            self._sweeps = {}
        return self._owners

    def _sweep_copies(self, namespace: str) -> None:
        """Sweep ``namespace`` for copies left unowned (``api/owners.py``) in the background:
        once per event loop, and again, ``RESWEEP_AFTER`` seconds after the last at the
        soonest, after a sweep that failed transiently or once patches were left there (a
        sweep refused for good, the list denied, is not made again)."""
        owners = self.copy_owners()
        task, began = self._sweeps.get(namespace, (None, -math.inf))
        if task is not None and not task.done():
            return
        now = self.context.clock.now()
        failed = task is not None and (
            task.cancelled() or isinstance(task.exception(), TransientError)
        )
        due = now - began >= owners_api.RESWEEP_AFTER
        if task is None or (due and (failed or namespace in owners.unswept)):
            sweep = asyncio.ensure_future(owners.sweep(namespace))
            sweep.add_done_callback(_sweep_failed)
            self._sweeps[namespace] = (sweep, now)

    async def drain(self) -> None:
        """``Draining``: wait up to ``OWNERS_DRAIN`` seconds for the owner patches owed on
        this event loop (a copy left unowned is found by a later sweep)."""
        if self._owners is not None and self._owners_loop is asyncio.get_running_loop():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._owners.drain(), OWNERS_DRAIN)

    async def aclose(self) -> None:
        """Stop the evidence streams and close this loop's API client (both also end with
        their event loop), and the last-output reads under way; first ``drain``."""
        await stop(*self._reading.values())
        self._reading.clear()
        await self.drain()
        if self._owners is not None and self._owners_loop is asyncio.get_running_loop():
            await stop(*(sweep for sweep, _ in self._sweeps.values()), also=(Exception,))
            await self._owners.close()
            self._owners, self._sweeps = None, {}
        if self._capture is not None:
            await self._capture.close()
            self._capture = None
        await self.connection.aclose()

    def seed_evidence(self, handle: AttemptHandle, evidence: Sequence[Evidence]) -> None:
        """Evidence recorded for this attempt before (the records store): the cluster may have
        deleted those objects since, and outcomes are derived over all of it."""
        ref = self._ref(handle)
        self._uid(handle)
        self._seeded[ref] = list(evidence)
        if self._capture is not None:
            self._capture.seed(ref, evidence)

    async def read_output(
        self, handle: AttemptHandle, rank: int | None = None, follow: bool = False
    ) -> AsyncIterator[str]:
        """``OutputReader``: the trainer containers' logs by rank (``live/output.py``); raises
        ``NotFound`` when the attempt's name holds another owner's TrainJob."""
        if self._uid(handle) is not None:
            seen = await self.observe(handle)
            if is_replaced(seen.outcome):
                raise NotFound(seen.outcome.summary)

        async def ended() -> bool:
            return (await self.observe(handle)).outcome.is_terminal

        what = f"attempt {handle.attempt} of {handle.job_id}"
        namespace, name = self._ref(handle)
        async for line in read_output(self.connection, namespace, name, rank, follow, ended, what):
            yield line

    async def observe(self, handle: AttemptHandle) -> Observation:
        """Reads the attempt's objects (``snapshot``) and derives the outcome over them and the
        seeded evidence; changes nothing. A snapshot that shows the attempt ended is read a
        second time, so that what explains the end is read after it."""
        ref, uid = self._ref(handle), self._uid(handle)
        now = self.context.clock.now()
        seeded, cancelled_by = self._seeded.get(ref, ()), self._cancelled.get(ref)
        async with self.connection.session() as session:
            records = await snapshot(session, ref[0], ref[1], now, uid=uid)
            proof = next((r for r in records if r.data.get("guard") == REPLACED), None)
            if proof is not None:
                ended = self._verdicts.replaced(ref[1], replaced_outcome(proof))
                return Observation(handle, ended, (), observed_at=now, gone=True)
            present = any(r.kind == "trainjob" for r in records)
            if present and self._verdicts.would_end(ref[1], [*seeded, *records], now, cancelled_by):
                # One snapshot is several reads, not one consistent cut: the end read last
                # (an Event, the JobSet) may postdate the pods read first, so what explains
                # it may be missing. Every read of a second snapshot comes after that end.
                later = await snapshot(session, ref[0], ref[1], self.context.clock.now(), uid=uid)
                present = any(r.kind == "trainjob" for r in later)
                records = merged(records, later)
        everything = [*seeded, *records]
        outcome = self._verdicts.judge(
            ref[1], everything, now, cancelled_by=cancelled_by, settled=True
        )
        if outcome is None or (not present and not outcome.is_terminal):
            where = f"{ref[0]}/{ref[1]}"
            outcome = Outcome(
                State.FAILED, Cause.UNKNOWN, summary=f"TrainJob {where} does not exist"
            )
        return Observation(handle, outcome, tuple(records), observed_at=now, gone=not present)

    async def watch(self, handles: Sequence[AttemptHandle]) -> AsyncIterator[Observation]:
        """One stream per object kind for all ``handles`` (``capture``, ``watching``): each
        attempt's first observation, then one whenever new evidence is filed for it (carried
        in ``evidence``) or its outcome changes; ends once all have ended. TrainJobs that must
        not run again are deleted meanwhile (``verdict``). The requests an observation needs
        first (a failed attempt's last output, a started mark) are made beside the stream
        (``alongside``): one attempt's read holds back no other attempt's observation."""
        for namespace in {self._namespace_of(h) for h in handles}:
            self._sweep_copies(namespace)
        observations = watch_attempts(
            self.capture(),
            self._verdicts,
            handles,
            self._namespace_of,
            self.context.clock,
            self._retire,
            self._lookup,
            cancelled=self._cancelled,
            uids={self._ref(h): uid for h in handles if (uid := self._uid(h)) is not None},
            sleep=self._sleep,
            sweep=self._sweep,
        )
        async for observation in alongside(
            observations, self._needs, delivered=self._delivered, lost=self._lost
        ):
            yield observation

    def _needs(self, observation: Observation) -> Read | None:
        """What ``observation`` needs read or written before it is delivered: the started
        mark of a TrainJob seen running (``_mark_started``), the failed ranks' last output of
        an ended attempt (``_keep_last_words``); None: nothing."""
        ref = self._ref(observation.handle)
        outcome = observation.outcome
        if outcome.state is State.RUNNING:
            mark = self._start_mark(observation.handle, outcome)
            return None if mark is None else partial(_nothing_after, mark)
        if not outcome.is_terminal:
            return None
        self._seeded.pop(ref, None)  # final for this adapter: not read again
        # the ranks under a replaced name are another owner's: their output is not read
        if outcome.state is State.SUCCEEDED or is_replaced(outcome):
            return None
        if ref in self._spoken and ref not in self._words:
            return None  # delivered before (a restarted stream repeats the end): not read again
        return partial(self._last_words_of, ref, outcome, self.capture().final_pods(ref))

    async def _last_words_of(
        self, ref: TrainJobRef, outcome: Outcome, pods: Sequence[Any]
    ) -> tuple[Evidence, ...]:
        if ref not in self._words and ref not in self._spoken:
            await self._keep_last_words(ref, outcome, pods)
        return tuple(self._words.pop(ref, []))

    def _lost(self, observation: Observation) -> None:
        """An observation the consumer never took (its stream was replaced, e.g. while the
        started mark was written): its evidence goes back to the capture, and the next
        observation of the attempt carries it. Records are kept once per key, so one that
        did reach the records is not kept twice. A capture closed meanwhile (its records gone
        with it) is not made again for that."""
        if self._capture is not None and self._capture_loop is asyncio.get_running_loop():
            self._capture.give_back(self._ref(observation.handle), observation.evidence)

    def _delivered(self, observation: Observation) -> None:
        """An ended attempt's observation was taken: its failed ranks' output, read for it,
        is with the consumer (the ``SPOKEN_KEPT`` latest are remembered)."""
        if observation.outcome.is_terminal:
            ref = self._ref(observation.handle)
            self._spoken[ref] = None
            self._spoken.move_to_end(ref)
            while len(self._spoken) > SPOKEN_KEPT:
                self._spoken.popitem(last=False)

    async def _keep_last_words(
        self, ref: TrainJobRef, outcome: Outcome | None, pods: Sequence[Any] = ()
    ) -> None:
        """Read the failed ranks' last output now, while their pods exist (``lastwords``);
        ``pods``: the attempt's pods as the streams showed them (else they are listed). One
        read per TrainJob at a time: a caller that finds one under way waits for it."""
        reading = self._reading.get(ref)
        if reading is None:
            reading = asyncio.ensure_future(self._read_last_words(ref, outcome, pods))
            self._reading[ref] = reading
            reading.add_done_callback(lambda done: self._done_reading(ref, done))
        await asyncio.shield(reading)  # another caller's cancellation stops no shared read

    def _done_reading(self, ref: TrainJobRef, done: asyncio.Future[None]) -> None:
        if self._reading.get(ref) is done:
            del self._reading[ref]

    async def _read_last_words(
        self, ref: TrainJobRef, outcome: Outcome | None, pods: Sequence[Any]
    ) -> None:
        try:
            async with self.connection.session() as session:
                now = self.context.clock.now()
                words = await last_words(session, *ref, outcome, now, known=pods)
        except DispatchError as exc:
            log.info("TrainJob %s/%s: its ranks' last output could not be read (%s)", *ref, exc)
            words = []
        self._words[ref] = [*self._words.get(ref, []), *words]

    async def _lookup(self, ref: TrainJobRef) -> list[Evidence]:
        async with self.connection.session() as session:
            return await snapshot(session, ref[0], ref[1], self.context.clock.now())

    async def _retire(self, target: AttemptHandle | TrainJobRef, why: str) -> bool:
        """Delete a TrainJob whose attempt is over, saying why (``dispatch.dev/retired``);
        True when it was deleted. The TrainJob is read first and judged as it is now: the
        streams may lag behind it (Trainer may have marked it ``Failed`` meanwhile), and a
        deletion needlessly destroys evidence the records may not hold yet."""
        namespace, name = self._ref(target) if isinstance(target, AttemptHandle) else target
        uid = self._uids.get((namespace, name))
        async with self.connection.session() as session:
            current = await session.get(TRAINJOBS, name, namespace)
            if current is None or replaced_by(current, uid) is not None:
                return False  # gone, or another owner's TrainJob under the name
            current.setdefault("kind", "TrainJob")
            self.capture().seen(current)
            why = self._verdicts.must_retire(name, current, self.context.clock.now()) or ""
            if not why:
                return False
            standing = self._verdicts.standings.get(name)
            if (namespace, name) not in self._words and standing is not None:
                await self._keep_last_words((namespace, name), standing.final)
            # the mark the cluster-side guard reads: from now on nobody resumes it (Kueue
            # would, while the deletion below is under way or failing)
            marks = {ANNOTATION_ENDED: self._ended_mark(name), ANNOTATION_RETIRED: why}
            note = {"metadata": {"annotations": marks}}
            try:
                await session.merge_patch(TRAINJOBS, name, note, namespace, uid=uid)
            except NotFound:
                return False
            except ApiRejected as exc:  # the note is lost; the deletion still happens
                log.warning("TrainJob %s: the retirement note was refused (%s)", name, exc)
            try:
                await session.delete(TRAINJOBS, name, namespace, propagation="Foreground", uid=uid)
            except Conflict as exc:  # the name holds another TrainJob now: not ours to delete
                log.warning("TrainJob %s: not retired, it was replaced (%s)", name, exc)
                return False
            return True

    def _start_mark(
        self, handle: AttemptHandle, running: Outcome
    ) -> Callable[[], Awaitable[None]] | None:
        """Annotate the attempt's TrainJob ``dispatch.dev/started`` the first time it is seen
        running, when Kueue manages it (what resumes a suspended TrainJob by itself): from
        then on a suspension ends the attempt, and the cluster-side guard refuses to resume it
        whether or not dispatch has seen the suspension yet. The value is when
        the first rank started (the proof's time), and the mark is itself proof of that start
        (``causes.cluster.read_trainjob``): a supervisor that never saw the pods (they go with
        the suspension) judges the eviction as the one that marked it did. Best effort: a
        refusal is logged; a transient failure is tried again at the next observation.
        Returns the request to make (None: no mark is needed)."""
        ref = self._ref(handle)
        if ref in self._started:
            return None
        self._started.add(ref)
        trainjob, _ = self.capture().latest_trainjob(ref)
        if ANNOTATION_STARTED in (dig(trainjob, "metadata", "annotations") or {}):
            return None  # marked by another supervisor, or before a restart
        if LABEL_QUEUE not in (dig(trainjob, "metadata", "labels") or {}):
            return None  # no Kueue to resume it: the end mark (``_retire``) is enough
        times = [e.observed_at for e in running.evidence if e.observed_at > 0]
        at = format_time(min(times, default=self.context.clock.now())) or ""
        return partial(self._mark_started, handle, ref, at)

    async def _mark_started(self, handle: AttemptHandle, ref: TrainJobRef, at: str) -> None:
        note = {"metadata": {"annotations": {ANNOTATION_STARTED: at}}}
        try:
            async with self.connection.session() as session:
                await session.merge_patch(TRAINJOBS, ref[1], note, ref[0], uid=self._uid(handle))
        except Conflict as exc:  # another owner's TrainJob under the name: not ours to mark
            log.info("TrainJob %s/%s: not marked started (%s)", *ref, exc)
        except TransientError as exc:
            log.info("TrainJob %s/%s: marking it started failed (%s); next time", *ref, exc)
            self._started.discard(ref)
        except DispatchError as exc:
            log.warning("TrainJob %s/%s: the started mark was refused (%s)", *ref, exc)

    def _ended_mark(self, name: str) -> str:
        """The value of ``dispatch.dev/ended``: the cause of the attempt's final outcome."""
        standing = self._verdicts.standings.get(name)
        final = standing.final if standing is not None else None
        if final is None:
            return "ended"
        return final.cause.value if final.cause is not None else final.state.value

    def behind(self) -> float:
        """``Backlogged``: how late this cluster's evidence streams delivered the last
        TrainJob a start created (``live.streams.Streams.behind``); 0 with no streams."""
        capture = self._capture
        return capture.streams.behind() if capture is not None else 0.0

    def late_evidence(self) -> list[tuple[str, int, tuple[Evidence, ...]]]:
        """``LateEvidence``: the refused resumes (``live/refusals.py``) found about attempts
        that had ended, as (job id, attempt, records); drained."""
        found: list[tuple[str, int, tuple[Evidence, ...]]] = []
        for name in self._verdicts.guarded_names():
            records = tuple(self._verdicts.take_guard_records(name))
            owner = self._attempts.get(name) or self._attempt_of(name)
            if owner is None:
                log.warning("TrainJob %s: a refused resume of an unknown attempt is dropped", name)
                continue
            found.append((owner[0], owner[1], records))
        return found

    def _attempt_of(self, name: str) -> tuple[str, int] | None:
        """(job, attempt) from the identity variables of the TrainJob ``name`` as the streams
        last showed it (an attempt this process never followed: retired after a restart)."""
        if self._capture is None:
            return None
        for ref in self._capture.attribution.trainjobs:
            if ref[1] != name:
                continue
            trainjob, _ = self._capture.latest_trainjob(ref)
            env = {
                text_of(dig(e, "name")): text_of(dig(e, "value"))
                for e in as_list(dig(trainjob, "spec", "trainer", "env")) or []
            }
            job, attempt = env.get(ENV_JOB), env.get(ENV_ATTEMPT, "")
            if job and attempt.isdigit():
                return job, int(attempt)
        return None

    async def cancel(self, handle: AttemptHandle, actor: str, reason: str) -> None:
        """Differs from the SPI: a TrainJob of another uid under the attempt's name is left
        alone (the next observation ends the attempt ``unknown``)."""
        namespace, uid = self._namespace_of(handle), self._uid(handle)
        async with self.connection.session() as session:
            trainjob = await session.get(TRAINJOBS, handle.native, namespace)
            if trainjob is None:
                return
            found = replaced_by(trainjob, uid)
            if found is not None:
                log.warning(
                    "TrainJob %s/%s: not cancelled, it is not dispatch's (uid %s, recorded %s)",
                    namespace,
                    handle.native,
                    found,
                    uid,
                )
                return
            if trainjob_outcome(trainjob, 0.0).state in (State.SUCCEEDED, State.FAILED):
                return
            note = {ANNOTATION_CANCELLED_BY: actor, ANNOTATION_CANCEL_REASON: reason}
            self._cancelled[(namespace, handle.native)] = f"{actor}: {reason}"
            try:
                await session.merge_patch(
                    TRAINJOBS,
                    handle.native,
                    {"metadata": {"annotations": note}},
                    namespace,
                    uid=uid,
                )
            except NotFound:
                return
            except ApiRejected as exc:  # the record of who is lost; the cancellation still happens
                log.warning("TrainJob %s: the cancel note was refused (%s)", handle.native, exc)
        ref = (namespace, handle.native)
        if ref not in self._words:  # every rank's last output, before the pods go
            await self._keep_last_words(ref, None)
        async with self.connection.session() as session:
            try:
                await session.delete(
                    TRAINJOBS, handle.native, namespace, propagation="Foreground", uid=uid
                )
            except Conflict as exc:  # replaced meanwhile: the next observation says so
                log.warning("TrainJob %s: not deleted, it was replaced (%s)", handle.native, exc)


def _sweep_failed(task: asyncio.Task[int]) -> None:
    failure = None if task.cancelled() else task.exception()
    if isinstance(failure, TransientError):
        log.info("runtime copies not swept (%s); a later start or watch tries again", failure)
    elif failure is not None:
        log.warning(
            "runtime copies not swept (%s): copies a crash leaves without their owner reference "
            "are not found; grant list on trainingruntimes (docs/reference/permissions.md)",
            failure,
        )


async def _nothing_after(request: Callable[[], Awaitable[None]]) -> tuple[Evidence, ...]:
    """A request an observation waits for that adds no records to it."""
    await request()
    return ()

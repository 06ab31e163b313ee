"""The supervisor loop: leases, intents, and decisions carried out through the adapters.

Guarantees (see docs/design/0002-supervisor.md):

* a job is acted on only under its lease (renewed before and after every adapter call), and
  every write for it names that lease (``fence``): the store refuses a write once another
  supervisor took the lease over, however late the write comes;
* ``start`` and ``cancel`` are called only while an open intent for them is in the store, and
  attempt numbers are claimed in the store (``create_attempt``) before ``start``;
* after a crash at any point, reconciling the open intents either completes the operation
  (``start`` is idempotent: it adopts by deterministic name) or rolls it back;
* ``OutcomeUnknown`` and other transient errors leave the intent open: the next pass
  re-observes or re-issues the idempotent start, never blindly repeats anything else.
"""

from __future__ import annotations

import asyncio
import gc
import math
from collections import deque
from collections.abc import Callable, Collection
from typing import Any

from dispatch.adapters.base import Adapter, Backlogged, Draining, EvidenceSeeder, LateEvidence
from dispatch.aio import LoopLag, first_of, stop
from dispatch.clock import Clock
from dispatch.log import logger
from dispatch.model import (
    AttemptHandle,
    Cause,
    ConfigError,
    Evidence,
    Job,
    LeaseLost,
    NotFound,
    Outcome,
    PermanentError,
    RecordsUnavailable,
    State,
    TransientError,
    Unsupported,
)
from dispatch.records import Intent, IntentOperation, IntentStatus, Lease, OpenJob, Records
from dispatch.supervise.decide import Decision, DecisionKind, next_decision
from dispatch.supervise.recording import (
    log_decision,
    log_decision_once,
    record_observation,
    record_refusal,
)
from dispatch.supervise.report import JobReport, StepReport
from dispatch.supervise.view import JobView, fold, load_history
from dispatch.supervise.watching import Watcher

#: records found after their attempts ended kept waiting for a job's lease, at most
MAX_LATE = 1_000
#: decisions carried out per job per pass at most (observe -> finish needs two)
MAX_DECISIONS_PER_TICK = 4
_QUIET = (DecisionKind.WAIT, DecisionKind.NOTHING)
#: jobs ticked at the same time in a pass at most (each start waits on a few API requests)
TICKS_AT_ONCE = 32
#: while the event loop runs late (``LoopLag``), the ticks at once halve, at most once per
#: this many real seconds, down to ``FEWEST_AT_ONCE``; a tick that ends on time adds
#: ``1/width`` back (additive increase, multiplicative decrease)
NARROW_EVERY = 0.5
FEWEST_AT_ONCE = 2
#: while an adapter's reports of ends run this many seconds behind its cluster
#: (``Backlogged``), a watched pass starts no tick of its own (``_held_back``); it looks again
#: after ``HOLD_STEP`` real seconds, or at the next delivery. Faster starts only made the
#: streams, and so every end, later: at 1,000 jobs under 429s with ends while submitting,
#: detection p99 8.6 to 9.9 s against 4.8 s before (``bench/README.md``, the tenth round)
BEHIND = 0.5
HOLD_STEP = 0.1
#: seconds between refreshes of the watched attempts while a long pass of ``run`` goes on
FOLLOW_EVERY = 1.0
#: seconds before ``run`` tries again after the records did not answer
RECORDS_RETRY = 1.0

log = logger(__name__)

#: whether ``_tune_collector`` ran in this process
_collector_tuned = False
#: the cyclic garbage collector's thresholds while supervising (``gc.set_threshold``;
#: Python's are 700, 10, 10): young collections ten times as far apart, full ones ten times
GC_THRESHOLDS = (10_000, 10, 100)


def _tune_collector() -> None:
    """Once per process, before the first supervision: collect; leave what the process holds
    then (its imports above all: 110,000 objects, 0.13 s for a full collection to walk) out
    of every later collection (``gc.freeze``); and collect less often (``GC_THRESHOLDS``).

    What a supervisor holds is the state of the attempts it follows: objects that live as
    long as their attempt, so they outlive the young generations, and, as attempts come and
    go, set off a full collection each time a quarter of the old generation is new. Each walks
    the whole heap while the event loop waits, and none found anything to free:
    ``python bench/scale.py --jobs 3000 --lifetime 30 --tools dispatch`` (its ``gcPauses``)
    counted, with Python's thresholds, 21 full collections taking 6.2 s (the longest 0.52 s)
    and no object freed by a collection of any generation; with these, one full collection
    (0.12 s), all collections 2.3 s instead of 10.0 s, again nothing freed (``bench/README.md``,
    the tenth round). A reference cycle is still found (most die young, where collections
    still come every 10,000 allocations); the frozen objects are still freed when nothing
    refers to them any more; only a cycle among them would never be."""
    global _collector_tuned
    if not _collector_tuned:
        _collector_tuned = True
        gc.collect()
        gc.freeze()
        gc.set_threshold(*GC_THRESHOLDS)


class Supervisor:
    """Drives jobs recorded in ``records`` through the adapters ``adapters(cluster)`` returns.

    ``owner`` names this supervisor in leases, intents and the log. Several supervisors may
    share one store: the job's lease decides which one acts.
    """

    def __init__(
        self,
        records: Records,
        adapters: Callable[[str], Adapter],
        clock: Clock,
        owner: str,
        *,
        lease_ttl: float = 30.0,
        poll_interval: float = 5.0,
        clusters: Collection[str] | None = None,
        ticks_at_once: int = TICKS_AT_ONCE,
    ) -> None:
        self.records = records
        self.ticks_at_once = max(1, ticks_at_once)
        #: how many ticks run at once now (``_adapt``): ``ticks_at_once`` while the loop
        #: keeps time; while it runs late (``run`` measures it), fewer
        self.width = float(self.ticks_at_once)
        self._lag = LoopLag()
        self._narrowed_at = -math.inf
        #: the clusters whose jobs this supervisor drives (None: every cluster's); a team's
        #: shared records hold jobs that supervisors elsewhere drive
        self.clusters = frozenset(clusters) if clusters is not None else None
        self.clock = clock
        self.owner = owner
        self.lease_ttl = lease_ttl
        self.poll_interval = poll_interval
        self._open_adapter = adapters
        self._adapters: dict[str, Adapter] = {}
        self._reconciled = False
        self._seeded: set[tuple[str, int]] = set()
        self.watcher = Watcher(self.adapter)
        # what ``run`` needs between full passes: see ``_due``
        self._known: set[str] = set()
        self._open: dict[str, float] = {}  # the open jobs last read: when each was created
        self._waits: dict[str, float] = {}
        self._retry: set[str] = set()
        self._log_seq = 0
        self._followed_at: float | None = None
        self._held: dict[str, Lease] = {}  # the lease last acquired per job: writes' fence
        #: evidence adapters found about attempts already over, not yet recorded
        self._late: list[tuple[str, int, tuple[Evidence, ...]]] = []

    def adapter(self, cluster: str) -> Adapter:
        if cluster not in self._adapters:
            self._adapters[cluster] = self._open_adapter(cluster)
        return self._adapters[cluster]

    # --- leases ---------------------------------------------------------------------------

    def _lease(self, job_id: str) -> Lease | None:
        lease = self.records.acquire_lease(job_id, self.owner, self.lease_ttl)
        if lease is None:
            self._held.pop(job_id, None)
        else:
            self._held[job_id] = lease
        return lease

    def _fence(self, job_id: str) -> Lease:
        """The lease this supervisor's writes for ``job_id`` are fenced by."""
        lease = self._held.get(job_id)
        if lease is None:
            raise LeaseLost(f"{self.owner} holds no lease on {job_id}")
        return lease

    def _renew(self, job_id: str) -> Lease:
        lease = self._lease(job_id)
        if lease is None:
            log.info("%s lost the lease on %s to another supervisor", self.owner, job_id)
            raise LeaseLost(f"{self.owner} lost the lease on {job_id}")
        return lease

    # --- reconciliation -------------------------------------------------------------------

    async def reconcile(self) -> list[str]:
        """Reconcile every open intent in the store whose job this supervisor can lease."""
        notes: list[str] = []
        for job_id in sorted({i.job_id for i in self.records.open_intents()}):
            if self.clusters is not None and self.records.get_job(job_id).job.cluster not in (
                self.clusters
            ):
                continue
            if self._lease(job_id) is None:
                notes.append(f"{job_id}: leased by another supervisor, not reconciled")
                continue
            try:
                notes.extend(await self._reconcile_job(job_id))
            except (TransientError, LeaseLost) as exc:
                notes.append(f"{job_id}: left open ({exc})")
        self._reconciled = True
        return notes

    async def _reconcile_job(self, job_id: str) -> list[str]:
        return [await self._reconcile_intent(i) for i in self.records.open_intents(job_id)]

    async def _reconcile_intent(self, intent: Intent) -> str:
        where = f"{intent.job_id}: open {intent.operation} intent #{intent.id}"
        attempts = {a.attempt: a for a in self.records.attempts(intent.job_id)}
        claimed = attempts.get(intent.attempt) if intent.attempt is not None else None
        fence = self._fence(intent.job_id)
        if intent.operation == IntentOperation.START and claimed is None:
            self.records.close_intent(
                intent.id,
                status=IntentStatus.ROLLED_BACK,
                result={"reason": "never claimed"},
                fence=fence,
            )
            return f"{where}: attempt {intent.attempt} was never claimed; rolled back"
        if (
            intent.operation == IntentOperation.START
            and claimed is not None
            and claimed.handle is None
        ):
            if claimed.outcome is not None and claimed.outcome.is_terminal:
                self.records.close_intent(
                    intent.id, result={"reason": "attempt already ended"}, fence=fence
                )
                return f"{where}: attempt {claimed.attempt} already ended; closed"
            job = self.records.get_job(intent.job_id).job
            await self._start(job, claimed.attempt, intent)
            return f"{where}: start re-issued; attempt {claimed.attempt} adopted"
        # a start whose handle was recorded, or a cancel: the effect is re-observed next tick
        self.records.close_intent(intent.id, result={"reconciled": True}, fence=fence)
        return f"{where}: closed; the attempt will be re-observed"

    # --- one pass -------------------------------------------------------------------------

    async def step(self, only: Collection[str] | None = None) -> StepReport:
        """One pass: reconcile (first pass only), then one tick for every open job (with
        ``only``: for the open jobs among those, and any job created since the last pass).
        Before it returns, the adapters finish what they do in the background (``Draining``),
        so a process that steps once and exits leaves nothing half done."""
        report = await self._pass(only, watched=False)
        await self._drain()
        return report

    async def _drain(self) -> None:
        for adapter in list(self._adapters.values()):
            if isinstance(adapter, Draining):
                await adapter.drain()

    async def _pass(
        self, only: Collection[str] | None, *, watched: bool, look: bool = True
    ) -> StepReport:
        """``step``; ``watched`` (``run``): meanwhile new attempts are watched (every
        ``FOLLOW_EVERY`` s) and the jobs a stream reported on are ticked at once, again for
        each new observation. Up to ``ticks_at_once`` jobs are ticked at the same time, each
        under its own lease and never one job twice at once, and a tick that ends makes room
        for the next at once (a window, not waves: a start waiting out a ``Retry-After`` holds
        back no other), so a pass that starts thousands of jobs waits on the API server that
        many requests at a time, not one. While the event loop runs late, fewer run at once
        (``_adapt``). A tick for an observation (the end a stream reported) does not wait for
        room in that window: up to ``ticks_at_once`` of them run beside it, so an end is
        recorded while the window is full of starts each waiting on a busy API server. With
        ``ticks_at_once`` 1 every tick is awaited in turn, on no task of its own. Cancelled,
        it cancels its ticks and waits for their end.
        ``look`` False (``run`` between its full passes): the open jobs are not read again,
        so jobs created since are found by the next full pass, and a pass costs what it ticks."""
        reconciled = [] if self._reconciled else await self.reconcile()
        new: set[str] = set()
        if look or not self._open:
            records = self._open_jobs()
            self._open = {r.id: r.created_at for r in records}
            new = self._open.keys() - self._known
            self._known = set(self._open)
            self._waits = {j: until for j, until in self._waits.items() if j in self._known}
            self._retry &= self._known
        chosen = list(self._open) if only is None else [j for j in {*only, *new} if j in self._open]
        # (job, whether it is the pass's own tick): a job ticked for an observation first
        # is not ticked again for the pass
        pending = deque((j, True) for j in sorted(chosen, key=lambda j: self._open[j]))
        reports: list[JobReport] = []
        interleaved: dict[str, int] = {}  # job -> the observation it was last ticked for
        running: dict[asyncio.Future[JobReport], str] = {}
        try:
            failed = await self._ticks(pending, running, interleaved, reports, watched)
        finally:
            await stop(*running, also=(Exception,))  # only when cancelled: none runs after
        if failed is not None:
            raise failed
        self._record_late_evidence()
        return StepReport(
            owner=self.owner, at=self.clock.now(), jobs=tuple(reports), reconciled=tuple(reconciled)
        )

    async def _ticks(
        self,
        pending: deque[tuple[str, bool]],
        running: dict[asyncio.Future[JobReport], str],
        interleaved: dict[str, int],
        reports: list[JobReport],
        watched: bool,
    ) -> BaseException | None:
        """The ticks of a pass (see ``_pass``): their reports into ``reports``; the first error
        that left a tick, once every tick running then has ended (no other starts after it)."""
        failed: BaseException | None = None
        while pending or running:
            if self.ticks_at_once == 1:  # in turn, on no task of its own (the simulator's way)
                job_id = self._next_tick(pending, set(), interleaved)
                if job_id is None:
                    break
                reports.append(await self.tick(job_id))
            else:
                # while an adapter's reports run behind, only ticks for observations start
                held = watched and failed is None and self._held_back()
                while failed is None:
                    width = 0 if held else max(1, int(self.width))
                    if len(running) >= width + self.ticks_at_once:
                        break
                    job_id = self._next_tick(
                        pending, set(running.values()), interleaved, observed=len(running) >= width
                    )
                    if job_id is None:
                        break
                    running[asyncio.ensure_future(self.tick(job_id))] = job_id
                if not running:
                    if not (held and pending):
                        break
                    await first_of(self.watcher.news.wait(), asyncio.sleep(HOLD_STEP))
                else:
                    # after a failure only the ticks running are waited for: nothing new starts
                    done = await self._tick_ended_or_news(running, watched and failed is None)
                    if done:
                        self._adapt(len(done))
                    for tick in sorted(done, key=lambda t: running[t]):
                        del running[tick]
                        error = tick.exception()
                        if error is not None:
                            failed = failed or error
                        else:
                            reports.append(tick.result())
                    if failed is not None:
                        continue  # the ticks running end; no other starts
            if not watched:
                continue
            if self._follow_due():
                self._follow()
            busy = set(running.values())
            self.watcher.news.clear()  # what arrives from here on wakes ``_tick_ended_or_news``
            for job_id in self.watcher.ready_jobs():
                # again for each new observation: a long pass (one that submits thousands
                # of jobs) must not hold back the end of a job it ticked earlier in the pass.
                # A job being ticked is left ready: it is ticked again once its tick ends.
                arrival = self.watcher.arrival(job_id)
                if job_id in busy or job_id not in self._known:
                    continue
                if interleaved.get(job_id, -1) < arrival:
                    interleaved[job_id] = arrival
                    pending.appendleft((job_id, False))
        return failed

    async def _tick_ended_or_news(
        self, running: dict[asyncio.Future[JobReport], str], watched: bool
    ) -> set[asyncio.Future[JobReport]]:
        """Wait until a tick ends (those ended are returned) or, in a watched pass, a stream
        delivers something new (none returned): an end reported while every tick running
        waits on the API server is ticked then, not after one of them."""
        if not watched:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            return done
        news: asyncio.Future[Any] = asyncio.ensure_future(self.watcher.news.wait())
        waiting: set[asyncio.Future[Any]] = {*running, news}
        try:
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            news.cancel()
        return {tick for tick in running if tick in done}

    def _held_back(self) -> bool:
        """Whether an adapter's reports of ends run more than ``BEHIND`` seconds behind its
        cluster (``Backlogged``): then the pass's own ticks (its starts above all) wait, and
        only ticks for observations run, until the reports catch up."""
        return any(
            isinstance(adapter, Backlogged) and adapter.behind() > BEHIND
            for adapter in self._adapters.values()
        )

    def _adapt(self, ended: int) -> None:
        """After ``ended`` ticks ended: fewer ticks at once while the event loop runs late
        (the supervisor's own work starving the streams that report ends: at N = 10,000 a
        full window of starts made detection p99 11.9 s instead of 4.6 s), more again while
        it keeps time, up to ``ticks_at_once``."""
        if self._lag.late() > 0:
            now = asyncio.get_running_loop().time()
            if now - self._narrowed_at >= NARROW_EVERY:
                self._narrowed_at = now
                self.width = max(float(min(FEWEST_AT_ONCE, self.ticks_at_once)), self.width / 2)
        elif self.width < self.ticks_at_once:
            self.width = min(float(self.ticks_at_once), self.width + ended / self.width)

    @staticmethod
    def _next_tick(
        pending: deque[tuple[str, bool]],
        busy: set[str],
        interleaved: dict[str, int],
        *,
        observed: bool = False,
    ) -> str | None:
        """The next job to tick (None: none can start now): never one being ticked (it waits
        at the front), nor the pass's own tick of a job ticked for an observation already.
        ``observed``: only a tick for an observation (those wait at the front, before the
        pass's own ticks)."""
        skipped: list[tuple[str, bool]] = []
        chosen: str | None = None
        while pending:
            if observed and pending[0][1]:
                break
            job_id, own = pending.popleft()
            if own and job_id in interleaved:
                continue
            if job_id in busy:
                skipped.append((job_id, own))
                continue
            chosen = job_id
            break
        pending.extendleft(reversed(skipped))
        return chosen

    def _record_late_evidence(self) -> None:
        """Add what adapters learnt about attempts already over (``LateEvidence``, e.g. a
        refused resume) to those attempts, under this supervisor's lease on the job; what
        another supervisor's lease keeps out waits for a later pass (``MAX_LATE`` at most).
        Jobs this store does not hold (another team's, on a shared cluster) are skipped."""
        for adapter in self._adapters.values():
            if isinstance(adapter, LateEvidence):
                self._late += adapter.late_evidence()
        waiting: list[tuple[str, int, tuple[Evidence, ...]]] = []
        for job_id, attempt, evidence in self._late:
            try:
                record = self.records.get_job(job_id)
            except NotFound:
                continue
            if self.clusters is not None and record.job.cluster not in self.clusters:
                continue
            lease = self._lease(job_id)
            if lease is None:
                waiting.append((job_id, attempt, evidence))
                continue
            added = self.records.add_evidence(job_id, attempt, evidence, fence=lease)
            if added:
                log.info("%s attempt %d: %d record(s) found after it ended", job_id, attempt, added)
        self._late = waiting[-MAX_LATE:]

    async def tick(self, job_id: str) -> JobReport:
        """Lease, reconcile, then decide and act until the job needs to wait."""
        if self._lease(job_id) is None:
            log.debug("%s: leased by another supervisor; %s leaves it", job_id, self.owner)
            return JobReport(job_id, note="leased by another supervisor")
        decisions: list[Decision] = []
        reconciled: list[str] = []
        try:
            reconciled.extend(await self._reconcile_job(job_id))
            for _ in range(MAX_DECISIONS_PER_TICK):
                view = fold(load_history(self.records, job_id))
                decision = next_decision(view, view.policy, self.clock.now())
                progressed = await self._carry_out(view, decision)
                decisions.append(decision)
                if not progressed:
                    break
        except LeaseLost as exc:
            note, retry = str(exc), False
        except TransientError as exc:
            note, retry = f"{type(exc).__name__}: {exc}; will re-observe and retry", True
        except ConfigError as exc:
            note, retry = f"cannot act: {exc}", True
        except PermanentError as exc:  # e.g. Forbidden from observe or cancel: a person must act
            note, retry = f"cannot act: {type(exc).__name__}: {exc}", False
        else:
            note, retry = "", False
        return JobReport(job_id, tuple(decisions), note, retry, tuple(reconciled))

    async def _carry_out(self, view: JobView, decision: Decision) -> bool:
        """Perform one decision; True when deciding again right away can make progress."""
        job = self.records.get_job(view.job_id).job
        kind = decision.kind
        if kind is DecisionKind.START and decision.attempt is not None:
            claim = decision.attempt > view.attempt_number
            await self._start(job, decision.attempt, None, claim=claim, decision=decision)
            return False
        if kind is DecisionKind.OBSERVE and view.attempt and view.attempt.handle:
            return await self._observe(job, view.attempt.number, view.attempt.handle)
        if kind is DecisionKind.CANCEL and view.attempt and view.attempt.handle:
            await self._cancel(job, view, decision, view.attempt.handle)
            return True
        fence = self._fence(job.id)
        if kind is DecisionKind.HOLD:
            log_decision(self.records, fence, decision, attempt=view.attempt_number)
            cause = view.attempt.cause if view.attempt else None
            self.records.set_job_status(
                job.id, State.HELD, cause, decision.reason, if_open=True, fence=fence
            )
            return False
        if kind is DecisionKind.FINISH and decision.state is not None:
            log_decision(self.records, fence, decision, attempt=view.attempt_number)
            self.records.set_job_status(
                job.id, decision.state, decision.cause, decision.reason, if_open=True, fence=fence
            )
            self.records.release_lease(job.id, self.owner)
            self._held.pop(job.id, None)
            return False
        if kind is DecisionKind.WAIT:
            log_decision_once(self.records, fence, decision)
            self.records.set_job_status(
                job.id, State.PENDING, None, decision.reason, if_open=True, fence=fence
            )
        elif kind is DecisionKind.NOTHING and view.held:
            log_decision_once(self.records, fence, decision, attempt=view.attempt_number)
        return False

    # --- the operations -------------------------------------------------------------------

    async def _start(
        self,
        job: Job,
        attempt: int,
        intent: Intent | None,
        *,
        claim: bool = False,
        decision: Decision | None = None,
    ) -> None:
        adapter = self.adapter(job.cluster)  # a ConfigError here leaves nothing behind
        # renewed before the writes ahead of the adapter's call and again after it; the
        # writes on either side land together (``Records.together``)
        lease = self._renew(job.id)
        if intent is None:
            with self.records.together(lease):
                intent = self.records.open_intent(
                    job.id,
                    IntentOperation.START,
                    self.owner,
                    attempt=attempt,
                    data={"epoch": lease.epoch},
                    fence=lease,
                )
                claimed = not claim or self.records.create_attempt(job.id, attempt, fence=lease)
                if not claimed:
                    self.records.close_intent(
                        intent.id,
                        status=IntentStatus.ROLLED_BACK,
                        result={"reason": "claimed"},
                        fence=lease,
                    )
            if not claimed:
                raise LeaseLost(f"attempt {attempt} of {job.id} was claimed by another supervisor")
        try:
            handle = await adapter.start(job, attempt)
        except (Unsupported, PermanentError) as exc:
            fence = self._renew(job.id)
            with self.records.together(fence):
                record_refusal(self.records, fence, attempt, exc, self.clock.now())
                self.records.close_intent(intent.id, result={"refused": str(exc)}, fence=fence)
            return
        fence = self._renew(job.id)
        with self.records.together(fence):
            self.records.set_handle(job.id, attempt, handle, fence=fence)
            self.records.record_outcome(
                job.id,
                attempt,
                Outcome(state=State.QUEUED, summary="handed to the scheduler"),
                fence=fence,
            )
            if decision is not None:
                log_decision(self.records, fence, decision)
            summary = decision.reason if decision else f"attempt {attempt} adopted"
            self.records.set_job_status(
                job.id, State.QUEUED, None, summary, if_open=True, fence=fence
            )
            self.records.close_intent(intent.id, result={"handle": handle.to_json()}, fence=fence)

    def _seed(self, job: Job, attempt: int, handle: AttemptHandle) -> None:
        """Once per attempt and process: hand the recorded evidence back to an adapter that
        derives outcomes over it (``EvidenceSeeder``), since the cluster may have deleted it."""
        key = (job.id, attempt)
        if key in self._seeded:
            return
        self._seeded.add(key)
        adapter = self.adapter(job.cluster)
        if isinstance(adapter, EvidenceSeeder):
            adapter.seed_evidence(handle, self.records.evidence(job.id, attempt))

    async def _observe(self, job: Job, attempt: int, handle: AttemptHandle) -> bool:
        self._seed(job, attempt, handle)
        observation = self.watcher.take(handle)
        if observation is not None:
            # the watch's, taken without an await: the writes are fenced by the lease the
            # tick holds, not preceded by a renewal (a write to the store of its own); a
            # supervisor that took the job over since makes them fail all the same
            fence = self._fence(job.id)
        elif self.watcher.covers(handle):
            return False  # the watch stream will say when something changes
        else:
            observation = await self.adapter(job.cluster).observe(handle)
            fence = self._renew(job.id)
        return record_observation(self.records, fence, attempt, observation)

    async def _cancel(
        self, job: Job, view: JobView, decision: Decision, handle: AttemptHandle
    ) -> None:
        attempt = handle.attempt
        intent = self.records.open_intent(
            job.id, IntentOperation.CANCEL, self.owner, attempt=attempt, fence=self._renew(job.id)
        )
        actor = view.cancel.actor if view.cancel else f"dispatch supervisor {self.owner}"
        reason = view.cancel.reason if view.cancel else decision.reason
        await self.adapter(job.cluster).cancel(handle, actor, reason)
        fence = self._renew(job.id)
        log_decision(self.records, fence, decision)
        if decision.cause is Cause.UNPLANNED_RECOVERY:
            seen = view.attempt.outcome if view.attempt else None  # what showed the re-run
            outcome = Outcome(
                state=State.FAILED,
                cause=Cause.UNPLANNED_RECOVERY,
                summary=decision.reason,
                first_failure=seen.first_failure if seen else None,
                evidence=seen.evidence if seen else (),
            )
            self.records.record_outcome(job.id, attempt, outcome, fence=fence)
        self.records.close_intent(intent.id, result={"actor": actor}, fence=fence)

    # --- long-lived modes -----------------------------------------------------------------

    async def drive(self, job_id: str) -> None:
        """Drive one job until it is terminal (another supervisor may do part of the work)."""
        if not self._reconciled:
            await self.reconcile()
        while True:
            report = await self.tick(job_id)
            record = self.records.get_job(job_id)
            if record.state.is_terminal:
                return
            last = report.last
            pause = self.poll_interval
            if last is not None and last.kind is DecisionKind.WAIT and last.until is not None:
                pause = max(0.0, min(pause, last.until - self.clock.now()))
            if last is not None and last.kind is DecisionKind.START:
                pause = 0.0
            await self.clock.sleep(pause)

    async def run(
        self,
        stop: asyncio.Event,
        *,
        on_step: Callable[[StepReport], None] | None = None,
        until_idle: bool = False,
    ) -> None:
        """Supervise until ``stop`` is set (or, with ``until_idle``, no job is open).

        Live attempts are watched (one stream per cluster, opened before the first pass and
        refreshed during long passes), not polled per job. Every ``poll_interval`` a pass
        ticks every open job; in between, a pass wakes on what a stream reports and ticks only
        the jobs that need it (``_due``). ``on_step`` sees every pass's report."""
        _tune_collector()
        self._lag.start()
        try:
            _, self._log_seq = self.records.logged_after(self._log_seq)
            self._follow()
            full_at = -math.inf
            while not stop.is_set():
                now = self.clock.now()
                full = now - full_at >= self.poll_interval
                if full:
                    full_at = now
                try:
                    only = None if full else self._due(now)
                    report = await self._pass(only, watched=True, look=full)
                    self._remember(report)
                    if on_step is not None:
                        on_step(report)
                    if until_idle and full and not self._open_jobs():
                        return
                    if self._started_in(report) or self._follow_due():
                        self._follow()
                except RecordsUnavailable as exc:  # e.g. the database restarting: next pass
                    log.warning("%s: %s; trying again in %g s", self.owner, exc, RECORDS_RETRY)
                    full_at = -math.inf  # a full pass next: what happened meanwhile is re-read
                    await self._pause(stop, RECORDS_RETRY)
                    continue
                now = self.clock.now()
                waits = [until for until in self._waits.values() if until > now]
                await self._pause(stop, min([full_at + self.poll_interval, *waits]) - now)
        finally:
            await self._drain()
            await self._lag.close()
            await self.watcher.close()

    def _due(self, now: float) -> set[str]:
        """Jobs to tick between full passes: reported on by a stream, with a new log entry
        (a cancel or release asked from elsewhere, or a step of ours), a wait that ended, or
        a transient failure to retry. (Jobs created since the last pass are added by
        ``_pass``.)"""
        logged, self._log_seq = self.records.logged_after(self._log_seq)
        waited = {job_id for job_id, until in self._waits.items() if until <= now}
        return logged | waited | self._retry | set(self.watcher.ready_jobs())

    def _remember(self, report: StepReport) -> None:
        for job in report.jobs:
            last = job.last
            if last is not None and last.kind is DecisionKind.WAIT and last.until is not None:
                self._waits[job.job_id] = last.until
            else:
                self._waits.pop(job.job_id, None)
            if job.retry:
                self._retry.add(job.job_id)
            else:
                self._retry.discard(job.job_id)

    @staticmethod
    def _started_in(report: StepReport) -> bool:
        return any(d.kind is DecisionKind.START for j in report.jobs for d in j.decisions)

    def _follow_due(self) -> bool:
        """Whether the watched attempts were last refreshed ``FOLLOW_EVERY`` seconds ago or
        more (a pass that started none refreshes them at most that often: reading every live
        attempt costs what is followed)."""
        last = self._followed_at
        return last is None or self.clock.now() - last >= FOLLOW_EVERY

    def _follow(self) -> None:
        self.watcher.follow(self._live_handles())
        self._followed_at = self.clock.now()

    def _live_handles(self) -> list[AttemptHandle]:
        return [
            a.handle
            for a in self.records.live_attempts()
            if a.handle is not None and (self.clusters is None or a.handle.cluster in self.clusters)
        ]

    def _open_jobs(self) -> list[OpenJob]:
        """The open jobs of the clusters this supervisor drives (their ids: no spec is read,
        so a pass costs what it ticks, not what is open)."""
        found = self.records.open_jobs()
        if self.clusters is None:
            return found
        return [r for r in found if r.cluster in self.clusters]

    async def _pause(self, stop: asyncio.Event, seconds: float) -> None:
        await first_of(
            self.clock.sleep(max(0.0, seconds)), stop.wait(), self.watcher.changed.wait()
        )
        self.watcher.changed.clear()

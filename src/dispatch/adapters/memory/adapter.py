"""The memory adapter: the whole SPI (plus ``Holder`` and ``OutputReader``) over a
``MemoryScheduler``, in a Slurm-like or a Kubernetes-like shape.

Cluster settings (all optional): ``shape`` (``slurm`` | ``kubernetes``, default ``slurm``),
``maxNodes`` (64), ``gpusPerNode`` (8), ``scenario`` (the default scenario, see
``scenario.py``), ``evidenceTTL`` (Kubernetes shape: seconds after the end when pods and
events are removed, 120), ``vanishAfter`` (Kubernetes shape: seconds after the end when the
object itself is deleted, 600), ``watchInterval`` (seconds between watch cycles, 1).

Differences from the contract worth knowing: a name once used is never reused, so ``start``
adopts an execution even after its object vanished (``observe`` then says ``gone``).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.memory.scenario import DEFAULT_SCENARIO
from dispatch.adapters.memory.world import (
    Execution,
    Fault,
    MemoryScheduler,
    Shape,
    SimulatedCrash,
    Status,
)
from dispatch.config import ClusterConfig
from dispatch.model import (
    Artifact,
    AttemptHandle,
    Capability,
    CapabilityReport,
    Cause,
    Job,
    JobSpec,
    NotFound,
    Observation,
    Outcome,
    OutcomeUnknown,
    Plan,
    Reason,
    SchedulerUnavailable,
    State,
    Unsupported,
)


class MemoryAdapter:
    """An in-memory scheduler bound to one cluster. Pass ``scheduler`` to share one world."""

    kind = "memory"

    def __init__(
        self,
        cluster: ClusterConfig,
        context: AdapterContext,
        *,
        scheduler: MemoryScheduler | None = None,
    ) -> None:
        self.cluster = cluster
        self.clock = context.clock
        self.scheduler = scheduler or MemoryScheduler(clock=context.clock)
        self.shape = Shape(str(cluster.setting("shape", Shape.SLURM.value)))
        self.max_nodes = cluster.whole_number("maxNodes", 64)
        self.gpus_per_node = cluster.whole_number("gpusPerNode", 8, minimum=0)
        self.default_scenario = str(cluster.setting("scenario", DEFAULT_SCENARIO))
        kube = self.shape is Shape.KUBERNETES
        self.evidence_ttl = cluster.number("evidenceTTL", 120.0) if kube else math.inf
        self.vanish_after = cluster.number("vanishAfter", 600.0) if kube else math.inf
        self.watch_interval = cluster.number("watchInterval", 1.0, minimum=0.001)
        self._seen: dict[str, Outcome] = {}  # last outcome reported per native name

    # --- faults ---------------------------------------------------------------------------

    def _fault(self, operation: str) -> Fault | None:
        self.scheduler.calls[operation] += 1
        fault = self.scheduler.take_fault(operation)
        if fault is Fault.CRASH:
            raise SimulatedCrash(f"crash injected before {operation}")
        if fault is Fault.UNAVAILABLE:
            raise SchedulerUnavailable(f"memory scheduler unavailable ({operation})")
        if fault is Fault.UNKNOWN_BEFORE:
            raise OutcomeUnknown(f"{operation}: no answer from the memory scheduler")
        return fault

    @staticmethod
    def _unknown_after(fault: Fault | None, operation: str) -> None:
        if fault is Fault.CRASH_AFTER:
            raise SimulatedCrash(f"crash injected after {operation}")
        if fault is Fault.UNKNOWN_AFTER:
            raise OutcomeUnknown(f"{operation}: the answer was lost (the request took effect)")

    # --- capabilities and plan ------------------------------------------------------------

    async def capabilities(self, spec: JobSpec | None = None) -> CapabilityReport:
        answers = (
            Capability("procsPerNode", True, "the memory scheduler starts ranks itself"),
            Capability("hold", True, f"{self.shape.value} shape holds queued attempts"),
            Capability("gpu", self.gpus_per_node > 0, f"{self.gpus_per_node} GPUs per node"),
        )
        refusals: list[Reason] = []
        if spec is not None:
            if spec.nodes > self.max_nodes:
                refusals.append(
                    Reason("memory-nodes", f"{spec.nodes} nodes asked, {self.max_nodes} exist")
                )
            if spec.resources.gpu > self.gpus_per_node:
                refusals.append(
                    Reason(
                        "memory-gpus",
                        f"{spec.resources.gpu} GPUs per node asked, {self.gpus_per_node} exist",
                    )
                )
            if self.shape is Shape.KUBERNETES and not spec.image:
                refusals.append(Reason("memory-image", "the kubernetes shape needs `image:`"))
        return CapabilityReport(
            cluster=self.cluster.name,
            adapter=self.kind,
            answers=answers,
            refusals=tuple(refusals),
            probed_at=self.clock.now(),
        )

    def name_for(self, job: Job, attempt: int) -> str:
        """The deterministic name of attempt ``attempt`` of ``job``."""
        return f"{job.id}-a{attempt}"

    async def plan(self, job: Job, attempt: int) -> Plan:
        report = await self.capabilities(job.spec)
        scenario = self.scheduler.scenario_for(job.spec.name, job.spec.env, self.default_scenario)
        script = scenario.for_attempt(attempt)
        content = {
            "shape": self.shape.value,
            "nodes": job.spec.nodes,
            "procsPerNode": job.spec.procs_per_node or 1,
            "command": [*job.spec.command, *job.spec.args],
            "env": job.identity(attempt).env(),
            "script": script.result.value,
        }
        return Plan(
            identity=job.identity(attempt),
            adapter=self.kind,
            capabilities=report,
            artifacts=(Artifact("memory-job", self.name_for(job, attempt), content),),
        )

    # --- start, observe, watch, cancel ----------------------------------------------------

    async def start(self, job: Job, attempt: int) -> AttemptHandle:
        report = await self.capabilities(job.spec)
        report.raise_if_refused()
        fault = self._fault("start")
        scenario = self.scheduler.scenario_for(job.spec.name, job.spec.env, self.default_scenario)
        name = self.name_for(job, attempt)
        execution = self.scheduler.submit(
            Execution(
                name=name,
                native=name,
                job_id=job.id,
                attempt=attempt,
                shape=self.shape,
                script=scenario.for_attempt(attempt),
                created_at=self.clock.now(),
                world_size=job.spec.nodes * (job.spec.procs_per_node or 1),
                time_limit=job.spec.time_limit,
            )
        )
        self._unknown_after(fault, "start")
        return self._handle(execution)

    def _handle(self, execution: Execution) -> AttemptHandle:
        return AttemptHandle(
            job_id=execution.job_id,
            attempt=execution.attempt,
            cluster=self.cluster.name,
            native=execution.native,
            data={"name": execution.name, "shape": self.shape.value},
        )

    def _find(self, handle: AttemptHandle) -> Execution | None:
        execution = self.scheduler.by_native(handle.native)
        if execution is None or execution.job_id != handle.job_id:
            return None
        return execution

    def _status(self, execution: Execution) -> Status:
        return execution.status(self.clock.now(), evidence_ttl=self.evidence_ttl)

    def _observation(self, handle: AttemptHandle) -> Observation:
        now = self.clock.now()
        execution = self._find(handle)
        if execution is not None:
            status = self._status(execution)
            vanished = status.ended_at is not None and status.ended_at + self.vanish_after <= now
            if not vanished:
                outcome = status.outcome()
                self._seen[handle.native] = outcome
                return Observation(handle, outcome, status.evidence, observed_at=now)
        seen = self._seen.get(handle.native)
        if seen is None or not seen.is_terminal:
            seen = Outcome(
                state=State.FAILED,
                cause=Cause.UNKNOWN,
                summary=f"the scheduler has no trace of {handle.native}",
            )
        return Observation(handle, seen, (), observed_at=now, gone=True)

    async def observe(self, handle: AttemptHandle) -> Observation:
        fault = self._fault("observe")
        self._unknown_after(fault, "observe")
        return self._observation(handle)

    async def watch(self, handles: Sequence[AttemptHandle]) -> AsyncIterator[Observation]:
        """One listing of the whole scheduler per cycle (``calls['list']``), however many
        handles; yields an attempt's observation first, then whenever it changes."""
        last: dict[str, tuple[object, ...]] = {}
        while True:
            self.scheduler.calls["list"] += 1
            for handle in handles:
                observation = self._observation(handle)
                key = (
                    observation.state,
                    observation.outcome.cause,
                    len(observation.evidence),
                    observation.gone,
                )
                if last.get(handle.native) != key:
                    last[handle.native] = key
                    yield observation
            await self.clock.sleep(self.watch_interval)

    async def cancel(self, handle: AttemptHandle, actor: str, reason: str) -> None:
        fault = self._fault("cancel")
        execution = self._find(handle)
        live = execution is not None and self._status(execution).ended_at is None
        if execution is not None and live and execution.cancelled_at is None:
            execution.cancelled_at = self.clock.now()
            execution.cancelled_by = f"{actor}: {reason}" if reason else actor
        self._unknown_after(fault, "cancel")

    # --- Holder ---------------------------------------------------------------------------

    async def hold(self, handle: AttemptHandle) -> None:
        self._fault("hold")
        execution = self._find(handle)
        if execution is None:
            raise NotFound(f"no attempt {handle.native} on {self.cluster.name}")
        status = self._status(execution)
        if status.state is State.HELD or status.ended_at is not None:
            return
        if status.runs > 0:
            raise Unsupported(
                [Reason("hold-running", f"{handle.native} is already running")],
                cluster=self.cluster.name,
            )
        execution.held_since = self.clock.now()

    async def release(self, handle: AttemptHandle) -> None:
        self._fault("release")
        execution = self._find(handle)
        if execution is None:
            raise NotFound(f"no attempt {handle.native} on {self.cluster.name}")
        if execution.held_since is not None:
            execution.held_total += self.clock.now() - execution.held_since
            execution.held_since = None

    # --- OutputReader ---------------------------------------------------------------------

    async def read_output(
        self, handle: AttemptHandle, rank: int | None = None, follow: bool = False
    ) -> AsyncIterator[str]:
        """Each rank prints a line when it starts and one when it ends."""
        execution = self._find(handle)
        if execution is None:
            raise NotFound(f"no attempt {handle.native} on {self.cluster.name}")
        if rank is not None and not 0 <= rank < execution.world_size:
            raise NotFound(f"{handle.native} has ranks 0..{execution.world_size - 1}, not {rank}")
        ranks = [rank] if rank is not None else list(range(execution.world_size))
        printed = 0
        while True:
            status = self._status(execution)
            lines: list[str] = []
            prefix = {r: "" if rank is not None else f"[rank {r}] " for r in ranks}
            if status.runs:
                lines += [f"{prefix[r]}attempt {execution.attempt} rank {r} started" for r in ranks]
            if status.ended_at is not None:
                lines += [f"{prefix[r]}rank {r} ended: {status.summary}" for r in ranks]
            for line in lines[printed:]:
                yield line
            printed = len(lines)
            if not follow or status.ended_at is not None:
                return
            await self.clock.sleep(self.watch_interval)

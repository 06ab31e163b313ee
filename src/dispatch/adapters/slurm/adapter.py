"""The Slurm adapter: dispatch's contract carried out with sbatch, squeue/sacct and scancel.

Differences from the SPI's general guarantees (``dispatch.adapters.base``):

* ``start`` submits held, looks for other jobs with the attempt's name, keeps the lowest job
  id and cancels its own if it lost (two supervisors racing converge on one job), then
  releases the winner unless ``held=True`` was asked. Slurm has no create-if-absent; this
  makes the window in which a duplicate exists a held, never-started job.
* ``watch`` ends once every watched attempt has ended.
* ``hold`` of an attempt that has ended (or that Slurm no longer knows) does nothing.
* ``cancel`` first writes ``dispatch-cancel:<actor>`` into the job's comment, so every later
  observer (squeue, scontrol, sacct with job_comment) sees who asked.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime

from dispatch.adapters.base import AdapterContext
from dispatch.adapters.secrets import HIDDEN
from dispatch.adapters.slurm import commands as cmd
from dispatch.adapters.slurm.evidence import job_evidence, output_evidence
from dispatch.adapters.slurm.formats import JSON_CHOICE_SINCE, parse_formats_output
from dispatch.adapters.slurm.native import SlurmJob, Source
from dispatch.adapters.slurm.output import BatchOutput, parse_batch_output
from dispatch.adapters.slurm.parsers import (
    SlurmOutputError,
    parse_sacct_output,
    parse_sbatch_output,
    parse_squeue_names_output,
)
from dispatch.adapters.slurm.probe import (
    ClusterFacts,
    answers,
    parse_config_output,
    parse_nodes_output,
    parse_partitions_output,
    parse_version_output,
    refusals,
)
from dispatch.adapters.slurm.script import (
    BATCH_OUTPUT,
    TASK_OUTPUT,
    build_sbatch_script,
    job_name,
    layout,
)
from dispatch.adapters.slurm.settings import SlurmSettings
from dispatch.adapters.slurm.states import derive_outcome
from dispatch.adapters.slurm.status import Snapshot, StatusReader
from dispatch.adapters.slurm.transport import CommandResult, ProcessRunner, Runner
from dispatch.config import ClusterConfig
from dispatch.model import (
    Artifact,
    AttemptHandle,
    CapabilityReport,
    Cause,
    Evidence,
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
from dispatch.model.environ import base_environment
from dispatch.model.lastwords import last_words

#: sbatch errors that mean the request itself cannot be satisfied (not a passing failure)
_REFUSED = (
    "Invalid partition",
    "Requested node configuration is not available",
    "Node count specification invalid",
    "More processors requested than permitted",
    "Memory required by task is not available",
    "Requested time limit is invalid",
    "Invalid generic resource",
    "Batch job submission failed",
)
_ALREADY_OVER = ("already completing or completed", "has already finished", "Invalid job id")


#: at most this many failed tasks' output tails kept per attempt
MAX_TAILS = 16


class SlurmAdapter:
    """One Slurm cluster. Also an ``OutputReader`` and a ``Holder``."""

    kind = "slurm"
    starts_held = True  # ``HeldStarter``: a held attempt is a held Slurm job

    def __init__(
        self, cluster: ClusterConfig, context: AdapterContext, *, runner: Runner | None = None
    ) -> None:
        self.cluster = cluster
        self.context = context
        self.settings = SlurmSettings.from_cluster(cluster, context.state_dir)
        self.runner: Runner = runner or ProcessRunner(
            self.settings.make_transport(),
            env=self.settings.command_env,
            timeout=self.settings.command_timeout,
        )
        self._facts: ClusterFacts | None = None
        self._probed_at: float | None = None
        self._outputs: dict[str, BatchOutput] = {}  # batch outputs of failed jobs, read once
        self._words: dict[str, list[Evidence]] = {}  # failed tasks' output tails, read once
        self._last: dict[str, Observation] = {}  # by Slurm job id

    # --- capabilities and plan -------------------------------------------------------------

    async def facts(self) -> ClusterFacts:
        """The installation's facts, probed once (four commands, five from Slurm 23.02: the
        JSON formats offered) and cached."""
        if self._facts is None:
            outputs = []
            for argv in (
                cmd.build_version_command(),
                cmd.build_config_command(),
                cmd.build_partitions_command(),
                cmd.build_nodes_command(),
            ):
                outputs.append(await self._checked(argv, "probe the Slurm installation"))
            try:
                version = parse_version_output(outputs[0])
                formats: tuple[str, ...] = ()
                if version >= JSON_CHOICE_SINCE:
                    listed = await self._checked(
                        cmd.build_json_formats_command(), "list Slurm's JSON formats"
                    )
                    formats = parse_formats_output(listed)
                self._facts = ClusterFacts(
                    version=version,
                    config=parse_config_output(outputs[1]),
                    partitions=parse_partitions_output(outputs[2]),
                    nodes=parse_nodes_output(outputs[3]),
                    json_formats=formats,
                )
            except (SlurmOutputError, ValueError) as exc:
                raise SchedulerUnavailable(f"unreadable Slurm configuration: {exc}") from None
            self._probed_at = self.context.clock.now()
        return self._facts

    def _partition(self, spec: JobSpec) -> str | None:
        return spec.queue or self.settings.partition

    async def capabilities(self, spec: JobSpec | None = None) -> CapabilityReport:
        facts = await self.facts()
        found = refusals(facts, spec, self._partition(spec)) if spec is not None else ()
        if spec is not None and spec.secret_env and self.settings.transport != "local":
            found = (
                *found,
                Reason(
                    "slurm-secret-transport",
                    f"secretEnv needs transport local: over {self.settings.transport} the "
                    "values would travel on the login node's command line; submit from a "
                    "Slurm submit host, or pass the value another way",
                ),
            )
        return CapabilityReport(
            cluster=self.cluster.name,
            adapter=self.kind,
            answers=answers(facts, self.settings.accounting),
            refusals=found,
            probed_at=self._probed_at,
        )

    def _output_dir(self, job: Job, attempt: int) -> str:
        return f"{self.settings.output_dir}/{job_name(job.id, attempt)}"

    async def plan(self, job: Job, attempt: int, *, held: bool = False) -> Plan:
        report = await self.capabilities(job.spec)
        identity = job.identity(attempt)
        output_dir = self._output_dir(job, attempt)
        notes = [
            f"transport {self.settings.transport}; outputs in {output_dir}",
            next(a.reason for a in report.answers if a.name == "accounting"),
        ]
        if job.spec.image:
            notes.append(f"image {job.spec.image} is ignored: Slurm runs on the nodes' software")
        if job.spec.runtime:
            notes.append("runtime is ignored: it names a Kubeflow runtime")
        try:
            script = build_sbatch_script(
                job.spec,
                identity,
                output_dir=output_dir,
                partition=self._partition(job.spec),
                master_port=self.settings.master_port,
            )
        except ValueError as exc:
            reason = Reason("slurm-script", str(exc))
            report = replace(report, refusals=(*report.refusals, reason))
            script = ""
        name = job_name(job.id, attempt)
        sbatch = cmd.build_sbatch_command(hold=True, export=self._exported(job))
        submit = self.runner.transport.invocation(sbatch, {})
        sent = {
            "argv": list(submit.argv),
            "stdin": "sbatch-script",
            "secretEnv": dict.fromkeys(job.spec.secret_env, HIDDEN),
        }
        artifacts = (
            Artifact("sbatch-script", name, script),
            Artifact("argv", "mkdir", {"argv": cmd.build_mkdir_command(output_dir)}),
            Artifact("argv", "sbatch", sent),
        )
        extra = {"held": held, "layout": asdict(layout(job.spec))}
        return Plan(identity, self.kind, report, artifacts, tuple(notes), extra)

    @staticmethod
    def _environment(job: Job) -> dict[str, str]:
        """The base and ``inheritEnv`` values captured at submit (a job recorded before they
        were: the base of this process)."""
        if job.environment is not None:
            return dict(job.environment)
        return base_environment(os.environ)

    def _exported(self, job: Job) -> list[str]:
        return [*self._environment(job), *job.spec.secret_env]

    # --- start ------------------------------------------------------------------------------

    async def start(self, job: Job, attempt: int, *, held: bool = False) -> AttemptHandle:
        plan = await self.plan(job, attempt, held=held)
        plan.capabilities.raise_if_refused()
        # sbatch's own environment carries the values it exports: none is written anywhere
        values = {**self._environment(job), **self.context.secret_values(job)}
        name = job_name(job.id, attempt)
        since = datetime.fromtimestamp(job.created_at - 86400, UTC).date().isoformat()
        existing = await self._jobs_named(name, since)
        if existing:
            winner = existing[0]
        else:
            output_dir = self._output_dir(job, attempt)
            await self._checked(cmd.build_mkdir_command(output_dir), "create the output folder")
            script = str(plan.artifacts[0].content)
            sbatch = cmd.build_sbatch_command(hold=True, export=self._exported(job))
            result = await self.runner.run(sbatch, stdin=script, env=values)
            if not result.ok:
                self._raise_submit_error(result)
            try:
                mine = parse_sbatch_output(result.stdout)
            except SlurmOutputError as exc:
                raise OutcomeUnknown(str(exc)) from None
            named = await self._jobs_named(name, since)
            winner = named[0] if named else SlurmJob(mine, name, ("PENDING",), Source.SQUEUE)
            if int(winner.job_id) < int(mine):
                await self.runner.run(cmd.build_scancel_command(mine, name))  # lost the race
        if not held and winner.state == "PENDING" and winner.reason == "JobHeldUser":
            await self.runner.run(cmd.build_release_command(winner.job_id))
        shape = layout(job.spec)
        return AttemptHandle(
            job_id=job.id,
            attempt=attempt,
            cluster=self.cluster.name,
            native=winner.job_id,
            data={
                "name": name,
                "outputDir": self._output_dir(job, attempt),
                "tasks": shape.tasks,
                "tasksPerNode": shape.tasks_per_node,
            },
        )

    async def _jobs_named(self, name: str, since: str) -> list[SlurmJob]:
        """Jobs with this name, lowest id first (squeue, and sacct for forgotten ones)."""
        result = await self.runner.run(cmd.build_squeue_name_command(name))
        if not result.ok:
            raise SchedulerUnavailable(f"cannot look for job {name}: {result.describe()}")
        jobs = {j.job_id: j for j in parse_squeue_names_output(result.stdout) if j.name == name}
        facts = await self.facts()
        if not jobs and StatusReader(self.runner, facts, self.settings.accounting).use_sacct:
            found = await self.runner.run(cmd.build_sacct_name_command(name, since))
            if found.ok:
                jobs = {j.job_id: j for j in parse_sacct_output(found.stdout) if j.name == name}
        return sorted(jobs.values(), key=lambda j: int(j.job_id))

    def _raise_submit_error(self, result: CommandResult) -> None:
        text = result.stderr.strip() or result.stdout.strip()
        if any(marker in text for marker in _REFUSED):
            raise Unsupported([Reason("slurm-sbatch-refused", text)], cluster=self.cluster.name)
        raise OutcomeUnknown(f"sbatch failed; the job may or may not exist: {result.describe()}")

    # --- observe and watch ------------------------------------------------------------------

    async def _snapshot(self, handles: Sequence[AttemptHandle]) -> Snapshot:
        reader = StatusReader(self.runner, await self.facts(), self.settings.accounting)
        return await reader.snapshot([h.native for h in handles])

    async def observe(self, handle: AttemptHandle) -> Observation:
        snapshot = await self._snapshot([handle])
        return await self._observation(handle, snapshot)

    async def watch(self, handles: Sequence[AttemptHandle]) -> AsyncIterator[Observation]:
        """One status query set per cycle for all ``handles``; yields each attempt's first
        observation and then every change of state, cause or summary; ends when all ended."""
        live = {h.native: h for h in handles}
        shown: dict[str, tuple[object, ...]] = {}
        while live:
            snapshot = await self._snapshot(list(live.values()))
            for native, handle in list(live.items()):
                seen = await self._observation(handle, snapshot)
                key = (seen.outcome.state, seen.outcome.cause, seen.outcome.summary, seen.gone)
                if shown.get(native) != key:
                    shown[native] = key
                    yield seen
                if seen.outcome.is_terminal or seen.gone:
                    del live[native]
            if live:
                await self.context.clock.sleep(self.settings.poll_interval)

    async def _observation(self, handle: AttemptHandle, snapshot: Snapshot) -> Observation:
        now = self.context.clock.now()
        job = snapshot.jobs.get(handle.native)
        if job is None:
            return self._gone(handle, snapshot, now)
        other = _renamed(job, handle, now)
        if other is not None:
            return other
        evidence = [job_evidence(job, now)]
        output = None
        if derive_outcome(job).state is State.FAILED:
            output = await self._batch_output(handle)
            if output.failures or output.out_of_memory or output.node_failures:
                evidence.append(output_evidence(handle, output, now))
            evidence += await self._last_words(handle, output, now)
        outcome = derive_outcome(job, output)
        outcome = replace(outcome, evidence=tuple(evidence))
        seen = Observation(handle, outcome, tuple(evidence), observed_at=now)
        self._last[handle.native] = seen
        return seen

    def _gone(self, handle: AttemptHandle, snapshot: Snapshot, now: float) -> Observation:
        before = self._last.get(handle.native)
        asked = ", ".join(snapshot.asked)
        if before is not None and before.outcome.is_terminal:
            return replace(before, observed_at=now, gone=True)
        summary = (
            f"Slurm job {handle.native} is unknown to {asked}"
            if asked
            else f"{handle.native!r} is not a Slurm job id"
        )
        outcome = Outcome(State.FAILED, Cause.UNKNOWN, summary=summary)
        return Observation(handle, outcome, (), observed_at=now, gone=True)

    async def _batch_output(self, handle: AttemptHandle) -> BatchOutput:
        if handle.native not in self._outputs:
            path = f"{handle.data.get('outputDir', '')}/{BATCH_OUTPUT}"
            result = await self.runner.run(cmd.build_read_command(path))
            self._outputs[handle.native] = parse_batch_output(result.stdout if result.ok else "")
        return self._outputs[handle.native]

    async def _last_words(
        self, handle: AttemptHandle, output: BatchOutput, now: float
    ) -> list[Evidence]:
        """The tails of the failed tasks' output files (``model.lastwords``), read once: the
        attempt's folder may be cleaned up later, the records keep them."""
        if handle.native not in self._words:
            first = output.first_failure()
            failed = sorted({f.task for f in output.failures if not f.collateral})
            tasks = ([first.task] if first is not None else []) + failed
            found: list[Evidence] = []
            for task in list(dict.fromkeys(tasks))[:MAX_TAILS]:
                name = TASK_OUTPUT.format(task=task)
                path = f"{handle.data.get('outputDir', '')}/{name}"
                result = await self.runner.run(cmd.build_read_command(path))
                kept = last_words(task, name, result.stdout if result.ok else "", now)
                if kept is not None:
                    found.append(kept)
            self._words[handle.native] = found
        return self._words[handle.native]

    # --- cancel, hold, release --------------------------------------------------------------

    async def cancel(self, handle: AttemptHandle, actor: str, reason: str) -> None:
        seen = await self.observe(handle)
        if seen.outcome.is_terminal or seen.gone:
            return
        comment = cmd.build_comment_command(handle.native, cmd.cancel_comment(actor))
        await self.runner.run(comment)  # best effort: the job may end meanwhile
        name = str(handle.data.get("name") or "") or None  # only the job dispatch named so
        result = await self.runner.run(cmd.build_scancel_command(handle.native, name))
        if not result.ok and not any(m in result.stderr for m in _ALREADY_OVER):
            raise SchedulerUnavailable(f"scancel failed: {result.describe()}")

    async def hold(self, handle: AttemptHandle) -> None:
        seen = await self.observe(handle)
        if seen.state is State.HELD or seen.outcome.is_terminal or seen.gone:
            return  # nothing left to keep from starting
        if seen.state is not State.QUEUED:
            raise Unsupported(
                [Reason("hold-running", f"attempt is {seen.state}: only a queued job can be held")],
                cluster=self.cluster.name,
            )
        await self._checked(cmd.build_hold_command(handle.native), "hold the job")

    async def release(self, handle: AttemptHandle) -> None:
        seen = await self.observe(handle)
        if seen.state is State.HELD:
            await self._checked(cmd.build_release_command(handle.native), "release the job")

    # --- output -----------------------------------------------------------------------------

    async def read_output(
        self, handle: AttemptHandle, rank: int | None = None, follow: bool = False
    ) -> AsyncIterator[str]:
        """Lines of one task's output file (task = rank, or node for torchrun commands), or
        of every task prefixed ``[rank N]``. ``follow`` re-reads each poll interval until the
        attempt ends."""
        tasks = int(handle.data.get("tasks", 1))
        if rank is not None and not 0 <= rank < tasks:
            raise NotFound(f"attempt {handle.attempt} of {handle.job_id} has no rank {rank}")
        ranks = [rank] if rank is not None else list(range(tasks))
        printed = dict.fromkeys(ranks, 0)
        while True:
            ended = (await self.observe(handle)).outcome.is_terminal if follow else True
            for task in ranks:
                path = f"{handle.data.get('outputDir', '')}/{TASK_OUTPUT.format(task=task)}"
                result = await self.runner.run(cmd.build_read_command(path))
                lines = result.stdout.splitlines() if result.ok else []
                for line in lines[printed[task] :]:
                    yield line if rank is not None else f"[rank {task}] {line}"
                printed[task] = len(lines)
            if ended:
                return
            await self.context.clock.sleep(self.settings.poll_interval)

    # --- helpers ----------------------------------------------------------------------------

    async def _checked(self, argv: list[str], what: str) -> str:
        result = await self.runner.run(argv)
        if not result.ok:
            raise SchedulerUnavailable(f"cannot {what}: {result.describe()}")
        return result.stdout


def _renamed(job: SlurmJob, handle: AttemptHandle, now: float) -> Observation | None:
    """The observation of an attempt whose job id now names another job (ids are reused once
    Slurm wraps around or its state is reset): the name Slurm reports is not the one dispatch
    gave. It ends ``unknown`` with both names, and the job is never acted on. None when the
    names agree, or when either is not known (a handle recorded without a name)."""
    expected = str(handle.data.get("name") or "")
    if not expected or not job.name or job.name == expected:
        return None
    summary = (
        f"Slurm job {job.job_id} is not the one dispatch submitted (named {expected!r}): it is "
        f"named {job.name!r} now; dispatch leaves it alone"
    )
    proof = Evidence(
        kind="guard",
        key=f"guard/slurm/{job.job_id}/replaced/{job.name}",
        observed_at=now,
        summary=summary,
        data={"guard": "replaced", "jobId": job.job_id, "name": expected, "found": job.name},
    )
    outcome = Outcome(State.FAILED, Cause.UNKNOWN, summary=summary, evidence=(proof,))
    return Observation(handle, outcome, (), observed_at=now, gone=True)

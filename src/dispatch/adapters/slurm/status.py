"""One status query per poll cycle, for every watched job at once.

With accounting: ``sacct --jobs=<all ids>`` (jobs and steps). Without it, or for jobs sacct
does not list yet or lists as PENDING (its reason may be stale): ``squeue --json`` in the
format the probe chose (every job the controller still holds, finished ones for MinJobAge),
or ``scontrol show job`` before 21.08 and where dispatch reads none of the JSON formats
offered; jobs the controller has forgotten are looked up in the ``jobcomp/filetxt`` file. A
cycle therefore runs at most three commands, however many jobs are watched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dispatch.adapters.slurm.commands import (
    build_jobcomp_command,
    build_sacct_command,
    build_scontrol_jobs_command,
    build_squeue_json_command,
)
from dispatch.adapters.slurm.native import SlurmJob, Source
from dispatch.adapters.slurm.parsers import (
    SlurmOutputError,
    parse_jobcomp_output,
    parse_sacct_output,
    parse_scontrol_jobs_output,
    parse_squeue_json_output,
)
from dispatch.adapters.slurm.probe import ClusterFacts, uses_sacct
from dispatch.adapters.slurm.transport import Runner
from dispatch.model import SchedulerUnavailable


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one poll cycle learned: the jobs found (by id) and the tools asked."""

    jobs: Mapping[str, SlurmJob]
    asked: tuple[Source, ...]


class StatusReader:
    """Reads the state of many jobs with a bounded number of commands per call."""

    def __init__(self, runner: Runner, facts: ClusterFacts, accounting_mode: str) -> None:
        self.runner = runner
        self.facts = facts
        self.use_sacct = uses_sacct(facts, accounting_mode)

    async def snapshot(self, job_ids: Sequence[str]) -> Snapshot:
        """The jobs among ``job_ids`` that any source knows. Raises ``SchedulerUnavailable``
        when the controller cannot be asked. An id that is not a number is no Slurm job: it
        is never looked up (nor passed to a command) and is never found."""
        wanted = sorted({j for j in job_ids if j.isascii() and j.isdigit()}, key=int)
        found: dict[str, SlurmJob] = {}
        asked: list[Source] = []
        if not wanted:
            return Snapshot(found, ())
        if self.use_sacct:
            asked.append(Source.SACCT)
            result = await self.runner.run(build_sacct_command(wanted))
            if result.ok:
                found.update(self._keep(self._parse(parse_sacct_output, result.stdout), wanted))
        # the database keeps a pending job's reason from its submission, not a later hold
        # (24.11's sacct says None for a job squeue shows JobHeldUser): ask the controller
        missing = [j for j in wanted if j not in found or found[j].state == "PENDING"]
        if missing:
            if self.facts.has_squeue_json:
                asked.append(Source.SQUEUE)
                command = build_squeue_json_command(self.facts.json_argument)
                result = await self.runner.run(command)
                parser = parse_squeue_json_output
            else:
                asked.append(Source.SCONTROL)
                result = await self.runner.run(build_scontrol_jobs_command())
                parser = parse_scontrol_jobs_output
            if not result.ok:
                raise SchedulerUnavailable(f"cannot read job states: {result.describe()}")
            found.update(self._keep(self._parse(parser, result.stdout), missing))
        missing = [j for j in wanted if j not in found]
        jobcomp = self.facts.jobcomp_file
        if missing and jobcomp:
            asked.append(Source.JOBCOMP)
            result = await self.runner.run(build_jobcomp_command(jobcomp, missing))
            if result.ok:  # grep exits 1 when nothing matched
                found.update(self._keep(parse_jobcomp_output(result.stdout), missing))
        return Snapshot(found, tuple(asked))

    @staticmethod
    def _keep(jobs: Sequence[SlurmJob], wanted: Sequence[str]) -> dict[str, SlurmJob]:
        ids = set(wanted)
        return {job.job_id: job for job in jobs if job.job_id in ids}

    @staticmethod
    def _parse(parser: Callable[[str], list[SlurmJob]], text: str) -> list[SlurmJob]:
        try:
            return parser(text)
        except SlurmOutputError as exc:
            raise SchedulerUnavailable(f"unreadable Slurm status output: {exc}") from None

"""Execution identity: which job and which attempt a rank belongs to, as published to the rank."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ENV_JOB = "DISPATCH_JOB"
ENV_ATTEMPT = "DISPATCH_ATTEMPT"
ENV_CLUSTER = "DISPATCH_CLUSTER"
ENV_WEAKENED = "DISPATCH_IDENTITY_WEAKENED"


@dataclass(frozen=True, slots=True)
class ExecutionIdentity:
    """One attempt of one job on one cluster. Attempts are numbered from 1.

    Within one attempt every rank runs at most once, unless ``weakened`` names the reason the
    cluster's configuration allows otherwise.
    """

    job_id: str
    attempt: int
    cluster: str
    weakened: str | None = None

    def __post_init__(self) -> None:
        if self.attempt < 1:
            raise ValueError(f"attempts are numbered from 1, got {self.attempt}")
        if not self.job_id:
            raise ValueError("a job id is required")

    def env(self) -> dict[str, str]:
        """The variables every rank of this attempt receives."""
        published = {
            ENV_JOB: self.job_id,
            ENV_ATTEMPT: str(self.attempt),
            ENV_CLUSTER: self.cluster,
        }
        if self.weakened:
            published[ENV_WEAKENED] = self.weakened
        return published

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ExecutionIdentity | None:
        """The identity published to this process, or None outside a dispatch job."""
        job, attempt = environ.get(ENV_JOB), environ.get(ENV_ATTEMPT)
        if not job or not attempt:
            return None
        try:
            number = int(attempt)
        except ValueError:
            return None
        if number < 1:
            return None
        return cls(
            job_id=job,
            attempt=number,
            cluster=environ.get(ENV_CLUSTER, ""),
            weakened=environ.get(ENV_WEAKENED) or None,
        )

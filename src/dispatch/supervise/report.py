"""What a supervisor pass did, as values that print (``dispatch supervise -o json``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dispatch.supervise.decide import Decision


@dataclass(frozen=True, slots=True)
class JobReport:
    """One job in one pass: the open intents reconciled, the decisions carried out, and a
    note when it was skipped or an operation must be tried again (``retry``)."""

    job_id: str
    decisions: tuple[Decision, ...] = ()
    note: str = ""
    retry: bool = False
    reconciled: tuple[str, ...] = ()

    @property
    def last(self) -> Decision | None:
        return self.decisions[-1] if self.decisions else None

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job_id,
            "decisions": [d.to_json() for d in self.decisions],
            "note": self.note or None,
            "retry": self.retry,
            "reconciled": list(self.reconciled),
        }


@dataclass(frozen=True, slots=True)
class StepReport:
    """One pass over the open jobs, and the intents reconciled before it."""

    owner: str
    at: float
    jobs: tuple[JobReport, ...] = ()
    reconciled: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "at": self.at,
            "reconciled": list(self.reconciled),
            "jobs": [j.to_json() for j in self.jobs],
        }

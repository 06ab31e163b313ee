"""Capability answers (per cluster, probed) and plans (what ``start`` would do, as a value)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.model.errors import Reason, Unsupported
from dispatch.model.identity import ExecutionIdentity


@dataclass(frozen=True, slots=True)
class Capability:
    """One yes/no answer about a concrete cluster, with the reason for it."""

    name: str
    supported: bool
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"supported": self.supported, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class CapabilityReport:
    """A cluster's answers, and for a given spec the refusals that apply to it."""

    cluster: str
    adapter: str
    answers: tuple[Capability, ...] = ()
    refusals: tuple[Reason, ...] = ()
    weakened_identity: str | None = None
    probed_at: float | None = None

    @property
    def accepted(self) -> bool:
        return not self.refusals

    def answer(self, name: str) -> Capability | None:
        return next((a for a in self.answers if a.name == name), None)

    def raise_if_refused(self) -> None:
        if self.refusals:
            raise Unsupported(self.refusals, cluster=self.cluster)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "adapter": self.adapter,
            "accepted": self.accepted,
            "capabilities": {a.name: a.to_json() for a in self.answers},
            "reasons": [{"rule": r.rule, "message": r.message} for r in self.refusals],
            "weakenedIdentity": self.weakened_identity,
            "probedAt": self.probed_at,
        }


@dataclass(frozen=True, slots=True)
class Artifact:
    """One thing ``start`` would create or run: a manifest, a script, a command line."""

    kind: str  # e.g. "TrainJob", "sbatch-script", "process"
    name: str
    content: Mapping[str, Any] | str

    def to_json(self) -> dict[str, Any]:
        content = self.content if isinstance(self.content, str) else dict(self.content)
        return {"kind": self.kind, "name": self.name, "content": content}


@dataclass(frozen=True, slots=True)
class Plan:
    """The dry run of an attempt: the capabilities answered and the exact things to create.

    A plan with refusals is still a value that prints; ``start`` raises ``Unsupported`` for it.
    """

    identity: ExecutionIdentity
    adapter: str
    capabilities: CapabilityReport
    artifacts: tuple[Artifact, ...] = ()
    notes: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.capabilities.accepted

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.identity.job_id,
            "attempt": self.identity.attempt,
            "cluster": self.identity.cluster,
            "adapter": self.adapter,
            "accepted": self.accepted,
            "capabilities": {a.name: a.to_json() for a in self.capabilities.answers},
            "reasons": [{"rule": r.rule, "message": r.message} for r in self.capabilities.refusals],
            "weakenedIdentity": self.capabilities.weakened_identity,
            "objects": [a.to_json() for a in self.artifacts],
            "notes": list(self.notes),
        }

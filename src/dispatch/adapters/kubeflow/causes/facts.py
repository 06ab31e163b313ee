"""Facts: what the evidence says happened, each with a time, a candidate cause and its proof.

The readers (``pods``, ``cluster``) turn raw objects into ``Fact`` values sorted
into a ``Facts`` bundle; the decision (``causes``) then orders them. A fact carries the
``Evidence`` items that prove it: small excerpts (which object, which field, its value), not
whole objects, so an outcome stays readable and the records stay small.

Shared reading helpers for Kubernetes objects live here too. Like ``objects``, none of them
raises on malformed input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.adapters.kubeflow.causes.evidence import Ref, Sighting
from dispatch.adapters.kubeflow.causes.workloads import rank_from_pod_name
from dispatch.adapters.kubeflow.objects import (
    created,
    dig,
    format_time,
    latest_condition_time,
)
from dispatch.model import Cause, Evidence


@dataclass(frozen=True, slots=True)
class Fact:
    """Something that happened: when, what it would mean as the first failure, and its proof.

    ``cause`` is the cause this fact proves when it is the attempt's first failure (for a
    ``Moment`` such as a start or an admission it is only descriptive). ``at`` is the time it
    happened according to the objects (None when nothing says). ``rank``, ``pod``, ``node``
    (the Kubernetes node name) and ``exit_code`` locate it when it concerns one rank.
    """

    cause: Cause
    at: float | None
    summary: str
    proofs: tuple[Evidence, ...]
    rank: int | None = None
    pod: str | None = None
    node: str | None = None
    exit_code: int | None = None
    #: for a re-run: the field of the workload's own spec that asks for it ("" when none does)
    planned: str = ""


@dataclass(frozen=True, slots=True)
class Wait:
    """Waiting for placement or for pods: since when, until when it was last seen waiting.

    ``ongoing`` means the latest evidence still shows the wait (so it lasts until "now").
    ``cause`` is what the wait becomes once it outlasts the cluster's patience, or its own
    ``patience`` when the objects set one (a PodGroup's ``scheduleTimeoutSeconds``).
    """

    cause: Cause
    since: float
    until: float | None
    ongoing: bool
    summary: str
    proofs: tuple[Evidence, ...]
    rank: int | None = None
    pod: str | None = None
    patience: float | None = None


@dataclass
class Facts:
    """Everything read from one attempt's evidence, sorted by what the decision does with it."""

    #: facts that end the attempt; the first in time is the cause
    failures: list[Fact] = field(default_factory=list)
    #: work re-run inside the attempt (container restarts, replacement pods, JobSet restarts)
    recoveries: list[Fact] = field(default_factory=list)
    #: Kueue evictions: they end the attempt only when a rank had started before them
    evictions: list[Fact] = field(default_factory=list)
    #: the TrainJob, JobSet or Job failed without saying why (fallback: ``unknown``)
    ends: list[Fact] = field(default_factory=list)
    #: the TrainJob or JobSet completed
    successes: list[Fact] = field(default_factory=list)
    #: the TrainJob was deleted
    cancels: list[Fact] = field(default_factory=list)
    #: the TrainJob was suspended, not by Kueue (a cancel only once a rank had started)
    suspensions: list[Fact] = field(default_factory=list)
    #: a rank's container started
    starts: list[Fact] = field(default_factory=list)
    #: Kueue admitted the workload (quota reserved)
    admissions: list[Fact] = field(default_factory=list)
    #: waits that become a cause once they outlast the patience
    waits: list[Wait] = field(default_factory=list)
    #: node trouble seen in events, by node name (or ``pod:<name>`` for an event on a pod)
    node_troubles: dict[str, list[Fact]] = field(default_factory=dict)
    #: pods (or pod creations) were seen at all, or objects prove they existed
    pods_seen: bool = False
    #: some pod is in the evidence itself
    pods_in_evidence: bool = False
    #: the workload judged (TrainJob, JobSet, PyTorchJob, Job, ...): its kind and name
    workload_kind: str = "TrainJob"
    workload: str | None = None
    workload_created: float | None = None
    #: the workload's identity, creation, queue and suspension, as proof for waits
    workload_proof: tuple[Evidence, ...] = ()
    #: the workload is suspended now (``spec.suspend``), and whether Kueue manages it
    suspended: bool = False
    kueue: bool = False
    #: the Workload is admitted now (None when there is no Workload)
    admitted_now: bool | None = None
    #: some pod is not finished in its latest sighting
    live_pods: bool = False
    #: the latest time any object mentions (the default "now" for a dump)
    latest: float | None = None
    #: each pod's rank, by pod name (``workloads.ranks``); PyTorchJobs with a master
    ranks: dict[str, int | None] = field(default_factory=dict)
    with_master: frozenset[str] = frozenset()
    #: dispatch made the workload: no re-run inside it is planned (it starts attempts itself)
    dispatch_managed: bool = False
    #: the evidence is a dump (no observation times): say "in the dump", not "ever"
    from_dump: bool = False
    #: objects that prove pods existed though none is in the evidence (Job counts, restarts)
    ran_proofs: list[Fact] = field(default_factory=list)
    #: re-runs a workload's spec asks for, by ``Kind/name`` (``JobSet/x``: its maxRestarts)
    plans: dict[str, str] = field(default_factory=dict)

    def is_root(self, fact: Fact) -> bool:
        """The fact is proved by the workload judged itself (not by its JobSet or Jobs)."""
        prefix = f"{self.workload_kind}/{self.workload}#"
        return any(p.key.startswith(prefix) for p in fact.proofs)

    def rank_of(self, pod: str) -> int | None:
        """A pod's rank: from its labels when it was seen, else from its name."""
        if pod in self.ranks:
            return self.ranks[pod]
        return rank_from_pod_name(pod, self.with_master)

    def first_start(self) -> float | None:
        times = [f.at for f in self.starts if f.at is not None]
        return min(times) if times else None

    def saw(self, at: float | None) -> None:
        if at is not None and (self.latest is None or at > self.latest):
            self.latest = at


# --- reading helpers -------------------------------------------------------------------------


def sighting_time(sighting: Sighting) -> float | None:
    """When a sighting's state held: observation time, else its newest condition, else creation."""
    if sighting.at is not None:
        return sighting.at
    return latest_condition_time(sighting.obj) or created(sighting.obj)


def proof(
    ref: Ref, obj: Any, field_path: str, value: Any, at: float | None, summary: str
) -> Evidence:
    """One proving excerpt: which object, which field, the value found, and when."""
    uid = dig(obj, "metadata", "uid")
    return Evidence(
        kind=ref.kind.lower(),
        key=f"{ref.kind}/{ref.name}#{field_path}",
        observed_at=at if at is not None else 0.0,
        summary=summary,
        data={
            "object": {**ref.to_json(), "uid": uid if isinstance(uid, str) else None},
            "field": field_path,
            "value": _plain(value),
            "at": format_time(at),
        },
    )


def _plain(value: Any, depth: int = 0) -> Any:
    """A JSON-compatible copy, bounded in depth (values come from untrusted objects)."""
    if depth > 6:
        return None
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in list(value.items())[:40]}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in list(value)[:40]]
    if value is None or isinstance(value, bool | int | float):
        return value
    return str(value)[:2000]


def add_once(bucket: list[Fact], fact: Fact) -> None:
    """Add unless the same fact (same proof, same time) is there already (seen twice)."""
    key = fact.proofs[0].key if fact.proofs else ""
    for other in bucket:
        if other.at == fact.at and (other.proofs[0].key if other.proofs else "") == key:
            return
    bucket.append(fact)


def where(rank: int | None, pod: str | None) -> str:
    """``rank 1 (pod x)``, ``pod x`` or ``a rank``, for summaries."""
    if pod and rank is not None:
        return f"rank {rank} (pod {pod})"
    if pod:
        return f"pod {pod}"
    return f"rank {rank}" if rank is not None else "a rank"


def one_line(text: str, limit: int = 300) -> str:
    """A message on one line, shortened."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."

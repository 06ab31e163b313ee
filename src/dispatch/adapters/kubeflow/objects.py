"""Reading a raw Trainer runtime object (a dict as the API or a YAML file gives it), safely.

Nothing here raises on a malformed object: a missing or wrongly typed field reads as absent
(``dig`` returns None), and the places that matter to a rule say what they found instead.
Typed models are not used on purpose: they drop unknown fields and reject shapes the rules
must describe rather than crash on.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the label on a replicated job's *Job* template naming its role (Trainer's ancestor label)
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_STEP = "trainer"
#: the container Trainer applies image, command, args and env to
NODE_CONTAINER = "node"

_SHOW = reprlib.Repr()
_SHOW.maxlevel = 3
_SHOW.maxstring = 60
_SHOW.maxother = 60
_SHOW.maxdict = 4
_SHOW.maxlist = 4


def show(value: Any) -> str:
    """A short, safe repr for messages (bounded in depth and length, never raises)."""
    try:
        return _SHOW.repr(value)
    except (RecursionError, ValueError, TypeError):
        return f"<{type(value).__name__}>"


def dig(value: Any, *keys: str) -> Any:
    """``value[k1][k2]…`` through mappings, or None when any step is missing or not a mapping."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def as_list(value: Any) -> list[Any] | None:
    """The value as a list when it is a sequence (not a string), else None."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return None


def is_int(value: Any) -> bool:
    """True for a whole number as YAML/JSON gives it (a bool is not a number here)."""
    return isinstance(value, int) and not isinstance(value, bool)


def names_of(items: Any) -> list[str]:
    """The ``name`` of each mapping in a list (containers, init containers), skipping others."""
    return [
        item["name"]
        for item in as_list(items) or []
        if isinstance(item, Mapping) and isinstance(item.get("name"), str)
    ]


@dataclass(frozen=True, slots=True)
class ReplicatedJob:
    """One entry of ``spec.template.spec.replicatedJobs``, as much as could be read of it."""

    index: int
    #: the job's name, or ``replicatedJobs[i]`` when it has none
    name: str
    #: the ancestor step label's value, or None
    step: str | None
    #: the raw entry (a mapping, or whatever was there)
    raw: Any

    @property
    def is_trainer(self) -> bool:
        return self.step == TRAINER_STEP

    @property
    def job_spec(self) -> Any:
        """``template.spec`` (a batch JobSpec), or None."""
        return dig(self.raw, "template", "spec")

    @property
    def pod_spec(self) -> Any:
        """``template.spec.template.spec`` (the PodSpec), or None."""
        return dig(self.raw, "template", "spec", "template", "spec")

    @property
    def replicas(self) -> int:
        """How many Jobs JobSet makes of it: Trainer forces 1 for ancestor jobs, else the field."""
        if self.step is not None:
            return 1
        value = dig(self.raw, "replicas")
        return value if is_int(value) and value >= 1 else 1

    @property
    def completions(self) -> int:
        """Pods per Job for a non-trainer job (the trainer job's count is the node count)."""
        for key in ("completions", "parallelism"):
            value = dig(self.job_spec, key)
            if is_int(value) and value >= 1:
                return int(value)
        return 1


def replicated_jobs(runtime: Any) -> list[ReplicatedJob] | None:
    """The runtime's replicated jobs, or None when ``replicatedJobs`` is absent or not a list."""
    items = as_list(dig(runtime, "spec", "template", "spec", "replicatedJobs"))
    if items is None:
        return None
    jobs: list[ReplicatedJob] = []
    for index, item in enumerate(items):
        name = dig(item, "name")
        step = dig(item, "template", "metadata", "labels", ANCESTOR_LABEL)
        jobs.append(
            ReplicatedJob(
                index=index,
                name=name if isinstance(name, str) and name else f"replicatedJobs[{index}]",
                step=step if isinstance(step, str) else None,
                raw=item,
            )
        )
    return jobs


def runtime_identity(runtime: Any) -> tuple[str, str]:
    """(kind, name) of a raw runtime object; empty strings for what it does not state."""
    kind = dig(runtime, "kind")
    name = dig(runtime, "metadata", "name")
    return (kind if isinstance(kind, str) else "", name if isinstance(name, str) else "")


def ml_policies(runtime: Any) -> list[str] | None:
    """The policies ``mlPolicy`` names besides ``numNodes`` (keys with a non-null value).

    None when ``mlPolicy`` is present but not a mapping. A key set to null is absent, as it is
    for Trainer's Go types.
    """
    policy = dig(runtime, "spec", "mlPolicy")
    if policy is None:
        return []
    if not isinstance(policy, Mapping):
        return None
    return [str(k) for k, v in policy.items() if k != "numNodes" and v is not None]

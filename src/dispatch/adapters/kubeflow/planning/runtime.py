"""A raw Trainer runtime read as far as it can be: its replicated jobs, its policies, its name.

Nothing here raises on a malformed runtime: a missing or wrongly typed field reads as absent,
and the rules (``rules``) say what they found instead. Typed models are not used on purpose:
they drop unknown fields and reject shapes the rules must describe rather than crash on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.adapters.kubeflow.objects import as_list, dig, is_int

#: the label on a replicated job's *Job* template naming its role (Trainer's ancestor label)
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_STEP = "trainer"
#: the container Trainer applies image, command, args and env to
NODE_CONTAINER = "node"


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


def env_injection_targets(env_injection: Any) -> list[tuple[str, str]]:
    """(replicated job, container) pairs of ``mlPolicy.torch.envInjection.targets``."""
    pairs = []
    for target in as_list(dig(env_injection, "targets")) or []:
        job = dig(target, "jobName")
        for container in as_list(dig(target, "containerNames")) or []:
            pairs.append((str(job), str(container)))
    return pairs

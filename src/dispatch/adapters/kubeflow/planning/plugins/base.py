"""The plugin contract: the shared build :class:`Context` and the :class:`Plugin` phases."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.podspec import (
    JsonObj,
    ancestor,
    node_container,
    owner_reference,
)
from dispatch.adapters.kubeflow.planning.runtime import TRAINER_STEP


class UnsupportedRuntime(ValueError):
    """The runtime uses a Trainer feature this rendering does not reproduce."""


class BuildRefused(ValueError):
    """Trainer itself refuses to build this JobSet (its own error message)."""


@dataclass
class Context:
    """One build: the inputs, and the replicated jobs and counts the plugins change."""

    trainjob: Mapping[str, Any]
    runtime: Mapping[str, Any]
    #: the runtime's JobSet spec with every runtimePatch merged in (changed in place)
    spec: JsonObj
    #: pods per Job of each replicated job, in ``spec.replicatedJobs`` order
    counts: list[int]
    #: the JobSet, once built (for ``objects``)
    jobset: JsonObj | None = None
    #: pod-template labels every replicated job gets (``pod_group``)
    pod_labels: dict[str, str] = field(default_factory=dict)
    #: pod-template annotations every replicated job gets (``pod_group``)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    #: each replicated job's pod host names, by job name (:meth:`identify_pod_network`)
    endpoints: dict[str, list[str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(dig(self.trainjob, "metadata", "name") or "")

    @property
    def namespace(self) -> str | None:
        found = dig(self.trainjob, "metadata", "namespace")
        return str(found) if found else None

    @property
    def ml_policy(self) -> Mapping[str, Any] | None:
        found = dig(self.runtime, "spec", "mlPolicy")
        return found if isinstance(found, Mapping) else None

    @property
    def trainer(self) -> Mapping[str, Any] | None:
        """The TrainJob's ``spec.trainer``."""
        found = dig(self.trainjob, "spec", "trainer")
        return found if isinstance(found, Mapping) else None

    @property
    def rjobs(self) -> list[JsonObj]:
        """The replicated jobs (none once the built JobSet has dropped an empty list)."""
        found = self.spec.get("replicatedJobs")
        return found if isinstance(found, list) else []

    def trainer_node(self) -> tuple[int, JsonObj] | None:
        """(index, container ``node``) of the trainer job, when the TrainJob has a
        ``trainer`` and the runtime such a job and container (where JAX and XGBoost act)."""
        at = self.trainer_index
        if at is None or self.trainer is None:
            return None
        node = node_container(self.rjobs[at])
        return None if node is None else (at, node)

    def rjob(self, name: str) -> JsonObj | None:
        return next((rj for rj in self.rjobs if rj.get("name") == name), None)

    @property
    def trainer_index(self) -> int | None:
        """Index of the replicated job with the ``trainer`` ancestor label."""
        return next((i for i, rj in enumerate(self.rjobs) if ancestor(rj) == TRAINER_STEP), None)

    def identify_pod_network(self) -> None:
        """Trainer's JobSet ``IdentifyPodNetwork``: ``<trainjob>-<job>-<replica>-<pod>.<subdomain>``
        for every replica and pod (subdomain: ``network.subdomain``, else the TrainJob's name).
        Run once the counts are final and before the JobSet builder forces ancestor jobs to
        one replica, as Trainer does."""
        subdomain = dig(self.spec, "network", "subdomain") or self.name
        for rjob, count in zip(self.rjobs, self.counts, strict=True):
            job = rjob.get("name")
            replicas = int(rjob.get("replicas") or 1)
            self.endpoints[str(job)] = [
                f"{self.name}-{job}-{r}-{p}.{subdomain}"
                for r in range(replicas)
                for p in range(count)
            ]

    def owned(self, obj: JsonObj) -> JsonObj:
        """``obj`` in the TrainJob's namespace, owned (as controller) by the TrainJob."""
        meta = obj.setdefault("metadata", {})
        if self.namespace:
            meta.setdefault("namespace", self.namespace)
        meta["ownerReferences"] = [owner_reference(self.trainjob)]
        return obj


class Plugin:
    """A plugin's phases; each does nothing unless the plugin overrides it."""

    name = ""

    def applies(self, ctx: Context) -> bool:
        return False

    def ml_policy(self, ctx: Context) -> None:
        return None

    def pod_group(self, ctx: Context) -> None:
        return None

    def objects(self, ctx: Context) -> list[JsonObj]:
        return []

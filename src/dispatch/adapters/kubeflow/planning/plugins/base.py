"""The plugin contract: the shared build :class:`Context` and the :class:`Plugin` phases."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.podspec import JsonObj, ancestor, owner_reference
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
        found: list[JsonObj] = self.spec["replicatedJobs"]
        return found

    def rjob(self, name: str) -> JsonObj | None:
        return next((rj for rj in self.rjobs if rj.get("name") == name), None)

    @property
    def trainer_index(self) -> int | None:
        """Index of the replicated job with the ``trainer`` ancestor label."""
        return next((i for i, rj in enumerate(self.rjobs) if ancestor(rj) == TRAINER_STEP), None)

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

"""Controllers that make the emulated cluster behave like one with Kubeflow Trainer v2.3,
JobSet, the Job controller, kube-scheduler, kubelets and (optionally) Kueue.

``standard_controllers(scenario, kueue)`` returns them ready for ``ClusterConfig.controllers``::

    config = ClusterConfig(time_scale=100, controllers=standard_controllers(Scenario(...)))
"""

from __future__ import annotations

from dispatch.testing.k8s.controllers.base import Reconciler
from dispatch.testing.k8s.controllers.gangs import PodGroupController
from dispatch.testing.k8s.controllers.job import JobController
from dispatch.testing.k8s.controllers.jobset import JobSetController
from dispatch.testing.k8s.controllers.kubelet import Kubelet
from dispatch.testing.k8s.controllers.kueue import Kueue
from dispatch.testing.k8s.controllers.kueue_queues import ClusterQueue, KueueConfig
from dispatch.testing.k8s.controllers.nodes import NodeLifecycle
from dispatch.testing.k8s.controllers.scheduler import Scheduler
from dispatch.testing.k8s.controllers.trainer import TrainerController
from dispatch.testing.k8s.scenario import Scenario

__all__ = [
    "ClusterQueue",
    "JobController",
    "JobSetController",
    "Kubelet",
    "Kueue",
    "KueueConfig",
    "NodeLifecycle",
    "PodGroupController",
    "Reconciler",
    "Scheduler",
    "TrainerController",
    "standard_controllers",
]


def standard_controllers(
    scenario: Scenario | None = None, kueue: KueueConfig | None = None
) -> list[object]:
    """Every controller, Kueue first (its webhook mutates before Trainer's validates)."""
    scenario = scenario or Scenario()
    scheduler = Scheduler()
    out: list[object] = [Kueue(kueue)] if kueue is not None else []
    out += [
        TrainerController(),
        JobSetController(),
        JobController(),
        scheduler,
        PodGroupController(),
        Kubelet(scenario),
        NodeLifecycle(scenario, scheduler),
    ]
    return out

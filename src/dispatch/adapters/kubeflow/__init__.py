"""Kubeflow Trainer v2: runtime rules, TrainJob building, evidence and causes.

``KubeflowAdapter`` is imported on first use (``dispatch.adapters.registry`` asks for it only
when a kubeflow cluster is used), so the pure modules (rules, planning) and ``dispatch --help``
never load the Kubernetes client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dispatch.adapters.kubeflow.adapter import KubeflowAdapter

__all__ = ["KubeflowAdapter"]


def __getattr__(name: str) -> Any:
    if name == "KubeflowAdapter":
        from dispatch.adapters.kubeflow.adapter import KubeflowAdapter

        return KubeflowAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

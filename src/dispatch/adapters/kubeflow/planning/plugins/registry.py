"""Every plugin, in the order the renderer runs their phases."""

from __future__ import annotations

from dispatch.adapters.kubeflow.planning.plugins.base import Plugin
from dispatch.adapters.kubeflow.planning.plugins.coscheduling import Coscheduling
from dispatch.adapters.kubeflow.planning.plugins.jax import Jax
from dispatch.adapters.kubeflow.planning.plugins.mpi import MPI
from dispatch.adapters.kubeflow.planning.plugins.volcano import Volcano
from dispatch.adapters.kubeflow.planning.plugins.xgboost import XGBoost

PLUGINS: tuple[Plugin, ...] = (Coscheduling(), Volcano(), Jax(), MPI(), XGBoost())

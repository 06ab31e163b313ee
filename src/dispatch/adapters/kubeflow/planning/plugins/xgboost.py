"""The XGBoost plugin (``plugins/xgboost``): XGBoost's collective (Rabit) from the environment.

Follows Trainer v2.3.0 ``xgboost.go``:

* ``Validate``: a TrainJob whose ``trainer.env`` sets ``DMLC_TRACKER_URI``,
  ``DMLC_TRACKER_PORT``, ``DMLC_TASK_ID`` or ``DMLC_NUM_WORKER`` is refused (Trainer's webhook
  does it at admission; here the build is refused with the webhook's message).
* ``EnforceMLPolicy``: the TrainJob's ``numNodes`` sets the trainer's node count (the
  renderer's pod counts already do); when the TrainJob has a ``trainer`` and the trainer job a
  ``node`` container, that container gets ``DMLC_TRACKER_URI`` (the rank-0 host, which runs
  the tracker), ``DMLC_TRACKER_PORT`` (29500), ``DMLC_TASK_ID`` (the completion index),
  ``DMLC_NUM_WORKER`` (nodes x workers per node: the GPUs per node, or 1 without GPUs) and
  port 29500. PlainML also runs for XGBoost: the TrainJob's ``env`` is already in place.
"""

from __future__ import annotations

from dispatch.adapters.kubeflow.planning.plugins.base import BuildRefused, Context, Plugin
from dispatch.adapters.kubeflow.planning.plugins.distributed import (
    TRAINER_PORT,
    gpus_per_node,
    open_trainer_port,
    rank0_host,
    rank_env,
    resources_per_node,
)
from dispatch.adapters.kubeflow.planning.plugins.fielderrors import aggregate, forbidden
from dispatch.adapters.kubeflow.planning.podspec import (
    JsonObj,
    upsert_container_env,
)

TRACKER_URI = "DMLC_TRACKER_URI"
TRACKER_PORT = "DMLC_TRACKER_PORT"
TASK_ID = "DMLC_TASK_ID"
NUM_WORKER = "DMLC_NUM_WORKER"
#: what a TrainJob on an XGBoost runtime must not set itself
RESERVED_ENV = frozenset({TRACKER_URI, TRACKER_PORT, TASK_ID, NUM_WORKER})


def xgboost_env(trainjob: str, workers: int) -> list[JsonObj]:
    """The variables XGBoost's collective reads, in Trainer's order."""
    return [
        {"name": TRACKER_URI, "value": rank0_host(trainjob)},
        {"name": TRACKER_PORT, "value": str(TRAINER_PORT)},
        rank_env(TASK_ID),
        {"name": NUM_WORKER, "value": str(workers)},
    ]


def reserved_env_errors(ctx: Context) -> list[str]:
    """``Validate``: one error per reserved variable in ``trainer.env``, by index."""
    env = (ctx.trainer or {}).get("env") or []
    return [
        forbidden(
            f"spec.trainer.env[{i}]", f"{var.get('name')} is reserved for the XGBoost runtime"
        )
        for i, var in enumerate(env)
        if isinstance(var, dict) and var.get("name") in RESERVED_ENV
    ]


class XGBoost(Plugin):
    name = "XGBoost"

    def applies(self, ctx: Context) -> bool:
        return ctx.ml_policy is not None and ctx.ml_policy.get("xgboost") is not None

    def ml_policy(self, ctx: Context) -> None:
        errors = reserved_env_errors(ctx)
        if errors:
            raise BuildRefused(aggregate(errors))
        found = ctx.trainer_node()
        if found is None:
            return
        at, node = found
        workers_per_node = gpus_per_node(resources_per_node(ctx)) or 1
        upsert_container_env(node, xgboost_env(ctx.name, ctx.counts[at] * workers_per_node))
        open_trainer_port(node)

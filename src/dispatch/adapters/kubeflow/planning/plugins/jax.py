"""The JAX plugin (``plugins/jax``): ``jax.distributed.initialize`` from the environment.

Follows Trainer v2.3.0 ``jax.go`` ``EnforceMLPolicy``: the TrainJob's ``numNodes`` sets the
trainer's node count (the renderer's pod counts already do); when the TrainJob has a
``trainer`` and the trainer job has a ``node`` container, that container gets
``JAX_NUM_PROCESSES`` (the node count: one process per host), ``JAX_PROCESS_ID`` (the pod's
completion index), ``JAX_COORDINATOR_ADDRESS`` (``<rank-0 host>:29500``) and port 29500. The
TrainJob's own ``env`` comes after these (the JobSet builder adds it, PlainML does not run for
JAX), so a variable the user sets wins. No validation.
"""

from __future__ import annotations

from dispatch.adapters.kubeflow.planning.plugins.base import Context, Plugin
from dispatch.adapters.kubeflow.planning.plugins.distributed import (
    TRAINER_PORT,
    open_trainer_port,
    rank0_host,
    rank_env,
)
from dispatch.adapters.kubeflow.planning.podspec import (
    JsonObj,
    upsert_container_env,
)


def jax_env(trainjob: str, nodes: int) -> list[JsonObj]:
    """The variables JAX reads, in Trainer's order."""
    return [
        {"name": "JAX_NUM_PROCESSES", "value": str(nodes)},
        rank_env("JAX_PROCESS_ID"),
        {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{rank0_host(trainjob)}:{TRAINER_PORT}"},
    ]


class Jax(Plugin):
    name = "JAX"

    def applies(self, ctx: Context) -> bool:
        return ctx.ml_policy is not None and ctx.ml_policy.get("jax") is not None

    def ml_policy(self, ctx: Context) -> None:
        found = ctx.trainer_node()
        if found is None:
            return
        at, node = found
        upsert_container_env(node, jax_env(ctx.name, ctx.counts[at]))
        open_trainer_port(node)

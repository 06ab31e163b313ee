"""The Volcano plugin (``plugins/volcano``): Volcano's gang scheduling (not rendered yet)."""

from __future__ import annotations

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.plugins.base import (
    Context,
    Plugin,
    UnsupportedRuntime,
)


class Volcano(Plugin):
    name = "Volcano"

    def applies(self, ctx: Context) -> bool:
        return dig(ctx.runtime, "spec", "podGroupPolicy", "volcano") is not None

    def pod_group(self, ctx: Context) -> None:
        raise UnsupportedRuntime("podGroupPolicy.volcano is not rendered")

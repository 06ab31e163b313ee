"""Adapters by name, imported lazily so that a missing optional client costs nothing."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from dispatch.adapters.base import Adapter, AdapterContext
from dispatch.config import ClusterConfig
from dispatch.model import ConfigError

#: adapter name -> "module:factory"; the factory is called as factory(cluster, context)
ADAPTERS: dict[str, str] = {
    "local": "dispatch.adapters.local:LocalAdapter",
    "memory": "dispatch.adapters.memory:MemoryAdapter",
    "kubeflow": "dispatch.adapters.kubeflow:KubeflowAdapter",
    "slurm": "dispatch.adapters.slurm:SlurmAdapter",
}

#: the extra that installs each adapter's client libraries, for error messages
EXTRAS: dict[str, str] = {"kubeflow": "dispatch-train[kubeflow]"}

AdapterFactory = Callable[[ClusterConfig, AdapterContext], Adapter]


def known() -> list[str]:
    return sorted(ADAPTERS)


def factory(name: str) -> AdapterFactory:
    """The factory registered under ``name``. Raises ``ConfigError`` naming the fix."""
    try:
        target = ADAPTERS[name]
    except KeyError:
        raise ConfigError(
            f"unknown adapter {name!r}; known adapters: {', '.join(known())}"
        ) from None
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(f"the {name!r} adapter is not available in this version") from None
        extra = EXTRAS.get(name)
        hint = f"; install it with: pip install '{extra}'" if extra else ""
        raise ConfigError(
            f"the {name!r} adapter needs the package {exc.name!r}, which is not installed{hint}"
        ) from None
    try:
        return cast(AdapterFactory, getattr(module, attribute))
    except AttributeError:
        raise ConfigError(f"the {name!r} adapter is not available in this version") from None


def open_adapter(cluster: ClusterConfig, context: AdapterContext) -> Adapter:
    """An adapter bound to ``cluster``."""
    return factory(cluster.adapter)(cluster, context)

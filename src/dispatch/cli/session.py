"""The API client the verbs use, built from the global options."""

from __future__ import annotations

from dispatch.api import AsyncClient, Environment
from dispatch.cli.common import Settings


def client(settings: Settings, *, background: bool = True) -> AsyncClient:
    """An ``AsyncClient`` for the configuration named by ``--config`` (or the defaults)."""
    return AsyncClient(Environment.load(config_path=settings.config_path), background=background)

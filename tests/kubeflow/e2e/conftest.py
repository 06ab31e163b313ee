"""Fixtures for end-to-end tests of the Kubeflow adapter and the supervisor on the emulator."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("kubernetes_asyncio")

from .harness import World, kueue


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path, kueue_config=kueue())
    try:
        yield made
    finally:
        made.close()

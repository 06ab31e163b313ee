from __future__ import annotations

import pytest

from tests.supervise.world import World


@pytest.fixture
def world() -> World:
    return World()

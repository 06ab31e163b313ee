"""Helpers for training code running inside a dispatch job: who am I, where do my checkpoints go.

These modules import only the standard library and ``dispatch.model``, so they work in any
job image that has dispatch installed, with no scheduler client.
"""

from dispatch.injob.checkpoint import (
    Checkpoint,
    CheckpointExists,
    CheckpointFence,
    FencedWrite,
    checkpoints,
)
from dispatch.injob.identity import Identity, identity

__all__ = [
    "Checkpoint",
    "CheckpointExists",
    "CheckpointFence",
    "FencedWrite",
    "Identity",
    "checkpoints",
    "identity",
]

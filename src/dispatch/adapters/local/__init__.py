"""The embedded local scheduler: a job's nodes as process groups on this machine.

``LocalAdapter`` is imported lazily: the attempt runner (``python -m
dispatch.adapters.local.runner``) imports this package too and must not pay for the model.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the runner starts faster
if TYPE_CHECKING:
    from typing import Any

    from dispatch.adapters.local.adapter import LocalAdapter

__all__ = ["LocalAdapter"]


def __getattr__(name: str) -> Any:
    if name == "LocalAdapter":
        from dispatch.adapters.local.adapter import LocalAdapter

        return LocalAdapter
    raise AttributeError(name)

"""Object metadata helpers: timestamps, uids and generated names, all from injected sources."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any

JsonObj = dict[str, Any]

# The alphabet of k8s.io/apimachinery/pkg/util/rand (no vowels, no confusable characters).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MAX_GENERATED_BASE = 58  # generateName is cut so that base + 5 characters fit in 63


def rfc3339(seconds: float) -> str:
    """``2024-01-02T03:04:05Z``: second precision, UTC, as ``metav1.Time`` marshals."""
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(seconds: float) -> str:
    """``metav1.MicroTime`` (events.k8s.io ``eventTime``)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Identity:
    """uids and generated-name suffixes from one seeded random source (deterministic)."""

    def __init__(self, seed: int | None = 0) -> None:
        self._rng = random.Random(seed)

    def uid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def suffix(self, length: int = 5) -> str:
        return "".join(self._rng.choice(_NAME_ALPHABET) for _ in range(length))

    def generated_name(self, base: str) -> str:
        return base[:MAX_GENERATED_BASE] + self.suffix()


def meta(obj: JsonObj) -> JsonObj:
    """``obj["metadata"]``, created if missing."""
    m = obj.get("metadata")
    if not isinstance(m, dict):
        m = {}
        obj["metadata"] = m
    return m


def body_of(obj: JsonObj) -> JsonObj:
    """Everything but metadata and status: what ``generation`` tracks."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def owner_uids(obj: JsonObj) -> list[str]:
    return [str(r.get("uid")) for r in obj["metadata"].get("ownerReferences") or []]

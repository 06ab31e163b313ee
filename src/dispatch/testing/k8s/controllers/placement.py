"""What a pod asks of a node, in the scheduler's units (cpu in millicores, the rest as numbers).

Shared by the scheduler (:mod:`.scheduler`), gang placement (:mod:`.gang_scheduling`) and
Kueue's quota accounting.
"""

from __future__ import annotations

from typing import Any

from dispatch.model.units import quantity_value

JsonObj = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


def milli(value: Any, resource: str) -> int:
    if resource == "cpu":
        text = str(value)
        return int(float(text[:-1])) if text.endswith("m") else int(float(text) * 1000)
    return quantity_value(value)


def pod_requests(pod: JsonObj) -> dict[str, int]:
    out = dict.fromkeys(RESOURCES, 0)
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for r in RESOURCES:
            if r in asked:
                out[r] += milli(asked[r], r)
    return out


def take(used: dict[str, dict[str, int]], node: str, wanted: dict[str, int]) -> None:
    """Count one more pod asking ``wanted`` on ``node``."""
    row = used.setdefault(node, dict.fromkeys((*RESOURCES, "pods"), 0))
    for r, v in wanted.items():
        row[r] += v
    row["pods"] += 1

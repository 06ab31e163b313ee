"""What a pod asks of a node, in the scheduler's units (cpu in millicores, the rest as numbers),
and what the bound pods take of each node (:class:`NodeUsage`).

Shared by the scheduler (:mod:`.scheduler`), gang placement (:mod:`.gang_scheduling`) and
Kueue's quota accounting.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dispatch.model.units import quantity_value

if TYPE_CHECKING:
    from dispatch.testing.k8s.resources import ResourceType
    from dispatch.testing.k8s.store import Store
    from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
Usage = dict[str, dict[str, int]]
PODS = ("", "pods")
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


class NodeUsage:
    """Per node: what its bound, unfinished pods request and how many there are, kept from
    the store's changes so that a scheduling decision costs O(nodes), not O(pods).

    A pod counts while it is stored, has ``spec.nodeName`` and its phase is not terminal; a
    change to it (binding, phase, deletion) replaces what it counted before. The answer is
    the one a pass over every stored pod gives.
    """

    def __init__(self, store: Store, pod_type: ResourceType) -> None:
        self.store = store
        self._pods: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}
        self._used: Usage = {}
        for pod in store.objects(pod_type):
            self._count(pod)
        store.on_change(self._on_change)

    def usage(self) -> Usage:
        """A copy the caller may change (gang placement counts its trial bindings in it)."""
        return {node: dict(row) for node, row in self._used.items()}

    def _on_change(self, change: Change) -> None:
        if change.rtype.storage != PODS:
            return
        self._forget((change.namespace, change.name))
        if change.type != "DELETED":
            self._count(change.obj)

    def _count(self, pod: JsonObj) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINAL:
            return
        m = pod["metadata"]
        wanted = pod_requests(pod)
        self._pods[(m.get("namespace", ""), m["name"])] = (node, wanted)
        take(self._used, node, wanted)

    def _forget(self, key: tuple[str, str]) -> None:
        held = self._pods.pop(key, None)
        if held is None:
            return
        node, wanted = held
        row = self._used[node]
        row["pods"] -= 1
        if row["pods"] == 0:
            del self._used[node]
            return
        for r, v in wanted.items():
            row[r] -= v

"""PodDisruptionBudget status, as kube-controller-manager's disruption controller writes it
(pkg/controller/disruption/disruption.go), which the Eviction API then reads.

:func:`budget_status` is the pure computation; :class:`DisruptionController` runs it whenever a
budget or a pod of its namespace changes. The controller is part of every emulated cluster
(:class:`~dispatch.testing.k8s.cluster.Cluster` starts it), as it is part of every real one.

What a budget counts (``getExpectedPodCount`` and ``countHealthyPods``):

* its pods: those of its namespace its selector matches (policy/v1: an empty selector matches
  every pod, a missing one none);
* ``expectedPods``: the number of pods for an integer ``minAvailable``; otherwise the sum of
  the ``spec.replicas`` of the pods' controllers (Deployment, ReplicaSet, StatefulSet,
  ReplicationController). Pods without a controller are left out of that sum; a controller
  without a scale (a Job, a JobSet) fails the sync;
* ``desiredHealthy``: ``minAvailable`` (a percentage of ``expectedPods``, rounded up), or
  ``expectedPods`` minus ``maxUnavailable`` (likewise);
* ``currentHealthy``: pods that are Ready, not being deleted and not in ``disruptedPods`` (the
  pods the Eviction API has just let go; an entry is dropped once its pod is being deleted or
  after two minutes);
* ``disruptionsAllowed``: ``currentHealthy - desiredHealthy``, never negative, and 0 while
  ``expectedPods`` is 0; the ``DisruptionAllowed`` condition says whether it is above 0
  (``SufficientPods``/``InsufficientPods``), or is False with ``SyncFailed`` and the error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from dispatch.testing.k8s.controllers.base import (
    Key,
    Reconciler,
    kube_controller,
    set_condition,
    write_status,
)
from dispatch.testing.k8s.meta import parse_rfc3339
from dispatch.testing.k8s.selectors import LabelSelector
from dispatch.testing.k8s.watch import Change

JsonObj = dict[str, Any]
PDB = ("policy/v1", "PodDisruptionBudget")
#: how long a pod the Eviction API let go stays out of ``currentHealthy`` (``DeletionTimeout``)
DELETION_TIMEOUT = 120.0
#: the controllers whose ``spec.replicas`` the disruption controller reads as a scale
SCALED_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController")
ALLOWED = "DisruptionAllowed"
#: a controller's uid -> its ``spec.replicas``, or the name of its resource (``jobs.batch``)
#: when it has no scale
Scales = Mapping[str, int | str]


class SyncFailed(Exception):
    """The budget cannot be computed (the controller's ``failSafe``)."""


def selects(pdb: JsonObj, pod: JsonObj) -> bool:
    """Whether the disruption controller counts ``pod`` in ``pdb`` (policy/v1 selectors)."""
    spec = pdb.get("spec") or {}
    if spec.get("selector") is None:
        return False
    if pod["metadata"].get("namespace") != pdb["metadata"].get("namespace"):
        return False
    return LabelSelector.from_dict(spec["selector"]).matches(pod["metadata"].get("labels"))


def is_ready(pod: JsonObj) -> bool:
    """``podutil.IsPodReady``: the pod's ``Ready`` condition is True."""
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _scaled(value: Any, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent`` rounding up."""
    if isinstance(value, int):
        return value
    text = str(value)
    if not text.endswith("%") or not text[:-1].isdigit():
        raise SyncFailed(f"invalid value for IntOrString: invalid value {text!r}")
    return math.ceil(int(text[:-1]) * total / 100)


def expected_scale(pods: Iterable[JsonObj], scales: Scales) -> int:
    """The sum of the scales of the pods' controllers (``getExpectedScale``)."""
    found: dict[str, int] = {}
    for pod in pods:
        ref = next(
            (r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")),
            None,
        )
        if ref is None or ref.get("uid") in found:
            continue  # an unmanaged pod is not counted
        uid = str(ref.get("uid"))
        if uid not in scales:
            raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        scale = scales[uid]
        if isinstance(scale, str):
            raise SyncFailed(f"{scale} does not implement the scale subresource")
        found[uid] = scale
    return sum(found.values())


def budget_status(
    pdb: JsonObj,
    pods: list[JsonObj],
    now: float,
    scales: Scales,
) -> tuple[JsonObj, float | None]:
    """The status the disruption controller writes for ``pdb`` over its selected ``pods``,
    and the emulated time at which to look again (a ``disruptedPods`` entry expiring)."""
    spec = pdb.get("spec") or {}
    old = pdb.get("status") or {}
    conditions = [dict(c) for c in old.get("conditions") or []]
    try:
        expected, desired = _expected_and_desired(spec, pods, scales)
    except SyncFailed as exc:
        set_condition(conditions, ALLOWED, "False", "SyncFailed", str(exc), now)
        return {**old, "disruptionsAllowed": 0, "conditions": conditions}, None
    disrupted, recheck = _disrupted(old.get("disruptedPods") or {}, pods, now)
    healthy = sum(
        1
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and p["metadata"]["name"] not in disrupted
        and is_ready(p)
    )
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    status: JsonObj = {"observedGeneration": pdb["metadata"].get("generation", 1)}
    if disrupted:
        status["disruptedPods"] = disrupted
    status.update(
        disruptionsAllowed=allowed,
        currentHealthy=healthy,
        desiredHealthy=desired,
        expectedPods=expected,
        conditions=conditions,
    )
    allowed_condition(status, now)
    return status, recheck


def allowed_condition(status: JsonObj, now: float) -> None:
    """``UpdateDisruptionAllowedCondition``: the condition from ``disruptionsAllowed``."""
    conditions = status.setdefault("conditions", [])
    if status.get("disruptionsAllowed", 0) > 0:
        set_condition(conditions, ALLOWED, "True", "SufficientPods", "", now)
    else:
        set_condition(conditions, ALLOWED, "False", "InsufficientPods", "", now)


def _expected_and_desired(spec: JsonObj, pods: list[JsonObj], scales: Scales) -> tuple[int, int]:
    if spec.get("maxUnavailable") is not None:
        expected = expected_scale(pods, scales)
        return expected, max(0, expected - _scaled(spec["maxUnavailable"], expected))
    minimum = spec.get("minAvailable")
    if isinstance(minimum, int):
        return len(pods), minimum
    if minimum is not None:
        expected = expected_scale(pods, scales)
        return expected, _scaled(minimum, expected)
    return 0, 0


def _disrupted(
    entries: Mapping[str, str], pods: list[JsonObj], now: float
) -> tuple[dict[str, str], float | None]:
    """``buildDisruptedPodMap``: the entries still pending, and when the first one expires."""
    kept: dict[str, str] = {}
    recheck: float | None = None
    for pod in pods:
        name = pod["metadata"]["name"]
        if pod["metadata"].get("deletionTimestamp") or name not in entries:
            continue
        expires = parse_rfc3339(entries[name]) + DELETION_TIMEOUT
        if expires < now:
            continue
        kept[name] = entries[name]
        recheck = expires if recheck is None else min(recheck, expires)
    return kept, recheck


class DisruptionController(Reconciler):
    """Keeps every PodDisruptionBudget's status current (see the module docstring)."""

    name = "disruption"
    user = kube_controller("disruption")
    watches = (PDB, ("v1", "Pod"))

    def keys(self, change: Change) -> Iterable[Key]:
        if change.rtype.kind == PDB[1]:
            return [(change.namespace, change.name)]
        budgets = self.cluster.store.objects(self.rtype(*PDB))
        return [
            (change.namespace, b["metadata"]["name"])
            for b in budgets
            if b["metadata"].get("namespace") == change.namespace
            and any(selects(b, p) for p in (change.obj, change.old) if p is not None)
        ]

    def reconcile(self, key: Key) -> float | None:
        pdb = self.find(*PDB, key[0], key[1])
        if pdb is None or pdb["metadata"].get("deletionTimestamp"):
            return None
        pods = [p for p in self.cluster.store.objects(self.rtype("v1", "Pod")) if selects(pdb, p)]
        now = self.now()
        status, recheck = budget_status(pdb, pods, now, self._scales(pods))
        write_status(self.cluster, self.rtype(*PDB), dict(pdb), status)
        return None if recheck is None else max(0.0, recheck - now)

    def _scales(self, pods: list[JsonObj]) -> dict[str, int | str]:
        """The scales of the stored controllers of ``pods`` (:data:`Scales`)."""
        out: dict[str, int | str] = {}
        for pod in pods:
            for ref in pod["metadata"].get("ownerReferences") or []:
                found = self.cluster.store.find_uid(str(ref.get("uid")))
                if found is None or not ref.get("controller"):
                    continue
                rtype, owner = found
                replicas = (owner.get("spec") or {}).get("replicas", 1)
                out[str(ref["uid"])] = replicas if rtype.kind in SCALED_KINDS else str(rtype)
        return out

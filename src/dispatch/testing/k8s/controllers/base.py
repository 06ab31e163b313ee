"""What every emulated controller shares: a reconcile loop over store changes, conditions as
``metav1.Condition`` / batch conditions are kept, and events as components record them.

A :class:`Reconciler` names the resource types it watches and maps each change to the keys
(namespace, name) of the objects it owns the reconciliation of; ``reconcile(key)`` runs
synchronously on the cluster's loop (so it sees a consistent store) and may return a delay in
emulated seconds after which the key is reconciled again. Conflicts and other API errors from
its own writes (a refusal by an admission webhook or policy included) are logged and requeue
the key with a per-key exponential backoff, as controller-runtime's rate limiter does:
controllers are level-triggered, as the real ones.

Each controller writes as its own user (``user``: the ServiceAccount of its Deployment, or
the kube-controller-manager controller's): admission webhooks and policies see who asks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.meta import rfc3339, rfc3339_micro
from dispatch.testing.k8s.rbac import UserInfo, service_account_user
from dispatch.testing.k8s.resources import ResourceType
from dispatch.testing.k8s.watch import Change

if TYPE_CHECKING:
    from dispatch.testing.k8s.cluster import Cluster

JsonObj = dict[str, Any]
Key = tuple[str, str]
log = logging.getLogger(__name__)
MERGE = "application/merge-patch+json"
RETRY_AFTER_ERROR = 1.0  # emulated seconds before the first retry after an API error
RETRY_AFTER_ERROR_MAX = 300.0  # the longest backoff (doubling from RETRY_AFTER_ERROR)


def kube_controller(name: str) -> UserInfo:
    """The user of kube-controller-manager's ``<name>-controller`` (its
    ``--use-service-account-credentials`` ServiceAccount in kube-system)."""
    return service_account_user("kube-system", f"{name}-controller")


def error_backoff(failures: int) -> float:
    """Emulated seconds before retrying a key after its ``failures``-th failure in a row."""
    return float(min(RETRY_AFTER_ERROR * 2 ** max(failures - 1, 0), RETRY_AFTER_ERROR_MAX))


class Reconciler:
    """Base of the level-triggered controllers. Subclasses set ``name`` and ``watches`` and
    implement ``keys`` and ``reconcile``."""

    name = "reconciler"
    watches: tuple[tuple[str, str], ...] = ()  # (apiVersion, kind)
    #: who this controller's writes are, to admission (None: the emulator itself)
    user: UserInfo | None = None

    def __init__(self) -> None:
        self._cluster: Cluster | None = None
        self._timers: dict[Key, asyncio.TimerHandle | asyncio.Task[None]] = {}
        self._dirty: set[Key] = set()
        self._wake = asyncio.Event()
        self._failures: dict[Key, int] = {}

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._cluster

    def install(self, cluster: Cluster) -> None:
        """Called before the server starts: register admission plugins, hooks."""
        self._cluster = cluster

    def keys(self, change: Change) -> Iterable[Key]:
        return [(change.namespace, change.name)]

    def reconcile(self, key: Key) -> float | None:
        raise NotImplementedError

    def enqueue(self, key: Key, after: float | None = None) -> None:
        if after is None or after <= 0:
            self._dirty.add(key)
            self._wake.set()
            return
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._timers[key] = asyncio.ensure_future(self._later(key, after))

    async def _later(self, key: Key, after: float) -> None:
        await self.cluster.clock.sleep(after)
        self._timers.pop(key, None)
        self.enqueue(key)

    async def run(self, cluster: Cluster) -> None:
        self._cluster = cluster
        types = [cluster.rtype(api, kind) for api, kind in self.watches]
        sub = cluster.store.subscribe(types)
        pump = asyncio.ensure_future(self._pump(sub))
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._dirty:
                    batch = sorted(self._dirty)
                    self._dirty.clear()
                    for key in batch:
                        self._reconcile_one(key)
                    await asyncio.sleep(0)
        finally:
            pump.cancel()
            sub.close()
            for timer in self._timers.values():
                timer.cancel()

    async def _pump(self, sub: Any) -> None:
        async for _event, change in sub:
            for key in self.keys(change):
                self._dirty.add(key)
            self._wake.set()

    def _reconcile_one(self, key: Key) -> None:
        try:
            with self.cluster.store.acting_as(self.user):
                after = self.reconcile(key)
            self._failures.pop(key, None)
        except ApiError as exc:
            failures = self._failures[key] = self._failures.get(key, 0) + 1
            after = error_backoff(failures)
            log.info("%s: %s/%s: %s; requeued in %ss", self.name, key[0], key[1], exc, after)
        if after is not None:
            self.enqueue(key, after)

    # ------------------------------------------------------------------ store shortcuts

    def rtype(self, api_version: str, kind: str) -> ResourceType:
        return self.cluster.rtype(api_version, kind)

    def find(self, api_version: str, kind: str, namespace: str | None, name: str) -> JsonObj | None:
        """The current object, read-only (copy before changing it), or None."""
        return self.cluster.store.peek(self.rtype(api_version, kind), namespace, name)

    def now(self) -> float:
        return self.cluster.clock.now()


def owner_keys(change: Change, kind: str) -> list[Key]:
    """Keys of the controller owners of ``kind`` of the changed object."""
    return [
        (change.namespace, str(ref.get("name")))
        for ref in change.obj["metadata"].get("ownerReferences") or []
        if ref.get("kind") == kind and ref.get("controller")
    ]


def owner_ref(obj: JsonObj, *, block: bool = True) -> JsonObj:
    m = obj["metadata"]
    ref: JsonObj = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def condition(conditions: list[JsonObj], ctype: str) -> JsonObj | None:
    return next((c for c in conditions if c.get("type") == ctype), None)


def is_true(obj: JsonObj, ctype: str) -> bool:
    found = condition((obj.get("status") or {}).get("conditions") or [], ctype)
    return found is not None and found.get("status") == "True"


def set_condition(
    conditions: list[JsonObj],
    ctype: str,
    status: str,
    reason: str,
    message: str,
    now: float,
    *,
    probe_times: bool = False,
) -> bool:
    """Upsert a condition; ``lastTransitionTime`` moves only when the status changes (as
    ``meta.SetStatusCondition``). ``probe_times`` adds ``lastProbeTime`` (batch/v1 Job and
    Pod conditions). Returns whether anything changed."""
    old = condition(conditions, ctype)
    new: JsonObj = {"type": ctype, "status": status, "reason": reason, "message": message}
    stamp = rfc3339(now)
    if probe_times:
        new["lastProbeTime"] = stamp
    if old is not None and old.get("status") == status:
        new["lastTransitionTime"] = old.get("lastTransitionTime", stamp)
        if probe_times and old.get("reason") == reason and old.get("message") == message:
            new["lastProbeTime"] = old.get("lastProbeTime", stamp)
    else:
        new["lastTransitionTime"] = stamp
    if old == new:
        return False
    if old is None:
        conditions.append(new)
    else:
        conditions[conditions.index(old)] = new
    return True


def record_event(
    cluster: Cluster,
    obj: JsonObj,
    event_type: str,
    reason: str,
    message: str,
    component: str,
    action: str = "",
    field_path: str = "",
) -> None:
    """A core/v1 Event about ``obj`` (with ``eventTime`` so events.k8s.io/v1 reads it);
    ``field_path`` names the part of it (``spec.initContainers{init}``), as the kubelet does."""
    m = obj["metadata"]
    now = cluster.clock.now()
    namespace = m.get("namespace") or "default"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{m['name']}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": m["name"],
            "namespace": m.get("namespace"),
            "uid": m.get("uid"),
            "resourceVersion": m.get("resourceVersion"),
            **({"fieldPath": field_path} if field_path else {}),
        },
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": {"component": component},
        "firstTimestamp": rfc3339(now),
        "lastTimestamp": rfc3339(now),
        "eventTime": rfc3339_micro(now),
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": f"{component}-emulated",
        "action": action or reason,
    }
    cluster.store.create(cluster.rtype("v1", "Event"), namespace, event)


def write_status(cluster: Cluster, rtype: ResourceType, obj: JsonObj, status: JsonObj) -> JsonObj:
    """Replace ``obj``'s status (a no-op write is not a change); the object as stored, read-only
    (never modify it: as ``Store.peek``)."""
    m = obj["metadata"]
    body = {**obj, "status": status}
    return cluster.store.update(
        rtype, m.get("namespace"), m["name"], body, subresource="status", copy=False
    )

"""The ``pods/eviction`` subresource, as kube-apiserver's EvictionREST
(pkg/registry/core/pod/storage/eviction.go) answers it.

A POST of a policy/v1 ``Eviction`` deletes the pod gracefully, after marking it
``DisruptionTarget=True/EvictionByEvictionAPI``, when its PodDisruptionBudget allows:

* a pod that is Pending, Succeeded, Failed or already being deleted ignores budgets;
* more than one matching budget is a 500 (a ``Status`` with that message);
* a budget whose status is older than its spec (``observedGeneration``) is 429 "still being
  processed" (Retry-After 10); one with ``disruptionsAllowed: 0`` is 429 with the budget's
  numbers in ``details.causes``, which ``kubectl drain`` retries every 5 s;
* otherwise ``disruptionsAllowed`` is decremented and the pod recorded in ``disruptedPods``
  (so the disruption controller does not count it while it terminates) before the delete;
* a pod that is not Ready does not use up the budget: with ``unhealthyPodEvictionPolicy:
  AlwaysAllow``, or (``IfHealthyBudget``, the default) while the budget is met.

The answer to a successful eviction is a ``Status`` Success with code 201. Budgets are matched
as the eviction code matches them: an empty selector matches nothing here (the disruption
controller's policy/v1 reading counts every pod for it).
"""

from __future__ import annotations

from typing import Any

from dispatch.adapters.kubeflow.objects import clone
from dispatch.clock import Clock
from dispatch.testing.k8s import errors
from dispatch.testing.k8s.controllers.base import set_condition
from dispatch.testing.k8s.controllers.budgets import allowed_condition, is_ready
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.meta import rfc3339
from dispatch.testing.k8s.selectors import LabelSelector
from dispatch.testing.k8s.store import Store

JsonObj = dict[str, Any]
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
TOO_MANY_BUDGETS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
CAUSE = "DisruptionBudget"


def success() -> JsonObj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _violation(detail: str, retry_after: int) -> ApiError:
    details: JsonObj = {"causes": [{"reason": CAUSE, "message": detail}]}
    headers: dict[str, str] = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, "TooManyRequests", VIOLATION, details, headers)


def _budgets(store: Store, pod: JsonObj) -> list[JsonObj]:
    """The budgets of the pod's namespace whose non-empty selector matches it."""
    pdb_type = store.catalog.find("policy", "v1", "poddisruptionbudgets")
    if pdb_type is None:
        return []
    namespace = pod["metadata"]["namespace"]
    out = []
    for pdb in store.objects(pdb_type):
        if pdb["metadata"].get("namespace") != namespace:
            continue
        selector = LabelSelector.from_dict((pdb.get("spec") or {}).get("selector"))
        if selector.empty or not selector.matches(pod["metadata"].get("labels")):
            continue
        out.append(pdb)
    return out


class Eviction:
    """Evictions against one store; times from ``clock`` (the emulated one)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def evict(self, namespace: str, name: str, body: JsonObj, *, dry_run: bool) -> JsonObj:
        """Evict pod ``namespace/name`` as ``body`` (an Eviction) asks; the Status to answer,
        or an :class:`ApiError` (404 for a missing pod, 429 when a budget forbids)."""
        if (body.get("metadata") or {}).get("name") != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        options = body.get("deleteOptions") or {}
        dry_run = dry_run or bool(options.get("dryRun"))
        pod_type = self.store.catalog.find("", "v1", "pods")
        if pod_type is None:
            raise errors.not_found("", "pods", name)
        pod = self.store.get(pod_type, namespace, name)
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Pending", "Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
            self._delete(pod, options, dry_run)
            return success()
        budgets = _budgets(self.store, pod)
        if len(budgets) > 1:
            return {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": TOO_MANY_BUDGETS,
                "code": 500,
            }
        if budgets and not self._unhealthy_may_go(pod, budgets[0]):
            self._decrement(budgets[0], name, dry_run)
        self._delete(pod, options, dry_run)
        return success()

    @staticmethod
    def _unhealthy_may_go(pod: JsonObj, pdb: JsonObj) -> bool:
        """A pod that is not Ready is let go without using the budget (the policy's rule)."""
        if is_ready(pod):
            return False
        if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return True
        status = pdb.get("status") or {}
        desired = status.get("desiredHealthy", 0)
        return bool(status.get("currentHealthy", 0) >= desired > 0)

    def _decrement(self, pdb: JsonObj, pod_name: str, dry_run: bool) -> None:
        """``checkAndDecrement``."""
        status = clone(pdb.get("status") or {})
        m = pdb["metadata"]
        if status.get("observedGeneration", 0) < m.get("generation", 1):
            raise _violation(
                f"The disruption budget {m['name']} is still being processed by the server.", 10
            )
        if status.get("disruptionsAllowed", 0) < 0:
            raise errors.forbidden(
                "policy", "poddisruptionbudget", m["name"], "pdb disruptions allowed is negative"
            )
        if status.get("disruptionsAllowed", 0) == 0:
            raise _violation(
                f"The disruption budget {m['name']} needs {status.get('desiredHealthy', 0)} "
                f"healthy pods and has {status.get('currentHealthy', 0)} currently",
                0,
            )
        status["disruptionsAllowed"] -= 1
        now = self.clock.now()
        if status["disruptionsAllowed"] == 0:
            allowed_condition(status, now)
        if dry_run:
            return
        status.setdefault("disruptedPods", {})[pod_name] = rfc3339(now)
        pdb_type = self.store.catalog.find("policy", "v1", "poddisruptionbudgets")
        if pdb_type is not None:
            body = {**pdb, "status": status}
            self.store.update(pdb_type, m["namespace"], m["name"], body, subresource="status")

    def _delete(self, pod: JsonObj, options: JsonObj, dry_run: bool) -> None:
        """``addConditionAndDeletePod``: ``DisruptionTarget`` on the pod, then a graceful
        delete with the eviction's options."""
        if dry_run:
            return
        pod_type = self.store.catalog.find("", "v1", "pods")
        if pod_type is None:
            return
        m = pod["metadata"]
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != m["uid"]:
            raise errors.conflict(
                "", "pods", m["name"],
                f"Precondition failed: UID in precondition: {pre['uid']}, "
                f"UID in object meta: {m['uid']}",
            )  # fmt: skip
        if pre.get("resourceVersion") and pre["resourceVersion"] != m["resourceVersion"]:
            raise errors.conflict(
                "", "pods", m["name"],
                "Precondition failed: ResourceVersion in precondition: "
                f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                f"{m['resourceVersion']}",
            )  # fmt: skip
        status = clone(pod.get("status") or {})
        set_condition(status.setdefault("conditions", []), "DisruptionTarget", "True",
                      "EvictionByEvictionAPI", "Eviction API: evicting",
                      self.clock.now())  # fmt: skip
        updated = self.store.update(
            pod_type, m["namespace"], m["name"], {**pod, "status": status}, subresource="status"
        )
        if pre.get("resourceVersion"):
            pre = {**pre, "resourceVersion": updated["metadata"]["resourceVersion"]}
        self.store.delete(
            pod_type,
            m["namespace"],
            m["name"],
            preconditions=pre,
            grace_period_seconds=options.get("gracePeriodSeconds"),
        )

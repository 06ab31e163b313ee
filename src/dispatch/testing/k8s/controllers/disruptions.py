"""Pod disruptions that are not the scheduler's or the node controller's: the Eviction API
(``kubectl drain``, autoscaler scale-down, spot-termination handlers) and the kubelet's
graceful node shutdown (spot/preemptible reclaim). Platform reference C.4.

* :func:`evict_pod` does what the API server does for a ``pods/eviction`` request, without
  consulting PodDisruptionBudgets (the served subresource, :mod:`dispatch.testing.k8s.eviction`,
  does): the pod gets ``DisruptionTarget=True/EvictionByEvictionAPI`` ("Eviction API:
  evicting") and is deleted gracefully, so its kubelet stops the containers (exit 143).
* :func:`drain_node` is ``kubectl drain``: cordon (``spec.unschedulable`` and the
  ``node.kubernetes.io/unschedulable:NoSchedule`` taint) then evict every pod on the node.
* :func:`shut_down_node` is the kubelet's graceful node shutdown: a ``Shutdown`` event on the
  Node, then every unfinished pod on it ends ``Failed`` with ``status.reason: Terminated``,
  the message "Pod was terminated in response to imminent node shutdown.",
  ``DisruptionTarget=True/TerminationByKubelet`` and its containers terminated with exit 143.
  The pods are not deleted (the kubelet does not delete them); the Node stays, Ready (what
  the cloud provider does with the VM afterwards is a separate event, e.g. ``deleteNode``).
* :func:`pressure_evict_pod` is the kubelet's node-pressure eviction of one running pod: an
  ``Evicted`` event, the pod ``Failed`` with ``status.reason: Evicted`` and the message
  "The node was low on resource: memory. ...", ``DisruptionTarget=True/TerminationByKubelet``
  and its containers terminated with exit 137; not deleted (its controller replaces it).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from dispatch.testing.k8s.controllers.base import record_event, set_condition, write_status
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.meta import rfc3339

if TYPE_CHECKING:
    from dispatch.testing.k8s.cluster import Cluster

JsonObj = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
PRESSURE_MESSAGE = (
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 81920Ki. "
)


def _pods_on(cluster: Cluster, node: str) -> list[JsonObj]:
    return [
        copy.deepcopy(p)
        for p in cluster.store.objects(cluster.rtype("v1", "Pod"))
        if (p.get("spec") or {}).get("nodeName") == node
        and not p["metadata"].get("deletionTimestamp")
    ]


def evict_pod(cluster: Cluster, namespace: str, name: str) -> bool:
    """The Eviction API on one pod; False when the pod is gone or already being deleted."""
    pod_type = cluster.rtype("v1", "Pod")
    try:
        pod = cluster.store.get(pod_type, namespace, name)
    except ApiError:
        return False
    if pod["metadata"].get("deletionTimestamp"):
        return False
    if (pod.get("status") or {}).get("phase") not in TERMINAL:
        status = copy.deepcopy(pod.get("status") or {})
        set_condition(status.setdefault("conditions", []), "DisruptionTarget", "True",
                      "EvictionByEvictionAPI", "Eviction API: evicting",
                      cluster.clock.now())  # fmt: skip
        write_status(cluster, pod_type, pod, status)
    cluster.store.delete(pod_type, namespace, name)
    return True


def drain_node(cluster: Cluster, node: str) -> None:
    """``kubectl drain``: cordon the node, then evict every pod on it."""
    node_type = cluster.rtype("v1", "Node")
    obj = cluster.store.get(node_type, None, node)
    spec = dict(obj.get("spec") or {})
    taints = [t for t in spec.get("taints") or [] if t.get("key") != UNSCHEDULABLE]
    taints.append(
        {"key": UNSCHEDULABLE, "effect": "NoSchedule", "timeAdded": rfc3339(cluster.clock.now())}
    )
    cluster.store.update(
        node_type, None, node, {**obj, "spec": {**spec, "unschedulable": True, "taints": taints}}
    )
    for pod in _pods_on(cluster, node):
        evict_pod(cluster, pod["metadata"]["namespace"], pod["metadata"]["name"])


def pressure_evict_pod(cluster: Cluster, namespace: str, name: str) -> bool:
    """The kubelet's node-pressure eviction of one pod (module docstring); False when the
    pod is gone or has ended."""
    pod_type = cluster.rtype("v1", "Pod")
    try:
        pod = cluster.store.get(pod_type, namespace, name)
    except ApiError:
        return False
    if (pod.get("status") or {}).get("phase") in TERMINAL:
        return False
    record_event(cluster, pod, "Warning", "Evicted", PRESSURE_MESSAGE.strip(), "kubelet")
    _end(cluster, pod, "Evicted", PRESSURE_MESSAGE, 137)
    return True


def _end(cluster: Cluster, pod: JsonObj, reason: str, message: str, code: int) -> None:
    """The kubelet ends a pod on its own: ``Failed`` with ``reason``, ``DisruptionTarget``
    ``TerminationByKubelet``, containers terminated with ``code``; logs closed."""
    now = cluster.clock.now()
    status = copy.deepcopy(pod.get("status") or {})
    status.update(phase="Failed", reason=reason, message=message)
    conditions = status.setdefault("conditions", [])
    set_condition(conditions, "DisruptionTarget", "True", "TerminationByKubelet",
                  message, now)  # fmt: skip
    for ctype in ("Ready", "ContainersReady"):
        set_condition(conditions, ctype, "False", "PodFailed", "", now)
    for entry in status.get("containerStatuses") or []:
        started = ((entry.get("state") or {}).get("running") or {}).get("startedAt")
        entry.update(ready=False, started=False)
        entry["state"] = {
            "terminated": {
                "exitCode": code,
                "reason": "Error",
                "startedAt": started or rfc3339(now),
                "finishedAt": rfc3339(now),
            }
        }
    write_status(cluster, cluster.rtype("v1", "Pod"), pod, status)
    for c in (pod.get("spec") or {}).get("containers") or []:
        cluster.logs.finish(pod["metadata"]["namespace"], pod["metadata"]["name"], c["name"])


def shut_down_node(cluster: Cluster, node: str) -> None:
    """The kubelet's graceful node shutdown of ``node`` (see the module docstring)."""
    node_obj = cluster.store.get(cluster.rtype("v1", "Node"), None, node)
    record_event(cluster, node_obj, "Normal", "Shutdown",
                 "Shutdown manager detected shutdown event", "kubelet")  # fmt: skip
    for pod in _pods_on(cluster, node):
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        _end(cluster, pod, "Terminated", SHUTDOWN_MESSAGE, 143)

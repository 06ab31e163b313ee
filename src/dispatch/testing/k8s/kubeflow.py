"""An emulated cluster as a Kubeflow user has one: Trainer v2.3 with its default runtimes,
JobSet v0.12, the Job controller, kube-scheduler, kubelets and, optionally, Kueue v0.17.

One definition for ``dispatch emulator`` and the tests that want the same cluster::

    config = kubeflow_cluster_config(nodes=4, kueue=True)
    with Emulator(config) as emu:
        emu.call(lambda: install_default_runtimes(emu.cluster))
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from dispatch.testing.k8s.cluster import Cluster, ClusterConfig, Controller
from dispatch.testing.k8s.runtimes import default_runtimes
from dispatch.testing.k8s.scenario import Scenario

GPU = "nvidia.com/gpu"
#: the names of Kueue's quickstart (site/content/en/docs/tasks/manage/administer_cluster_quotas)
CLUSTER_QUEUE, LOCAL_QUEUE, FLAVOR = "cluster-queue", "user-queue", "default-flavor"
KUEUE_GROUP = "kueue.x-k8s.io"
TRAINER_NAMESPACE, TRAINER_VERSION = "kubeflow-system", "v2.3.0"
DEFAULT_CAPACITY: Mapping[str, str] = {"cpu": "8", "memory": "32Gi", "pods": "110"}


def node_names(count: int) -> tuple[str, ...]:
    return tuple(f"node-{i}" for i in range(1, count + 1))


def kubeflow_cluster_config(
    *,
    nodes: int = 2,
    node_capacity: Mapping[str, str] | None = None,
    gpus_per_node: int = 0,
    kueue: bool = False,
    time_scale: float = 1.0,
    namespaces: Sequence[str] = ("default",),
    scenario: Scenario | None = None,
    **config: Any,
) -> ClusterConfig:
    """A :class:`ClusterConfig` with every controller. ``kueue``: Kueue manages workloads
    through one ClusterQueue (``cluster-queue``, flavor ``default-flavor``) whose quota is the
    whole cluster, and a LocalQueue ``user-queue`` in every namespace, as Kueue's quickstart
    sets up; without it, Kueue's API group is not served at all, as on a cluster without
    Kueue (a client probing for Kueue finds none). Other keywords go to :class:`ClusterConfig`
    as they are."""
    from dispatch.testing.k8s.controllers import ClusterQueue, KueueConfig, standard_controllers

    capacity = dict(node_capacity or DEFAULT_CAPACITY)
    if gpus_per_node:
        capacity[GPU] = str(gpus_per_node)
    queues = None
    if kueue:
        quota = {r: _times(v, nodes) for r, v in capacity.items() if r != "pods"}
        queue = ClusterQueue(CLUSTER_QUEUE, quota, (LOCAL_QUEUE,), flavor=FLAVOR)
        queues = KueueConfig(cluster_queues=(queue,))
    if not kueue:
        config.setdefault("without_groups", (KUEUE_GROUP,))
    return ClusterConfig(
        namespaces=tuple(namespaces),
        nodes=node_names(nodes),
        node_capacity=capacity,
        time_scale=time_scale,
        controllers=cast("list[Controller]", standard_controllers(scenario, queues)),
        **config,
    )


def install_default_runtimes(cluster: Cluster) -> list[str]:
    """What installing Trainer v2.3 leaves besides its controller (on the cluster's loop):
    the default ClusterTrainingRuntimes, and the ``kubeflow-trainer-public`` ConfigMap in
    ``kubeflow-system`` that tells the Kubeflow SDK the version (``manifests/overlays/manager``:
    ``kubeflow_trainer_version=v2.3.0``). Returns the runtimes' names."""
    namespaces = cluster.rtype("v1", "Namespace")
    if cluster.store.peek(namespaces, None, TRAINER_NAMESPACE) is None:
        cluster.store.create(namespaces, None, {"metadata": {"name": TRAINER_NAMESPACE}})
    public = {
        "metadata": {"name": "kubeflow-trainer-public", "namespace": TRAINER_NAMESPACE},
        "data": {"kubeflow_trainer_version": TRAINER_VERSION},
    }
    cluster.store.create(cluster.rtype("v1", "ConfigMap"), TRAINER_NAMESPACE, public)
    names = []
    for runtime in default_runtimes():
        rtype = cluster.rtype(runtime["apiVersion"], runtime["kind"])
        cluster.store.create(rtype, None, runtime)
        names.append(runtime["metadata"]["name"])
    return names


def _times(quantity: str, count: int) -> str:
    """``count`` times a quantity written as an integer and a suffix (``32Gi`` -> ``128Gi``)."""
    found = re.fullmatch(r"(\d+)(\D*)", quantity.strip())
    if found is None:
        raise ValueError(f"capacity {quantity!r}: write an integer and a unit, e.g. 32Gi")
    return f"{int(found[1]) * count}{found[2]}"

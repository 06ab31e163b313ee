"""The indexes that keep the scheduler's node usage, the resource catalog's lookups and the
Service allocator from scanning every stored object: each must give the answer a scan gives,
as the store changes under it. In process, no controllers."""

from __future__ import annotations

from random import Random
from typing import Any

from dispatch.clock import ManualClock
from dispatch.testing.k8s import Cluster, ClusterConfig
from dispatch.testing.k8s.controllers.placement import NodeUsage, Usage
from dispatch.testing.k8s.selectors import LabelSelector

JsonObj = dict[str, Any]


def _cluster() -> Cluster:
    """A cluster that is not started (no server, no controllers) with its one namespace."""
    cluster = Cluster(ClusterConfig(base_clock=ManualClock(), controllers=()))
    cluster.store.create(cluster.rtype("v1", "Namespace"), None, {"metadata": {"name": "default"}})
    return cluster


def _pod(name: str, cpu: str, node: str | None = None) -> JsonObj:
    spec: JsonObj = {
        "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _scan(cluster: Cluster) -> Usage:
    """What a pass over every stored pod gives (the scheduler's definition)."""
    used: Usage = {}
    for pod in cluster.store.objects(cluster.rtype("v1", "Pod")):
        node = pod["spec"].get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            row = used.setdefault(node, {"cpu": 0, "memory": 0, "nvidia.com/gpu": 0, "pods": 0})
            row["cpu"] += int(pod["spec"]["containers"][0]["resources"]["requests"]["cpu"][:-1])
            row["pods"] += 1
    return used


def test_node_usage_follows_binding_finishing_and_deletion() -> None:
    cluster = _cluster()
    store, pods = cluster.store, cluster.rtype("v1", "Pod")
    store.create(pods, "default", _pod("early", "100m", "n1"))
    usage = NodeUsage(store, pods)  # counts what is stored already
    assert (
        usage.usage()
        == _scan(cluster)
        == {"n1": {"cpu": 100, "memory": 0, "nvidia.com/gpu": 0, "pods": 1}}
    )
    store.create(pods, "default", _pod("waiting", "200m"))
    store.create(pods, "default", _pod("late", "300m", "n1"))
    store.create(pods, "default", _pod("other", "50m", "n2"))
    assert usage.usage() == _scan(cluster)
    assert usage.usage()["n1"]["cpu"] == 400
    bound = store.get(pods, "default", "waiting")
    store.update(
        pods,
        "default",
        "waiting",
        {**bound, "spec": {**bound["spec"], "nodeName": "n2"}},
        subresource="binding",
    )
    assert usage.usage()["n2"] == {"cpu": 250, "memory": 0, "nvidia.com/gpu": 0, "pods": 2}
    done = store.get(pods, "default", "late")
    store.update(pods, "default", "late", {**done, "status": {"phase": "Succeeded"}},
                 subresource="status")  # fmt: skip
    assert usage.usage() == _scan(cluster)
    assert usage.usage()["n1"]["cpu"] == 100
    store.delete(pods, "default", "early", grace_period_seconds=0)
    assert usage.usage() == _scan(cluster)
    assert "n1" not in usage.usage()  # no pod left on it: no row, as a scan gives


def test_node_usage_hands_out_copies() -> None:
    cluster = _cluster()
    store, pods = cluster.store, cluster.rtype("v1", "Pod")
    store.create(pods, "default", _pod("a", "100m", "n1"))
    usage = NodeUsage(store, pods)
    trial = usage.usage()
    trial["n1"]["cpu"] += 1000
    assert usage.usage()["n1"]["cpu"] == 100


def test_the_catalog_forgets_a_type_taken_out_in_place() -> None:
    cluster = _cluster()
    catalog = cluster.catalog
    trainjob = catalog.by_kind("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert trainjob is not None
    assert catalog.storage_type(trainjob) is trainjob
    catalog.types[:] = [t for t in catalog.types if t.group != "trainer.kubeflow.org"]
    assert catalog.by_kind("trainer.kubeflow.org/v1alpha1", "TrainJob") is None
    catalog.add(trainjob)
    assert catalog.by_kind("trainer.kubeflow.org/v1alpha1", "TrainJob") is trainjob


def _service(name: str, kind: str = "NodePort") -> JsonObj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"type": kind, "ports": [{"port": 80}, {"port": 81}]},
    }


def test_a_deleted_services_addresses_are_handed_out_again_first() -> None:
    cluster = _cluster()
    store, services = cluster.store, cluster.rtype("v1", "Service")
    made = [store.create(services, "default", _service(f"s{i}"))["spec"] for i in range(3)]
    ips = [s["clusterIP"] for s in made]
    ports = [p["nodePort"] for s in made for p in s["ports"]]
    assert len(set(ips)) == 3
    assert len(set(ports)) == 6
    assert ports == sorted(ports)
    store.delete(services, "default", "s1")
    again = store.create(services, "default", _service("s3"))["spec"]
    assert again["clusterIP"] == ips[1]
    assert [p["nodePort"] for p in again["ports"]] == ports[2:4]
    dry = store.create(services, "default", _service("s4"), dry_run=True)["spec"]
    after = store.create(services, "default", _service("s4"))["spec"]
    assert dry["clusterIP"] == after["clusterIP"] not in ips  # a dry run holds nothing


def test_an_update_keeps_its_own_addresses_free_to_itself() -> None:
    cluster = _cluster()
    store, services = cluster.store, cluster.rtype("v1", "Service")
    created = store.create(services, "default", _service("s"))
    ports = [p["nodePort"] for p in created["spec"]["ports"]]
    body = {**created, "spec": {**created["spec"], "ports": [{"port": 80}, {"port": 81}]}}
    updated = store.update(services, "default", "s", body)
    assert [p["nodePort"] for p in updated["spec"]["ports"]] == ports
    assert updated["spec"]["clusterIP"] == created["spec"]["clusterIP"]


def test_lists_read_the_key_order_as_a_sort_of_every_key_would() -> None:
    """``Store.list`` reads a range of the keys kept in order (``Tables.keys_in_order``); over
    random creations and deletions in three namespaces, every list (all namespaces, one, a
    label selector, pages of 7 through continue tokens) is what sorting every stored key and
    filtering gives."""
    cluster = _cluster()
    store, pods = cluster.store, cluster.rtype("v1", "Pod")
    namespaces = cluster.rtype("v1", "Namespace")
    for name in ("a", "b"):
        store.create(namespaces, None, {"metadata": {"name": name}})
    random = Random(31)
    names: set[tuple[str, str]] = set()
    for step in range(400):
        ns = random.choice(("a", "b", "default"))
        name = f"p{random.randrange(60)}"
        if (ns, name) in names and random.random() < 0.5:
            store.delete(pods, ns, name)
            names.discard((ns, name))
        elif (ns, name) not in names:
            body = _pod(name, "10m")
            body["metadata"]["labels"] = {"group": str(random.randrange(3))}
            store.create(pods, ns, body)
            names.add((ns, name))
        if step % 40:
            continue
        for namespace in (None, "a", "b", "default"):
            for labels in (None, "group=1", "group in (0,2)"):
                selector = LabelSelector.parse(labels) if labels else None
                expected = [
                    (obj["metadata"]["namespace"], obj["metadata"]["name"])
                    for obj in sorted(
                        store.objects(pods),
                        key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]),
                    )
                    if (namespace is None or obj["metadata"]["namespace"] == namespace)
                    and (selector is None or selector.matches(obj["metadata"].get("labels")))
                ]
                whole = store.list(pods, namespace, labels=selector)
                assert [_key(o) for o in whole.items] == expected
                paged: list[tuple[str, str]] = []
                token: str | None = None
                while True:
                    page = store.list(
                        pods, namespace, labels=selector, limit=7, continue_token=token
                    )
                    paged += [_key(o) for o in page.items]
                    token = page.continue_token or None
                    if token is None:
                        break
                assert paged == expected


def _key(obj: JsonObj) -> tuple[str, str]:
    return (obj["metadata"]["namespace"], obj["metadata"]["name"])

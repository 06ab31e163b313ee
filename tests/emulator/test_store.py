"""The store and the controller extension API, in process (no HTTP), on a manual clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dispatch.clock import ManualClock
from dispatch.testing.k8s import ApiError, Cluster, ClusterConfig, ScaledClock

from .conftest import pod, trainjob


def _cluster(**kw: Any) -> Cluster:
    return Cluster(ClusterConfig(base_clock=ManualClock(), **kw))


def test_scaled_clock_runs_faster_than_its_base() -> None:
    base = ManualClock(start=100.0)
    clock = ScaledClock(60.0, base, start=0.0)
    base.advance(2.0)
    assert clock.now() == 120.0
    asyncio.run(clock.sleep(60.0))
    assert base.now() == 103.0


def test_resource_versions_are_global_and_noop_writes_are_not_changes() -> None:
    async def scenario() -> None:
        async with _cluster() as cluster:
            store = cluster.store
            cm = cluster.rtype("v1", "ConfigMap")
            a = store.create(cm, "default", {"metadata": {"name": "a"}})
            b = store.create(cm, "default", {"metadata": {"name": "b"}})
            assert (
                int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1
            )
            again = store.update(cm, "default", "a", a)
            assert again["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]
            assert store.resource_version == int(b["metadata"]["resourceVersion"])

    asyncio.run(scenario())


def test_metadata_name_validation_and_required_name() -> None:
    async def scenario() -> None:
        async with _cluster() as cluster:
            cm = cluster.rtype("v1", "ConfigMap")
            with pytest.raises(ApiError) as exc:
                cluster.store.create(cm, "default", {"metadata": {"name": "Not_Valid"}})
            assert exc.value.code == 422
            assert exc.value.status()["details"]["causes"][0]["field"] == "metadata.name"
            with pytest.raises(ApiError) as exc:
                cluster.store.create(cm, "default", {"metadata": {}})
            assert exc.value.message == (
                'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
            )

    asyncio.run(scenario())


def test_finalizers_hold_deletion_and_cannot_be_added_while_deleting() -> None:
    async def scenario() -> None:
        async with _cluster() as cluster:
            store, cm = cluster.store, cluster.rtype("v1", "ConfigMap")
            store.create(cm, "default", {"metadata": {"name": "f", "finalizers": ["a/b"]}})
            obj, gone = store.delete(cm, "default", "f")
            assert not gone and obj["metadata"]["deletionTimestamp"]
            obj["metadata"]["finalizers"] = ["a/b", "c/d"]
            with pytest.raises(ApiError) as exc:
                store.update(cm, "default", "f", obj)
            assert exc.value.code == 422
            store.patch(
                cm,
                "default",
                "f",
                "application/merge-patch+json",
                {"metadata": {"finalizers": None}},
            )
            with pytest.raises(ApiError) as exc:
                store.get(cm, "default", "f")
            assert exc.value.code == 404

    asyncio.run(scenario())


def test_orphan_and_dangling_owner_references() -> None:
    async def scenario() -> None:
        async with _cluster() as cluster:
            store = cluster.store
            tj, cm = (
                cluster.rtype("trainer.kubeflow.org/v1alpha1", "TrainJob"),
                cluster.rtype("v1", "ConfigMap"),
            )
            owner = store.create(tj, "default", trainjob("o"))
            ref = {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "name": "o",
                "uid": owner["metadata"]["uid"],
            }
            store.create(cm, "default", {"metadata": {"name": "kept", "ownerReferences": [ref]}})
            store.delete(tj, "default", "o", propagation="Orphan")
            kept = store.get(cm, "default", "kept")
            assert "ownerReferences" not in kept["metadata"]
            # an object whose owners are all absent is collected
            store.create(
                cm, "default", {"metadata": {"name": "dangling", "ownerReferences": [ref]}}
            )
            with pytest.raises(ApiError):
                store.get(cm, "default", "dangling")
            # so is one whose only owner reference, added by a patch, names an absent uid
            store.create(cm, "default", {"metadata": {"name": "late"}})
            store.patch(
                cm,
                "default",
                "late",
                "application/merge-patch+json",
                {"metadata": {"ownerReferences": [ref]}},
            )
            with pytest.raises(ApiError):
                store.get(cm, "default", "late")
            # one that also names a live owner only loses the dangling reference, by a
            # write of its own that watchers see
            live = store.create(tj, "default", trainjob("live"))
            solid = {**ref, "name": "live", "uid": live["metadata"]["uid"]}
            made = store.create(
                cm, "default", {"metadata": {"name": "both", "ownerReferences": [ref, solid]}}
            )
            both = store.get(cm, "default", "both")
            assert both["metadata"]["ownerReferences"] == [solid]
            assert both["metadata"]["resourceVersion"] != made["metadata"]["resourceVersion"]

    asyncio.run(scenario())


def test_namespace_deletion_removes_contents() -> None:
    async def scenario() -> None:
        async with _cluster(namespaces=("default", "team")) as cluster:
            store = cluster.store
            ns, cm = cluster.rtype("v1", "Namespace"), cluster.rtype("v1", "ConfigMap")
            store.create(cm, "team", {"metadata": {"name": "x", "finalizers": ["a/b"]}})
            state, gone = store.delete(ns, None, "team")
            assert not gone and state["status"]["phase"] == "Terminating"
            with pytest.raises(ApiError) as exc:
                store.create(cm, "team", {"metadata": {"name": "y"}})
            assert exc.value.code == 403
            store.patch(
                cm, "team", "x", "application/merge-patch+json", {"metadata": {"finalizers": None}}
            )
            with pytest.raises(ApiError):
                store.get(ns, None, "team")

    asyncio.run(scenario())


def test_history_compacts_by_emulated_time() -> None:
    async def scenario() -> None:
        base = ManualClock()
        async with Cluster(ClusterConfig(base_clock=base, compaction_window=60.0)) as cluster:
            store, cm = cluster.store, cluster.rtype("v1", "ConfigMap")
            first = store.create(cm, "default", {"metadata": {"name": "a"}})
            since = int(first["metadata"]["resourceVersion"]) - 1  # needs the change to "a"
            store.subscribe([cm], since=since).close()  # still in the window
            base.advance(120.0)
            store.create(cm, "default", {"metadata": {"name": "b"}})
            with pytest.raises(ApiError) as exc:
                store.subscribe([cm], since=since)
            assert exc.value.code == 410 and exc.value.reason == "Expired"

    asyncio.run(scenario())


class PodStarter:
    """A toy controller: marks every new pod Running, the way the future kubelet will."""

    name = "pod-starter"

    def __init__(self) -> None:
        self.started: list[str] = []

    async def run(self, cluster: Cluster) -> None:
        pods = cluster.rtype("v1", "Pod")
        async for event_type, change in cluster.store.subscribe([pods]):
            if event_type != "ADDED":
                continue
            await cluster.clock.sleep(5.0)  # emulated: instant on a manual base clock
            cluster.store.patch(
                pods,
                change.namespace,
                change.name,
                "application/merge-patch+json",
                {"status": {"phase": "Running"}},
                subresource="status",
            )
            self.started.append(change.name)


def test_controller_reacts_through_subscription_and_store_operations() -> None:
    starter = PodStarter()

    async def scenario() -> None:
        base = ManualClock()
        async with Cluster(ClusterConfig(base_clock=base, controllers=[starter])) as cluster:
            pods = cluster.rtype("v1", "Pod")
            watch = cluster.store.subscribe([pods], since=cluster.store.resource_version)
            cluster.store.create(pods, "default", pod("p1"))
            seen = []
            async for event_type, change in watch:
                seen.append((event_type, change.obj["status"]["phase"]))
                if len(seen) == 2:
                    break
            watch.close()
            assert seen == [("ADDED", "Pending"), ("MODIFIED", "Running")]
            assert cluster.controller_errors == []
            assert base.now() >= 5.0 + 1_700_000_000.0

    asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert starter.started == ["p1"]


def test_a_status_write_keeps_every_stored_version_and_the_callers_body_apart() -> None:
    """A status write copies only what it changes: the version before it, an answer given
    earlier and the body the caller still holds are each left as they were."""

    async def scenario() -> None:
        async with _cluster() as cluster:
            store = cluster.store
            pod_type = cluster.rtype("v1", "Pod")
            before = store.create(pod_type, "default", pod("p"))
            first = store.peek(pod_type, "default", "p")
            assert first is not None
            body = {**before, "status": {"phase": "Running", "conditions": [{"type": "Ready"}]}}
            after = store.update(pod_type, "default", "p", body, subresource="status")
            body["status"]["conditions"][0]["type"] = "Changed by the caller"
            body["metadata"]["labels"] = {"changed": "by the caller"}
            stored = store.get(pod_type, "default", "p")
            assert stored["status"]["conditions"] == [{"type": "Ready"}]
            assert "changed" not in (stored["metadata"].get("labels") or {})
            assert stored == after
            # the version before: its status and resourceVersion are its own
            assert "conditions" not in (first.get("status") or {})
            assert first["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
            assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
            assert stored["spec"] == before["spec"]

    asyncio.run(scenario())


def test_answers_are_copies_unless_a_reader_asks_for_the_stored_object() -> None:
    async def scenario() -> None:
        async with _cluster() as cluster:
            store = cluster.store
            cm = cluster.rtype("v1", "ConfigMap")
            body = {"metadata": {"name": "a"}, "data": {"k": "v"}}
            answer = store.create(cm, "default", body)
            body["data"]["k"] = "changed by the caller"
            answer["data"]["k"] = "changed in the answer"
            assert store.get(cm, "default", "a")["data"] == {"k": "v"}
            # a reader that only serializes the answer takes the stored object, read-only
            read = store.update(cm, "default", "a", {**answer, "data": {"k": "w"}}, copy=False)
            assert read is store.peek(cm, "default", "a")
            # a request's own body, given away, is stored as it is
            given = {"metadata": {"name": "b"}, "data": {"k": "v"}}
            store.create(cm, "default", given, owned=True, copy=False)
            assert store.peek(cm, "default", "b") is given

    asyncio.run(scenario())

"""``kubernetes_asyncio``, unmodified, against the emulator: the client dispatch's adapter uses."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

kubernetes_asyncio = pytest.importorskip("kubernetes_asyncio")
from kubernetes_asyncio import client, config, watch  # noqa: E402
from kubernetes_asyncio.client.exceptions import ApiException  # noqa: E402

from dispatch.testing.k8s import Emulator  # noqa: E402

from .conftest import pod, trainjob  # noqa: E402

TRAINER = ("trainer.kubeflow.org", "v1alpha1")


def run_async(test: Callable[[Emulator], Coroutine[Any, Any, None]]) -> Callable[[Emulator], None]:
    """Run an async test on a fresh event loop (no pytest plugin needed)."""

    @functools.wraps(test)
    def wrapper(emulator: Emulator) -> None:
        asyncio.run(asyncio.wait_for(test(emulator), timeout=30))

    return wrapper


async def _api(emulator: Emulator) -> client.ApiClient:
    return await config.new_client_from_config(str(emulator.kubeconfig))


@run_async
async def test_custom_object_lifecycle_and_conflict(emulator: Emulator) -> None:
    async with await _api(emulator) as api:
        custom = client.CustomObjectsApi(api)
        created = await custom.create_namespaced_custom_object(
            *TRAINER, "default", "trainjobs", trainjob("tj")
        )
        stale = dict(created)
        # kubernetes_asyncio picks application/json-patch+json for a dict body unless told:
        # a real server refuses that too, so the content type must be given
        with pytest.raises(ApiException) as exc:
            await custom.patch_namespaced_custom_object(
                *TRAINER, "default", "trainjobs", "tj", {"spec": {"suspend": True}}
            )
        assert exc.value.status == 400
        await custom.patch_namespaced_custom_object(
            *TRAINER,
            "default",
            "trainjobs",
            "tj",
            {"spec": {"suspend": True}},
            _content_type="application/merge-patch+json",
        )
        stale["spec"] = {**stale["spec"], "suspend": False}
        with pytest.raises(ApiException) as exc:
            await custom.replace_namespaced_custom_object(
                *TRAINER, "default", "trainjobs", "tj", stale
            )
        assert exc.value.status == 409
        assert json.loads(exc.value.body)["reason"] == "Conflict"
        # a custom resource PUT without resourceVersion is refused like on a real server
        del stale["metadata"]["resourceVersion"]
        with pytest.raises(ApiException) as exc:
            await custom.replace_namespaced_custom_object(
                *TRAINER, "default", "trainjobs", "tj", stale
            )
        assert exc.value.status == 422
        listed = await custom.list_namespaced_custom_object(*TRAINER, "default", "trainjobs")
        assert [i["metadata"]["name"] for i in listed["items"]] == ["tj"]
        assert listed["items"][0]["kind"] == "TrainJob"


@run_async
async def test_watch_resumes_with_resource_version_and_sees_bookmarks(emulator: Emulator) -> None:
    async with await _api(emulator) as api:
        core = client.CoreV1Api(api)
        listed = await core.list_namespaced_pod("default")

        async def writer() -> None:
            await asyncio.sleep(0.2)
            await core.create_namespaced_pod("default", pod("w1", {"app": "x"}))
            await core.create_namespaced_pod("default", pod("w2", {"app": "other"}))
            await core.patch_namespaced_pod(
                "w1", "default", {"metadata": {"labels": {"app": "gone"}}}
            )

        task = asyncio.create_task(writer())
        events: list[tuple[str, str]] = []
        bookmarks = 0
        w = watch.Watch()
        async with w.stream(
            core.list_namespaced_pod,
            "default",
            label_selector="app=x",
            resource_version=listed.metadata.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=5,
        ) as stream:
            async for event in stream:
                if event["type"] == "BOOKMARK":
                    bookmarks += 1
                else:
                    events.append((event["type"], event["object"].metadata.name))
                if len(events) == 2 and bookmarks:
                    break
        await task
        # leaving the selector is a DELETED event, as from the API server's watch cache
        assert events == [("ADDED", "w1"), ("DELETED", "w1")]


@run_async
async def test_watch_410_then_relist(emulator: Emulator) -> None:
    async with await _api(emulator) as api:
        core = client.CoreV1Api(api)
        old = (await core.list_namespaced_config_map("default")).metadata.resource_version
        await core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
        emulator.compact()

        async def watch_from_old() -> None:
            async with watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=5
            ) as stream:
                async for _ in stream:
                    pass

        with pytest.raises(ApiException) as exc:
            await watch_from_old()
        assert exc.value.status == 410
        fresh = await core.list_namespaced_config_map("default")
        assert [c.metadata.name for c in fresh.items] == ["c"]


@run_async
async def test_events_in_both_apis(emulator: Emulator) -> None:
    async with await _api(emulator) as api:
        core = client.CoreV1Api(api)
        await core.create_namespaced_event(
            "default",
            {
                "metadata": {"name": "e1"},
                "reason": "TrainJobResourcesCreationFailed",
                "message": "boom",
                "type": "Warning",
                "eventTime": "2025-01-01T00:00:00.000000Z",
                "reportingComponent": "trainer",
                "reportingInstance": "trainer-0",
                "action": "Reconciling",
                "involvedObject": {"kind": "TrainJob", "name": "tj", "namespace": "default"},
            },
        )
        found = await core.list_namespaced_event(
            "default", field_selector="involvedObject.kind=TrainJob,involvedObject.name=tj"
        )
        assert [e.reason for e in found.items] == ["TrainJobResourcesCreationFailed"]
        events_v1 = client.EventsV1Api(api)
        same = await events_v1.list_namespaced_event("default", field_selector="regarding.name=tj")
        assert [(e.note, e.regarding.kind) for e in same.items] == [("boom", "TrainJob")]


@run_async
async def test_foreground_deletion_order_seen_by_watch(emulator: Emulator) -> None:
    async with await _api(emulator) as api:
        custom = client.CustomObjectsApi(api)
        core = client.CoreV1Api(api)
        owner = await custom.create_namespaced_custom_object(
            "jobset.x-k8s.io",
            "v1alpha2",
            "default",
            "jobsets",
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": "js"},
                "spec": {"replicatedJobs": []},
            },
        )
        ref = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "js",
            "uid": owner["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        await core.create_namespaced_pod(
            "default", {**pod("js-0"), "metadata": {"name": "js-0", "ownerReferences": [ref]}}
        )
        rv = (await core.list_namespaced_pod("default")).metadata.resource_version
        await custom.delete_namespaced_custom_object(
            "jobset.x-k8s.io",
            "v1alpha2",
            "default",
            "jobsets",
            "js",
            body={"propagationPolicy": "Foreground"},
        )
        with pytest.raises(ApiException):
            await custom.get_namespaced_custom_object(
                "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", "js"
            )
        types = []
        async with watch.Watch().stream(
            core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=1
        ) as stream:
            async for event in stream:
                types.append(event["type"])
                break
        assert types == ["DELETED"]

"""List and watch any Kubernetes resource as raw JSON: core ``v1`` and grouped APIs alike.

The evidence watches need Pods, Events and Nodes (core ``/api/v1``) besides custom resources,
and must keep every field (the cause function reads raw objects), so both go through the
client's raw responses (``_preload_content=False``) instead of typed models. Lists are read
in pages of ``LIST_PAGE`` objects (``limit``/``continue``), so a list of thousands of objects
is never decoded at once; a list that needs only each object's name and version (a stream's
check) asks for the metadata alone (``metadata_only``). Errors leave as ``DispatchError``
(``errors.translate``); a 410 is ``Gone`` (list again; also when a page's ``continue`` token
expired).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from dispatch import jsontext
from dispatch.adapters.kubeflow.api.client import Gone, JsonObj, Resource, Session
from dispatch.adapters.kubeflow.api.errors import API_FAILURES, translate
from dispatch.model import SchedulerUnavailable

#: objects per list page (what client-go's reflector asks for)
LIST_PAGE = 500
#: objects per page of a metadata list (``metadata_only``: a few hundred bytes each)
METADATA_PAGE = 2000
#: a list of each object's metadata alone (the API server's PartialObjectMetadataList, what
#: client-go's metadata informers ask for); a server that cannot answers the whole objects
METADATA_ACCEPT = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)

_CORE_LIST = {
    # plural -> (namespaced method, cluster method)
    "pods": ("list_namespaced_pod", "list_pod_for_all_namespaces"),
    "events": ("list_namespaced_event", "list_event_for_all_namespaces"),
    "nodes": (None, "list_node"),
}


async def _request(
    session: Session, res: Resource, namespace: str | None, params: dict[str, Any], timeout: float
) -> Any:
    """The raw response of a list (or, with ``watch=True`` in ``params``, a watch) request."""
    kwargs = {k: v for k, v in params.items() if v not in (None, "")}
    kwargs.update(_preload_content=False, _request_timeout=timeout)
    if not res.group:
        namespaced, cluster = _CORE_LIST[res.plural]
        core = client.CoreV1Api(session.api)
        if res.namespaced and namespaced is not None:
            return await getattr(core, namespaced)(namespace, **kwargs)
        return await getattr(core, cluster)(**kwargs)
    if res.namespaced:
        return await session.custom.list_namespaced_custom_object(
            res.group, res.version, namespace or "", res.plural, **kwargs
        )
    return await session.custom.list_cluster_custom_object(
        res.group, res.version, res.plural, **kwargs
    )


async def _metadata_request(
    session: Session, res: Resource, namespace: str | None, params: dict[str, Any], timeout: float
) -> Any:
    """The raw response of a list of ``res``'s metadata (``METADATA_ACCEPT``); ``params`` as
    for ``_request``. The generated list methods set their own ``Accept``, so the path is
    called directly."""
    base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    scope = f"/namespaces/{namespace}" if res.namespaced and namespace else ""
    names = {"label_selector": "labelSelector", "limit": "limit", "_continue": "continue"}
    query = [(names[k], v) for k, v in params.items() if v not in (None, "")]
    return await session.api.call_api(
        f"{base}{scope}/{res.plural}",
        "GET",
        query_params=query,
        header_params={"Accept": METADATA_ACCEPT},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=timeout,
    )


async def _failed(response: Any, what: str) -> Exception:
    """The dispatch error for a non-2xx raw response."""
    try:
        body = await response.text()
    except API_FAILURES:
        body = ""
    if response.status == 410:
        return Gone(f"{what}: resourceVersion too old")
    exc = ApiException(status=response.status, reason=response.reason)
    exc.body = body
    return translate(exc, what)


async def list_pages(
    session: Session,
    res: Resource,
    namespace: str | None,
    *,
    label_selector: str = "",
    limit: int | None = None,
    metadata_only: bool = False,
) -> AsyncIterator[JsonObj]:
    """The list of ``res`` page by page (each ``{"items": [...], "metadata": {...}}``; the
    first page's ``resourceVersion`` is the list's); items get their ``kind``/``apiVersion``
    back (a list omits them). ``metadata_only``: each item may hold its ``metadata`` alone
    (``METADATA_ACCEPT``), in pages of ``METADATA_PAGE``; else pages of ``LIST_PAGE``."""
    token = ""
    limit = limit or (METADATA_PAGE if metadata_only else LIST_PAGE)
    while True:
        page = await _list_page(
            session, res, namespace, label_selector, limit, token, metadata_only=metadata_only
        )
        yield page
        token = _text(page.get("metadata"), "continue")
        if not token:
            return


async def list_raw(
    session: Session, res: Resource, namespace: str | None, *, label_selector: str = ""
) -> JsonObj:
    """The whole list of ``res`` (``{"items": [...], "metadata": {"resourceVersion"}}``),
    read in pages; see ``list_pages``."""
    items: list[Any] = []
    metadata: Any = None
    async for page in list_pages(session, res, namespace, label_selector=label_selector):
        metadata = page.get("metadata") if metadata is None else metadata
        items.extend(page.get("items") or [])
    return {"items": items, "metadata": metadata or {}}


def _text(mapping: Any, key: str) -> str:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, str) else ""


async def _list_page(
    session: Session,
    res: Resource,
    namespace: str | None,
    label_selector: str,
    limit: int,
    token: str,
    *,
    metadata_only: bool = False,
) -> JsonObj:
    what = f"list {res.plural}" + (f" in {namespace}" if res.namespaced else "")
    params = {"label_selector": label_selector, "limit": limit, "_continue": token}
    send = _metadata_request if metadata_only else _request
    try:
        response = await send(session, res, namespace, params, session.timeout)
        try:
            if response.status >= 300:
                raise await _failed(response, what)
            data = await response.json(loads=jsontext.loads)
        finally:
            response.release()
    except API_FAILURES as exc:
        raise translate(exc, what) from None
    except ValueError:
        raise SchedulerUnavailable(f"cannot {what}: unreadable answer") from None
    if not isinstance(data, dict):
        raise SchedulerUnavailable(f"cannot {what}: unreadable answer")
    if metadata_only:
        return data  # PartialObjectMetadata items, or whole ones from a server that cannot
    for item in data.get("items") or []:
        if isinstance(item, dict):
            item.setdefault("kind", res.kind)
            item.setdefault("apiVersion", res.api_version)
    return data


async def watch_raw(
    session: Session,
    res: Resource,
    namespace: str | None,
    *,
    label_selector: str,
    resource_version: str,
    timeout_seconds: int,
) -> AsyncIterator[JsonObj]:
    """Watch events (``{"type", "object"}``, bookmarks included) from ``resource_version``
    until the server ends the stream. ``Gone`` for a 410; a dropped connection is a
    ``SchedulerUnavailable`` (the caller lists again)."""
    what = f"watch {res.plural}" + (f" in {namespace}" if res.namespaced else "")
    params = {
        "label_selector": label_selector,
        "resource_version": resource_version,
        "allow_watch_bookmarks": True,
        "timeout_seconds": timeout_seconds,
        "watch": True,
    }
    try:
        response = await _request(
            session, res, namespace, params, timeout_seconds + session.timeout
        )
    except API_FAILURES as exc:
        raise translate(exc, what) from None
    try:
        if response.status >= 300:
            raise await _failed(response, what)
        while True:
            try:
                line = await response.content.readline()
            except API_FAILURES as exc:
                raise translate(exc, what) from None
            if not line:
                return
            if not line.endswith(b"\n"):
                raise SchedulerUnavailable(f"cannot {what}: the stream was cut")
            try:
                event = jsontext.loads(line)
            except ValueError:
                raise SchedulerUnavailable(f"cannot {what}: unreadable event") from None
            if not isinstance(event, dict):
                continue
            if event.get("type") == "ERROR":
                status = event.get("object") or {}
                if isinstance(status, dict) and status.get("code") == 410:
                    raise Gone(f"{what}: resourceVersion {resource_version} is too old")
                raise SchedulerUnavailable(f"cannot {what}: {status}")
            obj = event.get("object")
            if isinstance(obj, dict):
                obj.setdefault("kind", res.kind)
                obj.setdefault("apiVersion", res.api_version)
            yield event
    finally:
        response.release()

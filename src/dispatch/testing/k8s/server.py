"""The HTTP front of the emulator: Kubernetes REST paths on an aiohttp server on loopback.

One :class:`ApiServer` serves one :class:`~dispatch.testing.k8s.store.Store` on the event loop
that owns the store. Every request is counted (``accounting``), may be hit by fault injection
(``faults``) and authorization (``authorizer``), and is answered with the JSON a real API server
writes (objects, lists, ``Status`` errors, watch streams, logs).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import yaml
from aiohttp import web

from dispatch.clock import Clock, SystemClock
from dispatch.testing.k8s import discovery, errors
from dispatch.testing.k8s.accounting import RequestAccounting
from dispatch.testing.k8s.authz import Authorizer, access_review
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.faults import FaultDecision, FaultInjector
from dispatch.testing.k8s.logs import PodLogs, choose_container
from dispatch.testing.k8s.patch import APPLY_PATCH
from dispatch.testing.k8s.routing import NotAResource, RequestInfo, parse
from dispatch.testing.k8s.selectors import FieldSelector, LabelSelector
from dispatch.testing.k8s.store import ObjectList, Store
from dispatch.testing.k8s.streams import WatchOptions, serve_log, serve_watch

JsonObj = dict[str, Any]
_TRUE = ("1", "true", "True")
_INJECTED = {
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
    429: "TooManyRequests",
    403: "Forbidden",
    409: "Conflict",
}


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(obj, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
    )


def _error(exc: ApiError) -> web.Response:
    resp = _json(exc.status(), exc.code)
    resp.headers.update(exc.headers)
    return resp


def metadata_only(accept: str) -> bool:
    """Whether an ``Accept`` header asks a list for its objects' metadata alone: a media range
    ``application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`` (what client-go's
    metadata informers send) before any plain JSON one. Other ranges are served as before."""
    for media in accept.split(","):
        kind, *params = (part.strip() for part in media.split(";"))
        named = dict(p.partition("=")[::2] for p in params)
        if kind not in ("application/json", "*/*"):
            continue
        if "as" not in named:
            return False
        if named == {"as": "PartialObjectMetadataList", "g": "meta.k8s.io", "v": "v1"}:
            return True
    return False


def _int(query: dict[str, str], name: str) -> int | None:
    value = query.get(name)
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise errors.bad_request(f"invalid {name}: {value!r}") from exc


#: connections waiting to be accepted (an API server's Go listener asks for the kernel's maximum)
LISTEN_BACKLOG = 65535


class ApiServer:
    def __init__(
        self,
        store: Store,
        logs: PodLogs,
        *,
        clock: Clock,
        faults: FaultInjector,
        accounting: RequestAccounting,
        authorizer: Authorizer,
        wall: Clock | None = None,
        bookmark_interval: float = 60.0,
        git_version: str = "v1.33.0",
    ) -> None:
        self.store = store
        self.logs = logs
        self.clock = clock
        self.faults = faults
        self.accounting = accounting
        self.authorizer = authorizer
        self.wall = wall or SystemClock()
        self.bookmark_interval = bookmark_interval
        self.git_version = git_version
        self._runner: web.AppRunner | None = None
        self.url = ""
        self._watches: set[Any] = set()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # a deep accept queue (the kernel caps it at net.core.somaxconn): thousands of clients
        # connecting at once wait to be accepted; beyond the queue their handshakes are
        # dropped, retried after 1, 3, 7... s, and fail with a timeout after about two minutes
        site = web.SockSite(self._runner, sock, backlog=LISTEN_BACKLOG)
        await site.start()
        self.url = f"http://{host}:{sock.getsockname()[1]}"
        return self.url

    async def stop(self) -> None:
        for sub in list(self._watches):
            sub.close()
        if self._watches:  # let the closed watch streams end their responses cleanly
            await self.wall.sleep(0.05)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------------ dispatch

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except ApiError as exc:
            return _error(exc)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        query = dict(request.query)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        try:
            info = parse(path, request.method, query, self.store.catalog)
        except NotAResource:
            found = (
                discovery.document(self.store.catalog, path, self.git_version)
                if request.method == "GET"
                else None
            )
            self.accounting.request("get", "discovery")
            if found is None:
                raise ApiError(
                    404, "NotFound", "the server could not find the requested resource", {}
                ) from None
            return _json(found)
        self.accounting.request(info.verb, info.resource)
        fault = self.faults.decide(info.verb, info.resource, info.namespace, info.name)
        await self._inject(request, fault)
        known = (("status",) if info.rtype.status else ()) + info.rtype.subresources
        if info.subresource and info.subresource not in known:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if info.verb not in info.rtype.verbs:
            raise errors.method_not_allowed()
        group, res = info.rtype.group, info.resource
        if self.authorizer.enforce and not self.authorizer.allowed(
            info.verb, group, res, info.namespace
        ):
            raise errors.forbidden(
                group,
                info.resource,
                info.name,
                self.authorizer.message(info.verb, group, res, info.namespace),
            )
        handler: Callable[[web.Request, RequestInfo, dict[str, str], FaultDecision], Any] = {
            "get": self._get,
            "list": self._list,
            "watch": self._watch,
            "create": self._create,
            "update": self._update,
            "patch": self._patch,
            "delete": self._delete,
            "deletecollection": self._delete_collection,
        }[info.verb]
        result: web.StreamResponse = await handler(request, info, query, fault)
        return result

    async def _inject(self, request: web.Request, fault: FaultDecision) -> None:
        if fault.latency:
            await self.wall.sleep(fault.latency)
        if fault.hang is not None:
            await self.wall.sleep(fault.hang)
            if request.transport is not None:
                request.transport.close()
            raise ApiError(504, "Timeout", "injected hang")
        if fault.status == 429:
            raise errors.too_many_requests(fault.retry_after)
        if fault.status is not None:
            reason = _INJECTED.get(fault.status, "InternalError")
            raise ApiError(fault.status, reason, fault.message or f"injected fault ({reason})")

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return {}
        if "protobuf" in request.content_type or "cbor" in request.content_type:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an "
                "unknown format - accepted media types include: application/json, "
                "application/yaml",
            )
        try:
            if request.content_type == APPLY_PATCH:
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(
                f"the body of the request could not be decoded: {exc}"
            ) from exc

    # ------------------------------------------------------------------ verbs

    async def _get(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        obj = self.store.get(info.rtype, info.namespace, info.name)
        if info.subresource == "log":
            return await self._log(request, info, query, obj)
        return _json(obj)

    async def _list(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        rtype = info.rtype
        partial = metadata_only(request.headers.get("Accept", ""))
        listed: ObjectList = self.store.list(
            rtype,
            info.namespace or None,
            labels=LabelSelector.parse(query.get("labelSelector")),
            fields=FieldSelector.parse(query.get("fieldSelector"), rtype.storage, rtype.plural),
            limit=_int(query, "limit"),
            continue_token=query.get("continue"),
            metadata_only=partial,
        )
        meta: JsonObj = {"resourceVersion": str(listed.resource_version)}
        if listed.continue_token:
            meta["continue"] = listed.continue_token
            if not query.get("labelSelector") and not query.get("fieldSelector"):
                meta["remainingItemCount"] = listed.remaining
        items = listed.items
        if partial:
            kind = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"}
            return _json(
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                    "items": [{**kind, **item} for item in items],
                }
            )
        if rtype.builtin:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return _json(
            {
                "kind": rtype.list_kind,
                "apiVersion": rtype.api_version,
                "metadata": meta,
                "items": items,
            }
        )

    async def _watch(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        rtype = info.rtype
        rv = query.get("resourceVersion", "")
        since = _int(query, "resourceVersion") if rv not in ("", "0") else None
        options = WatchOptions(
            since,
            query.get("allowWatchBookmarks") in _TRUE,
            float(_int(query, "timeoutSeconds") or 0) or None,
            query.get("sendInitialEvents") in _TRUE,
        )
        if info.name:
            query["fieldSelector"] = ",".join(
                f for f in (query.get("fieldSelector"), f"metadata.name={info.name}") if f
            )
        labels = LabelSelector.parse(query.get("labelSelector"))
        fields = FieldSelector.parse(query.get("fieldSelector"), rtype.storage, rtype.plural)
        sub: Any
        try:
            sub = self.store.subscribe(
                [rtype], namespace=info.namespace or None, labels=labels, fields=fields, since=since
            )
        except ApiError as exc:
            sub = exc
        self.accounting.watch_opened(rtype.plural)
        if not isinstance(sub, ApiError):
            self._watches.add(sub)
        try:
            return await serve_watch(
                request, self.store, rtype, sub, options, self.clock, self.bookmark_interval, fault
            )
        finally:
            self._watches.discard(sub)
            self.accounting.watch_closed(rtype.plural)

    async def _create(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        if info.rtype.storage == ("authorization.k8s.io", "selfsubjectaccessreviews"):
            return _json(access_review(self.authorizer, body), 201)
        if info.name or info.subresource:
            raise errors.method_not_allowed()
        return _json(self.store.create(info.rtype, info.namespace, body), 201)

    async def _update(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        return _json(
            self.store.update(
                info.rtype, info.namespace, info.name, body, subresource=info.subresource or None
            )
        )

    async def _patch(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        body = await self._body(request)
        return _json(
            self.store.patch(
                info.rtype,
                info.namespace,
                info.name,
                request.content_type,
                body,
                subresource=info.subresource or None,
                field_manager=query.get("fieldManager"),
            )
        )

    def _delete_options(
        self, body: Any, query: dict[str, str]
    ) -> tuple[str | None, JsonObj, int | None]:
        body = body if isinstance(body, dict) else {}
        policy = body.get("propagationPolicy") or query.get("propagationPolicy")
        orphan = body.get("orphanDependents")
        if policy is None and orphan is not None:
            policy = "Orphan" if orphan else "Background"
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise errors.bad_request(f"propagationPolicy: Unsupported value: {policy!r}")
        grace = body.get("gracePeriodSeconds")
        if grace is None:
            grace = _int(query, "gracePeriodSeconds")
        return policy, body.get("preconditions") or {}, grace

    async def _delete(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        policy, preconditions, grace = self._delete_options(await self._body(request), query)
        obj, gone = self.store.delete(
            info.rtype,
            info.namespace,
            info.name,
            propagation=policy,
            preconditions=preconditions,
            grace_period_seconds=grace,
        )
        if not gone or info.rtype.storage in (("", "pods"), ("", "namespaces")):
            return _json(obj)
        rtype = info.rtype
        details: JsonObj = {"name": info.name, "kind": rtype.plural, "uid": obj["metadata"]["uid"]}
        if rtype.group:
            details["group"] = rtype.group
        return _json(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }
        )

    async def _delete_collection(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        policy, _, _ = self._delete_options(await self._body(request), query)
        rtype = info.rtype
        items = self.store.delete_collection(
            rtype,
            info.namespace or None,
            labels=LabelSelector.parse(query.get("labelSelector")),
            fields=FieldSelector.parse(query.get("fieldSelector"), rtype.storage, rtype.plural),
            propagation=policy,
        )
        return _json(
            {
                "kind": rtype.list_kind,
                "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": str(self.store.resource_version)},
                "items": items,
            }
        )

    async def _log(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], pod: JsonObj
    ) -> web.StreamResponse:
        container = choose_container(pod, query.get("container") or "")
        log = self.logs.log(info.namespace, info.name, container)
        previous = query.get("previous") in _TRUE
        if previous and log.run(previous=True) is None:
            raise errors.bad_request(
                f'previous terminated container "{container}" in pod "{info.name}" not found'
            )
        return await serve_log(
            request,
            log,
            follow=query.get("follow") in _TRUE,
            timestamps=query.get("timestamps") in _TRUE,
            tail=_int(query, "tailLines"),
            limit_bytes=_int(query, "limitBytes"),
            previous=previous,
        )

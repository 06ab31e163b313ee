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
from contextlib import AbstractAsyncContextManager, nullcontext
from contextvars import ContextVar
from typing import Any, TypeVar

import yaml
from aiohttp import web

from dispatch import jsontext
from dispatch.clock import Clock, SystemClock
from dispatch.testing.k8s import discovery, errors, printing
from dispatch.testing.k8s.accounting import RequestAccounting
from dispatch.testing.k8s.authz import (
    Authorizer,
    access_review,
    subject_access_review,
    token_request,
)
from dispatch.testing.k8s.errors import ApiError, status_details
from dispatch.testing.k8s.eviction import Eviction
from dispatch.testing.k8s.faults import FaultDecision, FaultInjector
from dispatch.testing.k8s.flowcontrol import FlowControl, FlowController, Throttled
from dispatch.testing.k8s.logs import PodLogs, choose_container
from dispatch.testing.k8s.options import (
    check_delete,
    check_list,
    check_patch,
    check_write,
    manager_or_user_agent,
)
from dispatch.testing.k8s.patch import APPLY_PATCH
from dispatch.testing.k8s.rbac import Attributes, UserInfo, forbidden_message
from dispatch.testing.k8s.routing import NotAResource, RequestInfo, parse
from dispatch.testing.k8s.selectors import FieldSelector, LabelSelector
from dispatch.testing.k8s.store import ObjectList, Store
from dispatch.testing.k8s.streams import WatchOptions, serve_log, serve_watch

JsonObj = dict[str, Any]
T = TypeVar("T")
_TRUE = ("1", "true", "True")
#: who an unauthenticated request (the emulator's administrator kubeconfig) is to admission:
#: the user of a kubeadm cluster's admin.conf
ADMIN_USER = UserInfo("kubernetes-admin", ("system:masters", "system:authenticated"))
#: the ``Warning`` header of one admission warning (``k8s.io/apiserver/pkg/warning``: code
#: 299, agent ``-``, the text quoted)
WARNING_CODE = 299
#: the request being served (each runs in its own task, hence its own context): who asks
#: (None: the administrator), and the warnings its admission gave
_ASKING: ContextVar[UserInfo | None] = ContextVar("asking", default=None)
_WARNINGS: ContextVar[list[str]] = ContextVar("warnings")
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
        body=jsontext.encode(obj),
        status=status,
        content_type="application/json",
    )


def _error(exc: ApiError) -> web.Response:
    resp = _json(exc.status(), exc.code)
    resp.headers.update(exc.headers)
    return resp


def warning_header(text: str) -> str:
    """``299 - "text"``, as the API server writes each admission warning."""
    return f"{WARNING_CODE} - {json.dumps(text, ensure_ascii=False)}"


def _user(request: web.Request) -> UserInfo:
    """Who asks, for admission: the authenticated user, else the administrator."""
    return _ASKING.get() or ADMIN_USER


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


def _attributes(info: RequestInfo) -> Attributes:
    """What RBAC is asked about a resource request."""
    return Attributes(
        info.verb,
        info.rtype.group,
        info.rtype.plural,
        info.subresource,
        info.namespace,
        info.name,
    )


def _dry_run(request: web.Request, body: Any = None) -> list[str]:
    """The ``dryRun`` values of a write: a DeleteOptions body's list, else the query's."""
    if isinstance(body, dict) and isinstance(body.get("dryRun"), list):
        return [str(v) for v in body["dryRun"]]
    return list(request.query.getall("dryRun", []))


def _manager_options(query: dict[str, str]) -> tuple[str, str]:
    return query.get("fieldManager", ""), query.get("fieldValidation", "")


def _manager(request: web.Request, query: dict[str, str]) -> str:
    """Who a write's ``managedFields`` entry names (``fieldManager`` or the user agent)."""
    return manager_or_user_agent(
        query.get("fieldManager", ""), request.headers.get("User-Agent", "")
    )


def _check_list_options(query: dict[str, str], *, watch: bool) -> None:
    check_list(
        watch=watch,
        resource_version=query.get("resourceVersion", ""),
        match=query.get("resourceVersionMatch", ""),
        send_initial_events=query.get("sendInitialEvents"),
        continue_token=query.get("continue", ""),
    )


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
        flow_control: FlowControl | None = None,
    ) -> None:
        self.store = store
        self.logs = logs
        self.clock = clock
        self.faults = faults
        self.accounting = accounting
        self.authorizer = authorizer
        self.eviction = Eviction(store, clock)
        self.wall = wall or SystemClock()
        self.bookmark_interval = bookmark_interval
        self.git_version = git_version
        self._runner: web.AppRunner | None = None
        self.url = ""
        self._watches: set[Any] = set()
        #: API Priority and Fairness (None: every request is served at once)
        self.flow = None if flow_control is None else FlowController(flow_control, self.wall.now)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        if self.flow is not None:
            app.on_response_prepare.append(self.flow.on_response_prepare)
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
        warnings: list[str] = []
        _WARNINGS.set(warnings)
        try:
            response = await self._route(request)
        except ApiError as exc:
            response = _error(exc)
        except Throttled as exc:
            self.accounting.throttled(exc.verb, exc.resource)
            response = exc.response()
        for text in warnings:
            response.headers.add("Warning", warning_header(text))
        return response

    def _admitted(self, write: Callable[[], T]) -> T:
        """Run a store write (synchronous: no other request's admission interleaves) and keep
        the warnings its admission gave for the response's headers."""
        self.store.warnings.clear()
        try:
            return write()
        finally:
            _WARNINGS.get([]).extend(self.store.warnings)
            self.store.warnings.clear()

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        query = dict(request.query)
        user = self.authorizer.authenticate(
            request.headers.get("Authorization"), self.store, self.clock.now()
        )
        _ASKING.set(user)
        if path in ("/healthz", "/readyz", "/livez"):
            if user is not None:
                self._authorize(user, Attributes(request.method.lower(), path=path))
            return web.Response(text="ok")
        try:
            info = parse(path, request.method, query, self.store.catalog)
        except NotAResource:
            async with self._priority_and_fairness(user, "get", "discovery"):
                return self._non_resource(request, user)
        async with self._priority_and_fairness(user, info.verb, info.resource, info.subresource):
            return await self._resource(request, query, user, info)

    def _priority_and_fairness(
        self, user: UserInfo | None, verb: str, resource: str, subresource: str = ""
    ) -> AbstractAsyncContextManager[None]:
        """APF's hold on a request while it is served (raises :class:`Throttled` to reject)."""
        if self.flow is None:
            return nullcontext()
        return self.flow.admit(user or ADMIN_USER, verb, resource, subresource)

    def _non_resource(self, request: web.Request, user: UserInfo | None) -> web.StreamResponse:
        path = request.path
        if user is not None:
            self._authorize(user, Attributes(request.method.lower(), path=path))
        found = (
            discovery.document(self.store.catalog, path, self.git_version)
            if request.method == "GET"
            else None
        )
        self.accounting.request("get", "discovery")
        if found is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        return _json(found)

    async def _resource(
        self, request: web.Request, query: dict[str, str], user: UserInfo | None, info: RequestInfo
    ) -> web.StreamResponse:
        self.accounting.request(info.verb, info.resource)
        fault = self.faults.decide(info.verb, info.resource, info.namespace, info.name)
        await self._inject(request, fault)
        if user is not None:
            self._authorize(user, _attributes(info))
        known = (("status",) if info.rtype.status else ()) + info.rtype.subresources
        if info.subresource and info.subresource not in known:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if info.verb not in info.rtype.verbs or (
            info.subresource in ("eviction", "token") and info.verb != "create"
        ):
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

    def _authorize(self, user: UserInfo, attrs: Attributes) -> None:
        """403, as kube-apiserver writes it, unless RBAC (and the deny rules) allow."""
        decision = self.authorizer.decide(self.store, user, attrs, rules=self.authorizer.enforce)
        if decision.allowed:
            return
        message = forbidden_message(user, attrs, decision.reason)
        if not attrs.resource_request:
            raise ApiError(403, "Forbidden", f"forbidden: {message}", {})
        raise errors.forbidden(attrs.group, attrs.resource, attrs.name, message)

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
            return jsontext.loads(raw)
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
        version = printing.table_version(request.headers.get("Accept", ""))
        if version is not None and not info.subresource:
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            return _json(self._table(info, [obj], query, version, meta))
        return _json(obj)

    async def _list(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        rtype = info.rtype
        _check_list_options(query, watch=False)
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
        version = printing.table_version(request.headers.get("Accept", ""))
        if version is not None:
            return _json(self._table(info, items, query, version, meta))
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

    def _table(
        self,
        info: RequestInfo,
        items: list[JsonObj],
        query: dict[str, str],
        version: str,
        meta: JsonObj,
    ) -> JsonObj:
        """Server-side printing (kubectl's ``as=Table``): ages against the cluster's clock."""
        return printing.table(
            info.rtype,
            items,
            self.clock.now(),
            version=version,
            include_object=query.get("includeObject"),
            list_meta=meta,
        )

    def _watch_table(
        self, request: web.Request, info: RequestInfo, query: dict[str, str]
    ) -> Callable[[JsonObj], JsonObj] | None:
        """For a watch that asked for Tables: one per event, with the column definitions in
        the first only (the API server's watch sets ``NoHeaders`` after the first event;
        kubectl keeps the columns it last saw). A bad ``includeObject`` is a 400 before the
        stream starts."""
        version = printing.table_version(request.headers.get("Accept", ""))
        if version is None:
            return None
        printing.include_policy(query.get("includeObject"))
        sent: list[bool] = []

        def render(obj: JsonObj) -> JsonObj:
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            out = self._table(info, [obj], query, version, meta)
            if sent:
                out["columnDefinitions"] = None
            sent.append(True)
            return out

        return render

    async def _watch(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        rtype = info.rtype
        _check_list_options(query, watch=True)
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
        table = self._watch_table(request, info, query)
        sub: Any
        try:
            sub = self.store.subscribe(
                [rtype], namespace=info.namespace or None, labels=labels, fields=fields, since=since
            )
        except ApiError as exc:
            sub = exc
        self.accounting.watch_opened(rtype.plural)
        live = not isinstance(sub, ApiError)  # a 410 is answered, never subscribed
        if live:
            self._watches.add(sub)
        try:
            return await serve_watch(
                request,
                self.store,
                rtype,
                sub,
                options,
                self.clock,
                self.bookmark_interval,
                fault,
                wall=self.wall,
                table=table,
            )
        finally:
            if live:
                self._watches.discard(sub)
            self.accounting.watch_closed(rtype.plural)

    async def _create(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        body = await self._body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        if info.rtype.storage == ("authorization.k8s.io", "selfsubjectaccessreviews"):
            user = self.authorizer.authenticate(
                request.headers.get("Authorization"), self.store, self.clock.now()
            )
            return _json(access_review(self.authorizer, body, user, self.store), 201)
        if info.rtype.storage == ("authorization.k8s.io", "subjectaccessreviews"):
            return _json(subject_access_review(self.authorizer, self.store, body), 201)
        if info.rtype.storage == ("", "pods") and info.subresource == "eviction" and info.name:
            dry = _dry_run(request)
            check_write("CreateOptions", dry, *_manager_options(query))
            answer = self.eviction.evict(info.namespace, info.name, body, dry_run=bool(dry))
            return _json(answer, int(answer["code"]))
        if info.rtype.storage == ("", "serviceaccounts") and info.subresource == "token":
            now = self.clock.now()
            answer = token_request(
                self.authorizer, self.store, info.namespace, info.name, body, now
            )
            return _json(answer, 201)
        if info.name or info.subresource:
            raise errors.method_not_allowed()
        dry = _dry_run(request)
        check_write("CreateOptions", dry, *_manager_options(query))
        created = self._admitted(
            lambda: self.store.create(
                info.rtype,
                info.namespace,
                body,
                field_manager=_manager(request, query),
                dry_run=bool(dry),
                user=_user(request),
                owned=True,  # the request's own decoded body, and an answer only sent
                copy=False,
            ),
        )
        return _json(created, 201)

    async def _update(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        dry_run = _dry_run(request)
        check_write("UpdateOptions", dry_run, *_manager_options(query))
        body = await self._body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        return _json(
            self._admitted(
                lambda: self.store.update(
                    info.rtype,
                    info.namespace,
                    info.name,
                    body,
                    subresource=info.subresource or None,
                    field_manager=_manager(request, query),
                    dry_run=bool(dry_run),
                    user=_user(request),
                    owned=True,
                    copy=False,
                ),
            )
        )

    async def _patch(
        self, request: web.Request, info: RequestInfo, query: dict[str, str], fault: FaultDecision
    ) -> web.StreamResponse:
        dry_run = _dry_run(request)
        apply = request.content_type == APPLY_PATCH
        force = query.get("force")
        check_patch(dry_run, *_manager_options(query), apply=apply, force=force)
        body = await self._body(request)
        # an apply that creates answers 201 Created, as the patch handler's ``wasCreated``
        created = apply and self.store.peek(info.rtype, info.namespace, info.name) is None
        return _json(
            self._admitted(
                lambda: self.store.patch(
                    info.rtype,
                    info.namespace,
                    info.name,
                    request.content_type,
                    body,
                    subresource=info.subresource or None,
                    field_manager=query.get("fieldManager") if apply else _manager(request, query),
                    force=force in _TRUE,
                    dry_run=bool(dry_run),
                    user=_user(request),
                    owned=True,
                    copy=False,
                ),
            ),
            201 if created else 200,
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
        body = await self._body(request)
        dry_run = _dry_run(request, body)
        check_delete(dry_run)
        policy, preconditions, grace = self._delete_options(body, query)
        obj, gone = self.store.delete(
            info.rtype,
            info.namespace,
            info.name,
            propagation=policy,
            preconditions=preconditions,
            grace_period_seconds=grace,
            dry_run=bool(dry_run),
        )
        if not gone or info.rtype.return_deleted:
            return _json(obj)
        rtype = info.rtype
        details = status_details(info.name, rtype.group, rtype.plural, obj["metadata"]["uid"])
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
        body = await self._body(request)
        dry_run = _dry_run(request, body)
        check_delete(dry_run)
        _check_list_options(query, watch=False)
        policy, _, _ = self._delete_options(body, query)
        rtype = info.rtype
        items = self.store.delete_collection(
            rtype,
            info.namespace or None,
            labels=LabelSelector.parse(query.get("labelSelector")),
            fields=FieldSelector.parse(query.get("fieldSelector"), rtype.storage, rtype.plural),
            propagation=policy,
            dry_run=bool(dry_run),
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

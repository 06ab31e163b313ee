"""Validating admission webhooks, called as kube-apiserver calls them.

For every create and update that built-in admission, validation and the ValidatingAdmission-
Policies accepted, :class:`ValidatingWebhooks` goes through the ValidatingWebhookConfigurations
(sorted by name) and their webhooks in order, and for each webhook
(``k8s.io/apiserver/pkg/admission/plugin/webhook``):

1. skips the writes of admissionregistration objects themselves
   (``rules.IsExemptAdmissionConfigurationResource``);
2. matches ``namespaceSelector`` (the namespace's labels; a cluster-scoped object other than a
   Namespace always matches), ``objectSelector`` (the labels of the new or of the old object),
   then ``rules`` (operations, apiGroups, apiVersions, resources with ``*``, ``*/*``,
   ``res/sub``, scope) against the version the client asked at; with ``matchPolicy:
   Equivalent`` (the v1 default), a rule naming another served version of the same stored
   resource matches too and the webhook is sent the object converted to that version
   (``generic/webhook.go`` ``ShouldCallHook``); then ``matchConditions`` (CEL,
   :mod:`dispatch.testing.k8s.cel`: all true calls, one false skips, an error with none false
   follows failurePolicy: ``Fail`` is 403 ``<resource> "<name>" is forbidden: <error>``);
3. refuses a dry run reaching a webhook whose ``sideEffects`` is not ``None``/``NoneOnDryRun``
   (400, ``admission webhook "<name>" does not support dry run``): v1 validation lets no other
   value be stored, so this guards only hand-made objects;
4. POSTs an ``admission.k8s.io/v1`` AdmissionReview over HTTPS to ``clientConfig.url`` or to
   the Service (``https://<name>.<namespace>.svc:<port><path>``), with ``?timeout=<N>s``; the
   emulator resolves no Service: :class:`ServiceRoutes` maps one to a loopback address, which
   is connected to while the certificate is still verified against ``<name>.<namespace>.svc``
   with the ``caBundle``, as kube-apiserver does;
5. a call that fails (refused connection, timeout, TLS, a status other than 200, a response it
   cannot read, a uid that is not the request's, a patch) fails the request with 500
   ``Internal error occurred: failed calling webhook "<name>": ...`` under ``failurePolicy:
   Fail`` (the default) and is passed over under ``Ignore``; a denial is ``admission webhook
   "<name>" denied the request: <message>`` with the response's status code (below 400: 400)
   (``errors/statuserror.go`` ``ToStatusErr`` as of v1.33); warnings go to
   ``store.warnings`` (the HTTP front sends them as ``Warning`` headers).

Calls are sequential and synchronous: the emulator's event loop, and every client of the
emulator, waits for the webhook. A webhook server must therefore never run on the emulator's
own event loop (it would never be answered: a deadlock until the timeout); run it in another
thread or process. Fidelity limits: DELETE and CONNECT are never sent (the store admits only
creates and updates); a PATCH is sent as an UPDATE with ``UpdateOptions``; the timeout is a
per-socket-operation timeout, not one deadline; with no configuration stored nothing is done.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import socket
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from dispatch.testing.k8s import cel, errors
from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.conversion import from_storage
from dispatch.testing.k8s.errors import ApiError, FieldError
from dispatch.testing.k8s.resources import ResourceType
from dispatch.testing.k8s.selectors import LabelSelector
from dispatch.testing.k8s.store import ValidatingRequest
from dispatch.testing.k8s.webhook_config import EXEMPT, GROUP, WEBHOOK_CONFIGURATIONS

if TYPE_CHECKING:
    from dispatch.testing.k8s.rbac import UserInfo

JsonObj = dict[str, Any]
log = logging.getLogger(__name__)

REVIEW_API = "admission.k8s.io/v1"
NAMESPACES = ("", "namespaces")
#: who writes when the store was told no one (the emulator seeding itself, a test writing
#: through the store directly): kube-apiserver's own loopback client
APISERVER_USER_NAME = "system:apiserver"
APISERVER_GROUPS = ("system:masters", "system:authenticated")


class ConditionsFailed(Exception):
    """A webhook's matchConditions could not be evaluated (the text is kube's)."""


class CallFailed(Exception):
    """A webhook could not be called or answered nonsense (``ErrCallingWebhook``): the text
    is kube's ``Reason``."""


# ---------------------------------------------------------------------------- matching


def rule_matches(
    rule: JsonObj, operation: str, rtype: ResourceType, subresource: str, namespace: str
) -> bool:
    """``rules.Matcher.Matches``: scope, operation, group, version, resource/subresource."""
    is_namespace = rtype.storage == NAMESPACES
    scope = rule.get("scope") or "*"
    if scope == "Namespaced" and (is_namespace or not namespace):
        return False
    if scope == "Cluster" and not (is_namespace or not namespace):
        return False
    ops = rule.get("operations") or []
    if "*" not in ops and operation not in ops:
        return False
    if not _exact_or_wildcard(rule.get("apiGroups") or [], rtype.group):
        return False
    if not _exact_or_wildcard(rule.get("apiVersions") or [], rtype.version):
        return False
    for item in rule.get("resources") or []:
        res, _, sub = str(item).partition("/")
        if res in ("*", rtype.plural) and sub in ("*", subresource):
            return True
    return False


def _exact_or_wildcard(items: Iterable[str], requested: str) -> bool:
    return any(item in ("*", requested) for item in items)


def matched_version(
    hook: JsonObj,
    operation: str,
    requested: ResourceType,
    equivalents: list[ResourceType],
    subresource: str,
    namespace: str,
) -> ResourceType | None:
    """The version the webhook is called with: the requested one if a rule matches it, else
    (``matchPolicy: Equivalent``) the first equivalent one a rule matches, earlier rules
    first; None: not called."""
    rules = [r for r in hook.get("rules") or [] if isinstance(r, dict)]
    if any(rule_matches(r, operation, requested, subresource, namespace) for r in rules):
        return requested
    if hook.get("matchPolicy", "Equivalent") != "Equivalent":
        return None
    for rule in rules:
        for other in equivalents:
            if other != requested and rule_matches(rule, operation, other, subresource, namespace):
                return other
    return None


def namespace_matches(
    hook: JsonObj, rtype: ResourceType, namespace: str, labels: dict[str, str] | None
) -> bool:
    """``namespace.Matcher.MatchNamespaceSelector``: ``labels`` are those of the namespace (of
    the Namespace object itself for a Namespace); cluster-scoped objects always match."""
    if not namespace and rtype.storage != NAMESPACES:
        return True
    selector = LabelSelector.from_dict(hook.get("namespaceSelector"))
    return selector.empty or selector.matches(labels or {})


def object_matches(hook: JsonObj, obj: JsonObj | None, old: JsonObj | None) -> bool:
    """``object.Matcher.MatchObjectSelector``: the new object's labels or the old one's."""
    selector = LabelSelector.from_dict(hook.get("objectSelector"))
    if selector.empty:
        return True
    return any(
        o is not None and selector.matches((o.get("metadata") or {}).get("labels") or {})
        for o in (obj, old)
    )


def conditions_match(conditions: list[JsonObj], activation: cel.Activation) -> bool:
    """``matchconditions.Matcher.Match``: all true -> True; one false -> False; else (errors,
    none false) :class:`ConditionsFailed`. Expressions compiled when the configuration was
    stored; compiled again here (cheap, and the object may predate a fix)."""
    evaluation = cel.Evaluation(activation, cel.Budget(cel.MATCH_CONDITIONS_BUDGET))
    failures: list[str] = []
    for condition in conditions:
        expression = str(condition.get("expression") or "")
        try:
            value = evaluation.evaluate(cel.compile_expression(expression))
        except cel.OutOfBudget as exc:
            raise ConditionsFailed(str(exc)) from exc
        except cel.CelError as exc:
            failures.append(str(exc))
            continue
        truth = cel.truthy(value)
        if truth is None:
            failures.append(f"expression '{expression}' must evaluate to bool")
        elif not truth:
            return False
    if failures:
        raise ConditionsFailed(failures[0] if len(failures) == 1 else f"[{', '.join(failures)}]")
    return True


# ---------------------------------------------------------------------------- the review


def user_info(user: UserInfo | None) -> JsonObj:
    """``authentication.k8s.io/v1`` UserInfo of who asks (the API server's own client when
    the store was not told)."""
    if user is None:
        return {"username": APISERVER_USER_NAME, "groups": list(APISERVER_GROUPS)}
    return {"username": user.name, "groups": list(user.groups)}


def _gvk(rtype: ResourceType) -> JsonObj:
    return {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}


def _gvr(rtype: ResourceType) -> JsonObj:
    return {"group": rtype.group, "version": rtype.version, "resource": rtype.plural}


def review(
    uid: str,
    request: AdmissionRequest,
    requested: ResourceType,
    matched: ResourceType,
) -> JsonObj:
    """The AdmissionReview v1 request (``request.CreateV1AdmissionReview``): objects in the
    matched version, ``requestKind``/``requestResource`` as the client asked."""
    meta = request.obj.get("metadata") or {}
    is_namespace = request.rtype.storage == NAMESPACES
    namespace = meta.get("name", "") if is_namespace else meta.get("namespace", "")
    options_kind = "CreateOptions" if request.operation == "CREATE" else "UpdateOptions"
    options: JsonObj = {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"}
    if request.dry_run:
        options["dryRun"] = ["All"]
    body: JsonObj = {
        "uid": uid,
        "kind": _gvk(matched),
        "resource": _gvr(matched),
        "requestKind": _gvk(requested),
        "requestResource": _gvr(requested),
        "name": meta.get("name", ""),
        "operation": request.operation,
        "userInfo": user_info(request.user),
        "object": from_storage(matched, request.rtype, request.obj),
        "oldObject": (
            from_storage(matched, request.rtype, request.old) if request.old is not None else None
        ),
        "dryRun": request.dry_run,
        "options": options,
    }
    if request.subresource:
        body["subResource"] = request.subresource
        body["requestSubResource"] = request.subresource
    if namespace:
        body["namespace"] = namespace
    return {"kind": "AdmissionReview", "apiVersion": REVIEW_API, "request": body}


# ---------------------------------------------------------------------------- the call


@dataclass(frozen=True)
class Endpoint:
    """Where a webhook is called: ``url`` (what the errors name), the address connected to
    (``host`` empty: a Service with no route, which does not resolve), the name its
    certificate must carry, and the ``caBundle`` (base64 of PEM; empty: the system's CAs)."""

    url: str
    host: str
    port: int
    server_name: str
    ca_bundle: str


@dataclass
class ServiceRoutes:
    """Services as loopback addresses: the emulator has no cluster network."""

    routes: dict[tuple[str, str, int], tuple[str, int]] = field(default_factory=dict)

    def add(self, namespace: str, name: str, port: int, address: tuple[str, int]) -> None:
        self.routes[(namespace, name, port)] = address

    def resolve(self, namespace: str, name: str, port: int) -> tuple[str, int] | None:
        return self.routes.get((namespace, name, port))


def endpoint(hook: JsonObj, routes: ServiceRoutes) -> Endpoint:
    """The endpoint of a webhook's ``clientConfig`` with the ``?timeout=`` query. A Service
    with no route is dialled at ``<name>.<namespace>.svc``, which does not resolve."""
    config = hook.get("clientConfig") or {}
    ca_bundle = str(config.get("caBundle") or "")
    query = f"?timeout={int(hook.get('timeoutSeconds') or 10)}s"
    if config.get("url"):
        url = str(config["url"])
        parts = urlsplit(url)
        host = parts.hostname or ""
        return Endpoint(url + query, host, parts.port or 443, host, ca_bundle)
    service = config.get("service") or {}
    namespace, name = str(service.get("namespace", "")), str(service.get("name", ""))
    port = int(service.get("port") or 443)
    server_name = f"{name}.{namespace}.svc"
    url = f"https://{server_name}:{port}{service.get('path') or ''}{query}"
    address = routes.resolve(namespace, name, port) or ("", port)
    return Endpoint(url, address[0], address[1], server_name, ca_bundle)


class _Connection(http.client.HTTPSConnection):
    """HTTPS to ``address`` while verifying the certificate for the connection's host name."""

    def __init__(self, point: Endpoint, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(point.server_name, point.port, timeout=timeout, context=context)
        self._point = point
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self._point.host, self._point.port), self.timeout)
        try:
            self.sock = self._tls.wrap_socket(raw, server_hostname=self._point.server_name)
        except BaseException:
            raw.close()
            raise


def tls_context(ca_bundle: str) -> ssl.SSLContext:
    """Verification with the ``caBundle`` (or the system's CAs); ValueError or SSLError for
    a bundle that is no base64 of PEM certificates."""
    if ca_bundle:
        return ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    return ssl.create_default_context()


def post(point: Endpoint, body: bytes, timeout: float) -> tuple[int, bytes]:
    """POST ``body``; the status and the response body, or :class:`CallFailed` with Go's
    text of the transport error (``Post "<url>": <error>``)."""
    path = urlsplit(point.url)
    target = (path.path or "/") + (f"?{path.query}" if path.query else "")
    if not point.host:  # the emulator has no DNS: an unrouted Service does not resolve
        raise CallFailed(
            f'failed to call webhook: Post "{point.url}": dial tcp: lookup {point.server_name}: '
            "no such host"
        )
    try:
        conn = _Connection(point, timeout, tls_context(point.ca_bundle))
    except (ValueError, ssl.SSLError) as exc:
        raise CallFailed(
            f"failed to call webhook: unable to load root certificates: {exc}"
        ) from exc
    try:
        conn.request(
            "POST",
            target,
            body,
            {
                "Content-Type": "application/json",
                "Accept": "application/json, */*",
                "User-Agent": "kube-apiserver-admission",
            },
        )
        response = conn.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise CallFailed(
            f'failed to call webhook: Post "{point.url}": {go_error(exc, point)}'
        ) from exc
    finally:
        conn.close()


def go_error(exc: BaseException, point: Endpoint) -> str:
    """What Go's HTTP client says for a transport failure (the part after ``Post "url": ``)."""
    dial = f"dial tcp {point.host}:{point.port}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"tls: failed to verify certificate: {_x509(exc, point)}"
    if isinstance(exc, ssl.SSLError):
        return f"remote error: tls: {exc.reason or exc}"
    if isinstance(exc, TimeoutError):
        return "context deadline exceeded"
    if isinstance(exc, ConnectionRefusedError):
        return f"{dial}: connect: connection refused"
    if isinstance(exc, socket.gaierror):
        return f"dial tcp: lookup {point.host}: no such host"
    if isinstance(exc, http.client.RemoteDisconnected | ConnectionResetError):
        return "EOF"
    return f"{dial}: {getattr(exc, 'strerror', None) or exc}"


def _x509(exc: ssl.SSLCertVerificationError, point: Endpoint) -> str:
    """Go's ``x509`` verification texts for the failures OpenSSL reports."""
    code = exc.verify_code
    if code == 62:  # X509_V_ERR_HOSTNAME_MISMATCH / IP_ADDRESS_MISMATCH (64)
        return f"x509: certificate is not valid for {point.server_name}"
    if code == 64:
        return f"x509: certificate is not valid for IP {point.server_name}"
    if code in (9, 10):  # not yet valid, expired
        return "x509: certificate has expired or is not yet valid"
    return "x509: certificate signed by unknown authority"


def generic_response_error(status: int, body: bytes) -> str:
    """client-go's error for a non-2xx answer that is no ``Status``
    (``apierrors.NewGenericServerResponse``)."""
    text = body.decode("utf-8", "replace").strip()
    messages = {
        400: "the server rejected our request for an unknown reason",
        401: "the server has asked for the client to provide credentials",
        403: "the server does not allow access to the requested resource",
        404: "the server could not find the requested resource",
        405: "the server does not allow this method on the requested resource",
        409: "the server reported a conflict",
        422: "the server rejected our request due to an error in our request",
        429: "the server has received too many requests and has asked us to try again later",
        503: "the server is currently unable to handle the request",
        504: "the server was unable to return a response in the time allotted, but may still "
        "be processing the request",
    }
    if status in messages:
        return messages[status]
    if status >= 500:
        return (
            f"an error on the server ({json.dumps(text)}) has prevented the request from succeeding"
        )
    return f"the server responded with the status code {status} but did not return more information"


def read_response(status: int, body: bytes, uid: str) -> JsonObj:
    """The ``response`` of a webhook's answer (``VerifyAdmissionResponse``), or CallFailed."""
    if not 200 <= status < 300:
        try:
            sent = json.loads(body)
        except ValueError:
            sent = None
        if isinstance(sent, dict) and sent.get("kind") == "Status" and sent.get("message"):
            raise CallFailed(f"failed to call webhook: {sent['message']}")
        raise CallFailed(f"failed to call webhook: {generic_response_error(status, body)}")
    try:
        answer = json.loads(body)
    except ValueError as exc:
        raise CallFailed(
            f"failed to call webhook: couldn't get version/kind; json parse error: {exc}"
        ) from exc
    if not isinstance(answer, dict):
        raise CallFailed("failed to call webhook: couldn't get version/kind; json parse error")
    invalid = "received invalid webhook response: "
    response = answer.get("response")
    if not isinstance(response, dict):
        raise CallFailed(invalid + "webhook response was absent")
    group_version, kind = str(answer.get("apiVersion") or ""), str(answer.get("kind") or "")
    if (group_version, kind) != (REVIEW_API, "AdmissionReview"):
        got_group, _, got_version = group_version.rpartition("/")
        raise CallFailed(
            invalid + "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, "
            f"got {got_group}/{got_version}, Kind={kind}"
        )
    if response.get("uid") != uid:
        raise CallFailed(
            invalid
            + f"expected response.uid={json.dumps(uid)}, got {json.dumps(response.get('uid', ''))}"
        )
    if response.get("patchType"):
        raise CallFailed(invalid + "validating webhook may not return response.patchType")
    if response.get("patch"):
        raise CallFailed(invalid + "validating webhook may not return response.patch")
    return response


def denial(name: str, result: Any) -> ApiError:
    """``webhookerrors.ToStatusErr`` (v1.33): the webhook's status, code below 400 made 400,
    the message prefixed with the webhook's name."""
    result = result if isinstance(result, dict) else {}
    code = int(result.get("code") or 0)
    if code < 400:
        code = 400
    denied = f"admission webhook {json.dumps(name)} denied the request"
    if result.get("message"):
        message = f"{denied}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied}: {result['reason']}"
    else:
        message = f"{denied} without explanation"
    details = result.get("details") if isinstance(result.get("details"), dict) else None
    return ApiError(code, str(result.get("reason") or ""), message, details)


def call_failed(name: str, reason: str) -> ApiError:
    """``apierrors.NewInternalError(&ErrCallingWebhook{...})``: 500, the cause repeated."""
    text = f"failed calling webhook {json.dumps(name)}: {reason}"
    return ApiError(
        500, "InternalError", f"Internal error occurred: {text}", {"causes": [{"message": text}]}
    )


# ---------------------------------------------------------------------------- the plugin


class ValidatingWebhooks:
    """The validating webhook admission plugin (see the module docstring). ``uid``: the id
    generator of the reviews; ``routes``: where Services are."""

    def __init__(self, uid: Callable[[], str], routes: ServiceRoutes | None = None) -> None:
        self.uid = uid
        self.routes = routes or ServiceRoutes()

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        store = request.store
        if request.rtype.storage in EXEMPT:
            return []
        config_type = store.catalog.find(GROUP, "v1", WEBHOOK_CONFIGURATIONS[1])
        configurations = store.objects(config_type) if config_type is not None else []
        if not configurations:
            return []
        requested = request.requested if isinstance(request, ValidatingRequest) else None
        requested = requested or request.rtype
        equivalents = [t for t in store.catalog if t.storage == request.rtype.storage]
        for config in configurations:
            for hook in config.get("webhooks") or []:
                matched = self._matches(hook, request, requested, equivalents)
                if matched is not None:
                    self._call(hook, request, requested, matched)
        return []

    def _namespace_labels(self, request: AdmissionRequest) -> dict[str, str] | None:
        if request.rtype.storage == NAMESPACES:
            return (request.obj.get("metadata") or {}).get("labels") or {}
        namespace = (request.obj.get("metadata") or {}).get("namespace")
        ns_type = request.store.catalog.find("", "v1", "namespaces")
        found = request.store.peek(ns_type, None, namespace) if ns_type and namespace else None
        return (found or {}).get("metadata", {}).get("labels") or {}

    def _matches(
        self,
        hook: JsonObj,
        request: AdmissionRequest,
        requested: ResourceType,
        equivalents: list[ResourceType],
    ) -> ResourceType | None:
        meta = request.obj.get("metadata") or {}
        is_namespace = request.rtype.storage == NAMESPACES
        namespace = str(meta.get("name" if is_namespace else "namespace") or "")
        if not requested.namespaced and not is_namespace:
            namespace = ""
        labels = self._namespace_labels(request) if namespace else None
        if not namespace_matches(hook, request.rtype, namespace, labels):
            return None
        if not object_matches(hook, request.obj, request.old):
            return None
        matched = matched_version(
            hook, request.operation, requested, equivalents, request.subresource or "", namespace
        )
        if matched is None or not hook.get("matchConditions"):
            return matched
        return matched if self._conditions_match(hook, request, requested, matched) else None

    def _conditions_match(
        self,
        hook: JsonObj,
        request: AdmissionRequest,
        requested: ResourceType,
        matched: ResourceType,
    ) -> bool:
        variables = review("", request, requested, matched)["request"]
        activation = cel.Activation(variables.pop("object"), variables.pop("oldObject"), variables)
        try:
            return conditions_match(list(hook["matchConditions"]), activation)
        except ConditionsFailed as exc:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                return False
            log.warning(
                "Failed evaluating match conditions, failing closed %s: %s", hook.get("name"), exc
            )
            name = str((request.obj.get("metadata") or {}).get("name") or "")
            raise errors.forbidden(requested.group, requested.plural, name, str(exc)) from exc

    def _call(
        self,
        hook: JsonObj,
        request: AdmissionRequest,
        requested: ResourceType,
        matched: ResourceType,
    ) -> None:
        name = str(hook.get("name", ""))
        if request.dry_run and hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise errors.bad_request(
                f"admission webhook {json.dumps(name)} does not support dry run"
            )
        uid = self.uid()
        point = endpoint(hook, self.routes)
        body = json.dumps(review(uid, request, requested, matched)).encode()
        try:
            status, answer = post(point, body, float(hook.get("timeoutSeconds") or 10))
            response = read_response(status, answer, uid)
        except CallFailed as exc:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                log.warning("Failed calling webhook, failing open %s: %s", name, exc)
                return
            log.warning("Failed calling webhook, failing closed %s: %s", name, exc)
            raise call_failed(name, str(exc)) from exc
        request.store.warnings.extend(str(w) for w in response.get("warnings") or [])
        if not response.get("allowed"):
            raise denial(name, response.get("status"))

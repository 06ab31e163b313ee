"""Authentication and authorization of requests.

Two kinds of caller:

* the emulator's administrator: a request without credentials (the kubeconfig the emulator
  writes). Everything is allowed unless a :class:`DenyRule` matches; rules apply to
  SelfSubjectAccessReviews (``status.allowed``) and, when ``enforce`` is true, to the requests
  themselves (403 Forbidden with the API server's message).
* a ServiceAccount: a request with a bearer token minted by :meth:`Authorizer.mint`, or
  asked for with a TokenRequest (``kubectl create token``, :func:`token_request`). It is
  authorized by the RBAC objects in the store (:mod:`dispatch.testing.k8s.rbac`), and deny
  rules too. A token that is unknown, expired, or whose ServiceAccount was deleted since, is
  401 Unauthorized.

Subject and self-subject access reviews answer with the same evaluation the requests get.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dispatch.testing.k8s import errors, rbac
from dispatch.testing.k8s.errors import ApiError, FieldError
from dispatch.testing.k8s.meta import rfc3339
from dispatch.testing.k8s.rbac import Attributes, UserInfo

if TYPE_CHECKING:
    from dispatch.testing.k8s.store import Store

JsonObj = dict[str, Any]
USER = "emulator-user"
ADMIN = UserInfo(USER, ("system:masters", rbac.AUTHENTICATED))
AUTHORIZATION = "authorization.k8s.io"


def unauthorized() -> ApiError:
    """What kube-apiserver answers a request whose credentials it cannot authenticate."""
    return ApiError(401, "Unauthorized", "Unauthorized")


@dataclass(frozen=True)
class DenyRule:
    verb: str = "*"
    resource: str = "*"  # plural, or plural/subresource
    group: str = "*"
    namespace: str = "*"

    def matches(self, verb: str, group: str, resource: str, namespace: str) -> bool:
        return (
            self.verb in ("*", verb)
            and self.resource in ("*", resource)
            and self.group in ("*", group)
            and self.namespace in ("*", namespace)
        )


@dataclass(frozen=True)
class TokenHolder:
    """The ServiceAccount a token was minted for (its uid: a token outlives no recreation),
    and when the token expires (emulated seconds; None: never)."""

    namespace: str
    name: str
    uid: str
    expires: float | None = None


class Authorizer:
    def __init__(self, *, enforce: bool = True) -> None:
        self.enforce = enforce
        self._rules: list[DenyRule] = []
        self._tokens: dict[str, TokenHolder] = {}
        self._lock = threading.Lock()

    def deny(
        self, verb: str = "*", resource: str = "*", *, group: str = "*", namespace: str = "*"
    ) -> DenyRule:
        rule = DenyRule(verb, resource, group, namespace)
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def allowed(self, verb: str, group: str, resource: str, namespace: str = "") -> bool:
        with self._lock:
            return not any(r.matches(verb, group, resource, namespace) for r in self._rules)

    @staticmethod
    def message(verb: str, group: str, resource: str, namespace: str) -> str:
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        return f'User "{USER}" cannot {verb} resource "{resource}" in API group "{group}"{where}'

    # ------------------------------------------------------------------ service accounts

    def mint(self, namespace: str, name: str, uid: str, expires: float | None = None) -> str:
        """A bearer token for ServiceAccount ``namespace/name`` with ``uid``, valid until
        ``expires`` (emulated seconds). Tokens are opaque strings (not JWTs); each call
        gives a new one."""
        with self._lock:
            token = f"emulator-sa.{uid}.{len(self._tokens) + 1}"
            self._tokens[token] = TokenHolder(namespace, name, uid, expires)
        return token

    def authenticate(
        self, authorization: str | None, store: Store, now: float | None = None
    ) -> UserInfo | None:
        """The ServiceAccount user of an ``Authorization`` header; None without one (the
        administrator). Raises 401 for credentials that do not authenticate (unknown,
        expired at ``now``, or of a ServiceAccount that is gone)."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        with self._lock:
            holder = self._tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if holder is None:
            raise unauthorized()
        if holder.expires is not None and now is not None and now >= holder.expires:
            raise unauthorized()
        sa_type = store.catalog.find("", "v1", "serviceaccounts")
        sa = store.peek(sa_type, holder.namespace, holder.name) if sa_type else None
        if sa is None or sa["metadata"].get("uid") != holder.uid:
            raise unauthorized()
        return rbac.service_account_user(holder.namespace, holder.name)

    def decide(
        self, store: Store, user: UserInfo, attrs: Attributes, *, rules: bool = True
    ) -> rbac.Decision:
        """RBAC's decision for ``user``, with deny rules applied on top (unless ``rules`` is
        false: a request when the rules are not enforced)."""
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        if (
            rules
            and attrs.resource_request
            and not self.allowed(attrs.verb, attrs.group, resource, attrs.namespace)
        ):
            return rbac.Decision(False, "denied by the emulator's authorization rules")
        return rbac.authorize(store, user, attrs)


def _attributes(spec: JsonObj) -> Attributes:
    non_resource = spec.get("nonResourceAttributes")
    if non_resource is not None:
        return Attributes(str(non_resource.get("verb", "")), path=str(non_resource.get("path", "")))
    attrs = spec.get("resourceAttributes") or {}
    return Attributes(
        str(attrs.get("verb", "")),
        str(attrs.get("group", "")),
        str(attrs.get("resource", "")),
        str(attrs.get("subresource", "")),
        str(attrs.get("namespace", "")),
        str(attrs.get("name", "")),
    )


def _review(kind: str, body: JsonObj, decision: rbac.Decision) -> JsonObj:
    status: JsonObj = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return {
        "kind": kind,
        "apiVersion": f"{AUTHORIZATION}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": body.get("spec") or {},
        "status": status,
    }


def access_review(
    authorizer: Authorizer,
    body: JsonObj,
    user: UserInfo | None = None,
    store: Store | None = None,
) -> JsonObj:
    """The answer to a SelfSubjectAccessReview ``body`` from ``user`` (None: the
    administrator, judged by the deny rules alone): its spec with ``status.allowed``."""
    spec = body.get("spec") or {}
    if user is not None and store is not None:
        return _review(
            "SelfSubjectAccessReview", body, authorizer.decide(store, user, _attributes(spec))
        )
    attrs = spec.get("resourceAttributes") or {}
    resource = attrs.get("resource", "")
    if attrs.get("subresource"):
        resource = f"{resource}/{attrs['subresource']}"
    allowed = authorizer.allowed(
        attrs.get("verb", ""), attrs.get("group", ""), resource, attrs.get("namespace", "")
    )
    reason = "" if allowed else "denied by the emulator's authorization rules"
    return _review("SelfSubjectAccessReview", body, rbac.Decision(allowed, reason))


def subject_access_review(authorizer: Authorizer, store: Store, body: JsonObj) -> JsonObj:
    """The answer to a SubjectAccessReview: RBAC's decision for ``spec.user`` and
    ``spec.groups`` (validated as the API server does)."""
    spec = body.get("spec") or {}
    name = str((body.get("metadata") or {}).get("name", ""))
    problems: list[FieldError] = []
    has_resource = spec.get("resourceAttributes") is not None
    if has_resource == (spec.get("nonResourceAttributes") is not None):
        problems.append(
            FieldError.invalid(
                "spec.resourceAttributes",
                "null" if not has_resource else spec.get("resourceAttributes"),
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        )
    if not spec.get("user") and not spec.get("groups"):
        problems.append(
            FieldError.invalid("spec.user", "", "at least one of user or group must be specified")
        )
    if problems:
        raise errors.invalid(AUTHORIZATION, "SubjectAccessReview", name, problems)
    user = UserInfo(str(spec.get("user", "")), tuple(spec.get("groups") or ()))
    decision = rbac.authorize(store, user, _attributes(spec))
    if user.name == USER and decision.allowed:
        decision = authorizer.decide(store, user, _attributes(spec))
    return _review("SubjectAccessReview", body, decision)


#: the audience of the API server's own tokens (kubeadm's and kind's ``--api-audiences``)
AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]
#: ``MinTokenAgeSec`` and ``MaxTokenAgeSec`` of the TokenRequest validation
TOKEN_AGE = (600, 2**32)


def token_request(
    authorizer: Authorizer, store: Store, namespace: str, name: str, body: JsonObj, now: float
) -> JsonObj:
    """The answer to a TokenRequest on ``serviceaccounts/<name>/token`` (what ``kubectl
    create token`` sends): a new token of the ServiceAccount, valid ``expirationSeconds``
    (default one hour) of emulated time (pkg/registry/core/serviceaccount/storage/token.go)."""
    meta = body.get("metadata") or {}
    spec = dict(body.get("spec") or {})
    problems: list[FieldError] = []
    if meta.get("name") and meta["name"] != name:
        problems.append(
            FieldError.invalid(
                "metadata.name", meta["name"], "must match the service account name if specified"
            )
        )
    if meta.get("namespace") and meta["namespace"] != namespace:
        problems.append(
            FieldError.invalid(
                "metadata.namespace",
                meta["namespace"],
                "must match the service account namespace if specified",
            )
        )
    if problems:
        raise errors.invalid("authentication.k8s.io", "TokenRequest", name, problems)
    sa_type = store.catalog.find("", "v1", "serviceaccounts")
    if sa_type is None:
        raise errors.not_found("", "serviceaccounts", name)
    account = store.get(sa_type, namespace, name)
    seconds = int(spec.get("expirationSeconds") or 3600)
    if seconds < TOKEN_AGE[0]:
        problems.append(
            FieldError.invalid(
                "spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes"
            )
        )
    if seconds > TOKEN_AGE[1]:
        problems.append(
            FieldError.invalid(
                "spec.expirationSeconds",
                seconds,
                "may not specify a duration larger than 2^32 seconds",
            )
        )
    if problems:
        raise errors.invalid("authentication.k8s.io", "TokenRequest", name, problems)
    token = authorizer.mint(namespace, name, account["metadata"]["uid"], now + seconds)
    return {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": rfc3339(now)},
        "spec": {
            "audiences": spec.get("audiences") or list(AUDIENCES),
            "expirationSeconds": seconds,
            "boundObjectRef": spec.get("boundObjectRef"),
        },
        "status": {"token": token, "expirationTimestamp": rfc3339(now + seconds)},
    }

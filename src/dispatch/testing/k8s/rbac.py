"""RBAC: whether a user may make a request, by the Roles, ClusterRoles and their bindings in
the store, as kube-apiserver's RBAC authorizer decides it
(plugin/pkg/auth/authorizer/rbac/rbac.go and pkg/apis/rbac/v1/evaluation_helpers.go).

:func:`authorize` is a pure reading of the store: ClusterRoleBindings first, then (for a
namespaced request) the RoleBindings of the namespace; the first rule of a bound role that
covers the request allows it, with the reason the real authorizer gives (``RBAC: allowed by
RoleBinding "x/ns" of Role "y" to ServiceAccount "sa/ns"``). Nothing allows: no opinion,
which the server answers with 403; a binding whose role is missing adds "RBAC: role... not
found" to the reason, as there. There is no deny in RBAC.

Rules match as in Kubernetes: ``verbs``, ``apiGroups`` and ``resources`` by value or ``*``
(``pods/log`` for a subresource, ``*/log`` for it on any resource), ``resourceNames`` only
requests that name an object, ``nonResourceURLs`` by value, ``*`` or a ``prefix*``. Subjects:
``User`` by name, ``Group`` by the user's groups, ``ServiceAccount`` by namespace (a
RoleBinding's own when not given) and name. Aggregated ClusterRoles (``aggregationRule``) are
not aggregated, and role escalation checks are not made: the emulator's administrator writes
the RBAC objects.

:func:`bootstrap_policy` is the part of the API server's bootstrap policy every user relies
on: discovery, health and self-reviews for any authenticated user; ``cluster-admin`` for the
``system:masters`` group. :class:`RbacStrategy` is the RBAC registry's defaulting and
validation of the objects themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dispatch.testing.k8s.errors import FieldError, FieldErrorType

if TYPE_CHECKING:
    from dispatch.testing.k8s.admission import AdmissionRequest
    from dispatch.testing.k8s.store import Store

JsonObj = dict[str, Any]
GROUP = "rbac.authorization.k8s.io"
SA_PREFIX = "system:serviceaccount:"
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()


def service_account_user(namespace: str, name: str) -> UserInfo:
    """The user a ServiceAccount token authenticates as, with its groups."""
    return UserInfo(
        f"{SA_PREFIX}{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
    )


@dataclass(frozen=True)
class Attributes:
    """One request as the authorizer sees it: a resource request (``resource`` set) or a
    non-resource one (``path`` set)."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def resource_request(self) -> bool:
        return not self.path


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def _matches(values: list[str] | None, wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values or [])


def _resource_matches(rule: JsonObj, attrs: Attributes) -> bool:
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    for resource in rule.get("resources") or []:
        if resource in ("*", combined):
            return True
        if attrs.subresource and resource == f"*/{attrs.subresource}":
            return True
    return False


def rule_allows(rule: JsonObj, attrs: Attributes) -> bool:
    """``RuleAllows``."""
    if not _matches(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        return any(
            url in ("*", attrs.path) or (url.endswith("*") and attrs.path.startswith(url[:-1]))
            for url in rule.get("nonResourceURLs") or []
        )
    names = rule.get("resourceNames") or []
    return (
        _matches(rule.get("apiGroups"), attrs.group)
        and _resource_matches(rule, attrs)
        and (not names or attrs.name in names)
    )


def _applies(subject: JsonObj, user: UserInfo, namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return bool(user.name == name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and user.name == f"{SA_PREFIX}{sa_namespace}:{name}"
    return False


def _describe(subject: JsonObj, namespace: str) -> str:
    """``describeSubject``."""
    if subject.get("kind") == "ServiceAccount":
        where = subject.get("namespace") or namespace
        return f'ServiceAccount "{subject.get("name")}/{where}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


def _objects(store: Store, plural: str) -> list[JsonObj]:
    rtype = store.catalog.find(GROUP, "v1", plural)
    return store.objects(rtype) if rtype is not None else []


def _role(store: Store, kind: str, name: str, namespace: str) -> JsonObj | None:
    rtype = store.catalog.find(GROUP, "v1", "clusterroles" if kind == "ClusterRole" else "roles")
    found = store.peek(rtype, namespace if kind == "Role" else None, name) if rtype else None
    if found is None and kind == "ClusterRole":
        return _BOOTSTRAP_ROLES.get(name)
    return found


def _bindings(store: Store, namespace: str) -> Iterator[tuple[JsonObj, str]]:
    """Each binding to consider, with the namespace its subjects default to."""
    stored = _objects(store, "clusterrolebindings")
    names = {b["metadata"]["name"] for b in stored}
    for binding in [
        *stored,
        *(b for b in _BOOTSTRAP_BINDINGS if b["metadata"]["name"] not in names),
    ]:
        yield binding, ""
    if namespace:
        for binding in _objects(store, "rolebindings"):
            if binding["metadata"].get("namespace") == namespace:
                yield binding, namespace


def authorize(store: Store, user: UserInfo, attrs: Attributes) -> Decision:
    """Whether ``user`` may make the request ``attrs`` (see the module docstring)."""
    problems: list[str] = []
    for binding, namespace in _bindings(store, attrs.namespace):
        subject = next(
            (s for s in binding.get("subjects") or [] if _applies(s, user, namespace)), None
        )
        if subject is None:
            continue
        ref = binding.get("roleRef") or {}
        kind, role_name = str(ref.get("kind", "")), str(ref.get("name", ""))
        role = _role(store, kind, role_name, namespace)
        if role is None:
            plural = "clusterrole" if kind == "ClusterRole" else "role"
            problems.append(f'{plural}.{GROUP} "{role_name}" not found')
            continue
        if any(rule_allows(rule, attrs) for rule in role.get("rules") or []):
            m = binding["metadata"]
            label = (
                f'RoleBinding "{m["name"]}/{namespace}"'
                if namespace
                else f'ClusterRoleBinding "{m["name"]}"'
            )
            return Decision(
                True,
                f'RBAC: allowed by {label} of {kind} "{role_name}" to '
                f"{_describe(subject, namespace)}",
            )
    reason = f"RBAC: [{', '.join(problems)}]" if len(problems) > 1 else ""
    if len(problems) == 1:
        reason = f"RBAC: {problems[0]}"
    return Decision(False, reason)


def forbidden_message(user: UserInfo, attrs: Attributes, reason: str = "") -> str:
    """The text after "is forbidden: " in a 403, as ``responsewriters.Forbidden`` writes it."""
    if not attrs.resource_request:
        text = f'User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        where = (
            f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
        )
        text = (
            f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group '
            f'"{attrs.group}"{where}'
        )
    return f"{text}: {reason}" if reason else text


def _cluster_role(name: str, rules: list[JsonObj]) -> JsonObj:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": rules,
    }


def _cluster_binding(name: str, groups: list[str]) -> JsonObj:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups],
    }


def bootstrap_policy() -> list[JsonObj]:
    """The ClusterRoles and ClusterRoleBindings of the bootstrap policy the emulator keeps
    (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go). They are built in, not
    stored (``kubectl get clusterroles`` does not list them; a stored object of the same name
    takes their place): seeding them would shift every uid and generated name the seeded
    identity source hands out after it."""
    health = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
    discovery = ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", *health]
    reviews = [
        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
         "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
        {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
         "resources": ["selfsubjectreviews"]},
    ]  # fmt: skip
    return [
        _cluster_role(
            "cluster-admin",
            [
                {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]},
            ],
        ),
        _cluster_role("system:discovery", [{"verbs": ["get"], "nonResourceURLs": discovery}]),
        _cluster_role("system:basic-user", reviews),
        _cluster_role("system:public-info-viewer", [{"verbs": ["get"], "nonResourceURLs": health}]),
        _cluster_binding("cluster-admin", ["system:masters"]),
        _cluster_binding("system:discovery", [AUTHENTICATED]),
        _cluster_binding("system:basic-user", [AUTHENTICATED]),
        _cluster_binding("system:public-info-viewer", [AUTHENTICATED, "system:unauthenticated"]),
    ]


_BOOTSTRAP = bootstrap_policy()
_BOOTSTRAP_ROLES = {o["metadata"]["name"]: o for o in _BOOTSTRAP if o["kind"] == "ClusterRole"}
_BOOTSTRAP_BINDINGS = [o for o in _BOOTSTRAP if o["kind"] == "ClusterRoleBinding"]


# --------------------------------------------------------------------------------- strategy

ROLES = {"roles": True, "clusterroles": False}  # plural -> namespaced
BINDINGS = {"rolebindings": ("Role", "ClusterRole"), "clusterrolebindings": ("ClusterRole",)}
SUBJECT_KINDS = ("ServiceAccount", "User", "Group")


def _go_strings(values: list[str]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _invalid(path: str, shown: str, detail: str) -> FieldError:
    """An Invalid field error whose value is shown as Go prints it (``%#v``)."""
    return FieldError(FieldErrorType.INVALID, path, f"{shown}: {detail}")


def rule_errors(rule: JsonObj, namespaced: bool, path: str) -> list[FieldError]:
    """``ValidatePolicyRule``."""
    found: list[FieldError] = []
    if not rule.get("verbs"):
        found.append(FieldError.required(f"{path}.verbs", "verbs must contain at least one value"))
    urls = list(rule.get("nonResourceURLs") or [])
    if urls:
        if namespaced:
            found.append(
                _invalid(
                    f"{path}.nonResourceURLs",
                    _go_strings(urls),
                    "namespaced rules cannot apply to non-resource URLs",
                )
            )
        if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
            found.append(
                _invalid(
                    f"{path}.nonResourceURLs",
                    _go_strings(urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            )
        return found
    if not rule.get("apiGroups"):
        found.append(
            FieldError.required(
                f"{path}.apiGroups", "resource rules must supply at least one api group"
            )
        )
    if not rule.get("resources"):
        found.append(
            FieldError.required(
                f"{path}.resources", "resource rules must supply at least one resource"
            )
        )
    return found


def _role_ref(ref: JsonObj) -> str:
    return (
        f'rbac.RoleRef{{APIGroup:"{ref.get("apiGroup", "")}", Kind:"{ref.get("kind", "")}", '
        f'Name:"{ref.get("name", "")}"}}'
    )


def binding_errors(
    binding: JsonObj, kinds: tuple[str, ...], namespaced: bool, old: JsonObj | None
) -> list[FieldError]:
    """``ValidateRoleBinding`` / ``ValidateClusterRoleBinding`` (and their updates)."""
    found: list[FieldError] = []
    ref = binding.get("roleRef") or {}
    if ref.get("apiGroup") != GROUP:
        found.append(FieldError.not_supported("roleRef.apiGroup", ref.get("apiGroup", ""), [GROUP]))
    if ref.get("kind") not in kinds:
        found.append(FieldError.not_supported("roleRef.kind", ref.get("kind", ""), kinds))
    if not ref.get("name"):
        found.append(FieldError.required("roleRef.name"))
    for i, subject in enumerate(binding.get("subjects") or []):
        path = f"subjects[{i}]"
        if not subject.get("name"):
            found.append(FieldError.required(f"{path}.name"))
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            if subject.get("apiGroup"):
                found.append(
                    FieldError.not_supported(f"{path}.apiGroup", subject["apiGroup"], [""])
                )
            if not namespaced and not subject.get("namespace"):
                found.append(FieldError.required(f"{path}.namespace"))
        elif kind in ("User", "Group"):
            if subject.get("apiGroup") != GROUP:
                found.append(
                    FieldError.not_supported(
                        f"{path}.apiGroup", subject.get("apiGroup", ""), [GROUP]
                    )
                )
        else:
            found.append(FieldError.not_supported(f"{path}.kind", kind or "", SUBJECT_KINDS))
    if old is not None and (old.get("roleRef") or {}) != ref:
        found.append(_invalid("roleRef", _role_ref(ref), "cannot change roleRef"))
    return found


class RbacStrategy:
    """The RBAC registry's defaulting and validation, as an admission plugin: a binding's
    ``roleRef.apiGroup`` and its User and Group subjects' ``apiGroup`` default to
    rbac.authorization.k8s.io (``SetDefaults_RoleBinding``/``SetDefaults_Subject``); rules,
    role references and subjects are validated; ``roleRef`` cannot change."""

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        group, plural = request.rtype.storage
        if group != GROUP:
            return []
        obj = request.obj
        if plural in ROLES:
            return [
                error
                for i, rule in enumerate(obj.get("rules") or [])
                for error in rule_errors(rule, ROLES[plural], f"rules[{i}]")
            ]
        if plural not in BINDINGS:
            return []
        ref = obj.get("roleRef")
        if isinstance(ref, dict) and not ref.get("apiGroup"):
            ref["apiGroup"] = GROUP
        for subject in obj.get("subjects") or []:
            if subject.get("kind") in ("User", "Group") and not subject.get("apiGroup"):
                subject["apiGroup"] = GROUP
        return binding_errors(obj, BINDINGS[plural], plural == "rolebindings", request.old)

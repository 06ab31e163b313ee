"""``admissionregistration.k8s.io/v1`` objects: their defaults and the API server's validation.

ValidatingWebhookConfiguration, ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding
are defaulted as ``k8s.io/api/admissionregistration/v1`` ``SetDefaults_*`` do (failurePolicy
``Fail``, matchPolicy ``Equivalent``, empty selectors, timeoutSeconds 10, rule scope ``*``,
service port 443) and validated as ``pkg/apis/admissionregistration/validation`` does on
create and update (required fields, enums, webhook names unique and fully qualified,
admissionReviewVersions, sideEffects, clientConfig with exactly one of url or service,
timeoutSeconds 1-30, rules, matchConditions that compile with :mod:`dispatch.testing.k8s.cel`).
Messages are kube's. One emulator limit is refused here with a message saying so, never
silently ignored: a webhook whose admissionReviewVersions lacks ``v1`` (the emulator speaks
AdmissionReview v1 only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from dispatch.testing.k8s import cel
from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.errors import FieldError, FieldErrorType
from dispatch.testing.k8s.policies import ValidatingPolicies
from dispatch.testing.k8s.validation import DNS1123_SUBDOMAIN, SUBDOMAIN_MSG

if TYPE_CHECKING:
    from dispatch.testing.k8s.store import Store

JsonObj = dict[str, Any]
GROUP = "admissionregistration.k8s.io"
WEBHOOK_CONFIGURATIONS = (GROUP, "validatingwebhookconfigurations")
POLICIES = (GROUP, "validatingadmissionpolicies")
BINDINGS = (GROUP, "validatingadmissionpolicybindings")
#: the resources whose writes no webhook and no policy ever sees (``rules.
#: IsExemptAdmissionConfigurationResource``): a broken webhook cannot lock itself in
EXEMPT = frozenset(
    {
        WEBHOOK_CONFIGURATIONS,
        POLICIES,
        BINDINGS,
        (GROUP, "mutatingwebhookconfigurations"),
        (GROUP, "mutatingadmissionpolicies"),
        (GROUP, "mutatingadmissionpolicybindings"),
    }
)

FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
SIDE_EFFECTS = ("None", "NoneOnDryRun")  # v1 accepts only these
REVIEW_VERSIONS = ("v1", "v1beta1")
OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES = ("*", "Cluster", "Namespaced")
VALIDATION_ACTIONS = ("Audit", "Deny", "Warn")
URL_FORM = "; desired format: https://host[/path]"


# ---------------------------------------------------------------------------- defaults


def _default_rules(rules: Any) -> None:
    for rule in rules if isinstance(rules, list) else []:
        if isinstance(rule, dict):
            rule.setdefault("scope", "*")


def default_webhook(hook: JsonObj) -> None:
    """``SetDefaults_ValidatingWebhook``, ``SetDefaults_Rule``, ``SetDefaults_ServiceReference``."""
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    hook.setdefault("namespaceSelector", {})
    hook.setdefault("objectSelector", {})
    hook.setdefault("timeoutSeconds", 10)
    _default_rules(hook.get("rules"))
    service = (hook.get("clientConfig") or {}).get("service")
    if isinstance(service, dict):
        service.setdefault("port", 443)


def default_match_resources(match: Any) -> None:
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    _default_rules(match.get("resourceRules"))
    _default_rules(match.get("excludeResourceRules"))


# ---------------------------------------------------------------------------- rules


def _wildcard_mix(path: str, items: list[Any], what: str) -> list[FieldError]:
    if len(items) > 1 and "*" in items:
        return [FieldError.invalid(path, items, f"if '*' is present, must not specify {what}")]
    return []


def _resources_errors(path: str, resources: list[Any]) -> list[FieldError]:
    """``validateResources``: ``*`` and ``*/*`` exclude the forms they already cover."""
    found = [FieldError.required(f"{path}[{i}]") for i, res in enumerate(resources) if not res]
    plain = [r for r in resources if r and "/" not in str(r)]
    if "*" in plain and len(plain) > 1:
        found.append(
            FieldError.invalid(
                path,
                resources,
                "if '*' is present, must not specify other resources without subresources",
            )
        )
    if "*/*" in resources and len(resources) > 1:
        found.append(
            FieldError.invalid(
                path, resources, "if '*/*' is present, must not specify other resources"
            )
        )
    return found


def rule_errors(path: str, rule: Any, *, operations: bool) -> list[FieldError]:
    """``validateRuleWithOperations`` / ``validateRule``."""
    if not isinstance(rule, dict):
        return [FieldError.invalid(path, rule, "must be an object")]
    found: list[FieldError] = []
    if operations:
        ops = rule.get("operations") or []
        if not ops:
            found.append(FieldError.required(f"{path}.operations"))
        found += _wildcard_mix(f"{path}.operations", ops, "other operations")
        for i, op in enumerate(ops):
            if op not in OPERATIONS:
                found.append(FieldError.not_supported(f"{path}.operations[{i}]", op, OPERATIONS))
    groups = rule.get("apiGroups") or []
    if not groups:
        found.append(FieldError.required(f"{path}.apiGroups"))
    found += _wildcard_mix(f"{path}.apiGroups", groups, "other API groups")
    versions = rule.get("apiVersions") or []
    if not versions:
        found.append(FieldError.required(f"{path}.apiVersions"))
    found += _wildcard_mix(f"{path}.apiVersions", versions, "other API versions")
    for i, version in enumerate(versions):
        if not version:
            found.append(FieldError.required(f"{path}.apiVersions[{i}]"))
    resources = rule.get("resources") or []
    if not resources:
        found.append(FieldError.required(f"{path}.resources"))
    found += _resources_errors(f"{path}.resources", resources)
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        found.append(FieldError.not_supported(f"{path}.scope", scope, SCOPES))
    return found


# ---------------------------------------------------------------------------- webhooks


def _client_config_errors(path: str, config: Any) -> list[FieldError]:
    """``validateWebhookClientConfig``, ``ValidateWebhookURL`` (https only),
    ``ValidateWebhookService``."""
    config = config if isinstance(config, dict) else {}
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [FieldError.required(path, "exactly one of url or service is required")]
    if url is not None:
        return _url_errors(f"{path}.url", str(url))
    return _service_errors(f"{path}.service", service if isinstance(service, dict) else {})


def _url_errors(path: str, url: str) -> list[FieldError]:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises here, as Go's url.Parse does)
    except ValueError as exc:
        return [FieldError.required(path, f"url must be a valid URL: {exc}{URL_FORM}")]
    found = []
    if parts.scheme != "https":
        found.append(
            FieldError.invalid(
                path, parts.scheme, "'https' is the only allowed URL scheme" + URL_FORM
            )
        )
    if not parts.netloc.rpartition("@")[2]:
        found.append(FieldError.invalid(path, "", "host must be specified" + URL_FORM))
    if "@" in parts.netloc:
        user = parts.netloc.rpartition("@")[0]
        found.append(FieldError.invalid(path, user, "user information is not permitted in the URL"))
    if parts.fragment:
        found.append(
            FieldError.invalid(path, parts.fragment, "fragments are not permitted in the URL")
        )
    if parts.query:
        found.append(
            FieldError.invalid(path, parts.query, "query parameters are not permitted in the URL")
        )
    return found


def _service_errors(path: str, service: JsonObj) -> list[FieldError]:
    found = []
    if not service.get("name"):
        found.append(FieldError.required(f"{path}.name", "service name is required"))
    if not service.get("namespace"):
        found.append(FieldError.required(f"{path}.namespace", "service namespace is required"))
    port = service.get("port", 443)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        found.append(
            FieldError.invalid(
                f"{path}.port", port, "port is not valid: must be between 1 and 65535, inclusive"
            )
        )
    svc_path = service.get("path")
    if svc_path is not None and svc_path != "" and not str(svc_path).startswith("/"):
        found.append(FieldError.invalid(f"{path}.path", svc_path, "must start with a '/'"))
    return found


def _match_condition_errors(path: str, conditions: Any) -> list[FieldError]:
    """``validateMatchConditions``: at most 64, names unique, expressions that compile."""
    conditions = conditions if isinstance(conditions, list) else []
    found: list[FieldError] = []
    if len(conditions) > 64:
        found.append(FieldError.too_many(path, len(conditions), 64))
    names: set[str] = set()
    for i, cond in enumerate(conditions):
        cond = cond if isinstance(cond, dict) else {}
        name = cond.get("name") or ""
        if not name:
            found.append(FieldError.required(f"{path}[{i}].name"))
        elif name in names:
            found.append(FieldError(FieldErrorType.DUPLICATE, f"{path}[{i}].name", "", name))
        names.add(name)
        expression = str(cond.get("expression") or "")
        if not expression:
            found.append(FieldError.required(f"{path}[{i}].expression"))
            continue
        try:
            cel.compile_expression(expression)
        except cel.CompileError as exc:
            found.append(FieldError.invalid(f"{path}[{i}].expression", expression, str(exc)))
    return found


def webhook_errors(path: str, hook: JsonObj) -> list[FieldError]:
    """``validateValidatingWebhook`` for v1 (sideEffects and admissionReviewVersions required)."""
    found: list[FieldError] = []
    name = str(hook.get("name") or "")
    if not name:
        found.append(FieldError.required(f"{path}.name"))
    else:
        if len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
            found.append(FieldError.invalid(f"{path}.name", name, SUBDOMAIN_MSG))
        if len(name.split(".")) < 3:
            found.append(
                FieldError.invalid(
                    f"{path}.name",
                    name,
                    "should be a domain with at least three segments separated by dots",
                )
            )
    for i, rule in enumerate(hook.get("rules") or []):
        found += rule_errors(f"{path}.rules[{i}]", rule, operations=True)
    policy = hook.get("failurePolicy")
    if policy not in FAILURE_POLICIES:
        found.append(FieldError.not_supported(f"{path}.failurePolicy", policy, FAILURE_POLICIES))
    match = hook.get("matchPolicy")
    if match not in MATCH_POLICIES:
        found.append(FieldError.not_supported(f"{path}.matchPolicy", match, MATCH_POLICIES))
    side = hook.get("sideEffects")
    if side is None:
        found.append(
            FieldError.required(f"{path}.sideEffects", "must specify one of None, NoneOnDryRun")
        )
    elif side not in SIDE_EFFECTS:
        found.append(FieldError.not_supported(f"{path}.sideEffects", side, SIDE_EFFECTS))
    timeout = hook.get("timeoutSeconds")
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 30:
        found.append(
            FieldError.invalid(
                f"{path}.timeoutSeconds",
                timeout,
                "the timeout value must be between 1 and 30 seconds",
            )
        )
    found += _review_versions_errors(f"{path}.admissionReviewVersions", hook)
    found += _client_config_errors(f"{path}.clientConfig", hook.get("clientConfig"))
    found += _match_condition_errors(f"{path}.matchConditions", hook.get("matchConditions"))
    return found


def _review_versions_errors(path: str, hook: JsonObj) -> list[FieldError]:
    versions = hook.get("admissionReviewVersions") or []
    if not versions:
        return [FieldError.required(path, "must specify one of v1, v1beta1")]
    found: list[FieldError] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            found.append(FieldError.invalid(f"{path}[{i}]", version, "duplicate version"))
        seen.add(version)
    if not seen & set(REVIEW_VERSIONS):
        found.append(FieldError.invalid(path, versions, "must include at least one of v1, v1beta1"))
    elif "v1" not in seen:
        found.append(
            FieldError.forbidden(
                path,
                "the emulator sends AdmissionReview v1 only: include v1 (not supported by the emulator)",
            )
        )
    return found


def configuration_errors(obj: JsonObj) -> list[FieldError]:
    """``ValidateValidatingWebhookConfiguration``: every webhook, names unique."""
    found: list[FieldError] = []
    names: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        path = f"webhooks[{i}]"
        if not isinstance(hook, dict):
            found.append(FieldError.invalid(path, hook, "must be an object"))
            continue
        found += webhook_errors(path, hook)
        name = str(hook.get("name") or "")
        if name and name in names:
            found.append(FieldError(FieldErrorType.DUPLICATE, f"{path}.name", "", name))
        names.add(name)
    return found


# ---------------------------------------------------------------------------- policies


def policy_errors(obj: JsonObj) -> list[FieldError]:
    """``ValidateValidatingAdmissionPolicy``: the structure (expressions are compiled by the
    policy plugin when it evaluates them)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [FieldError.required("spec")]
    found: list[FieldError] = []
    policy = spec.get("failurePolicy")
    if policy not in FAILURE_POLICIES:
        found.append(FieldError.not_supported("spec.failurePolicy", policy, FAILURE_POLICIES))
    match = spec.get("matchConstraints")
    if not isinstance(match, dict):
        found.append(FieldError.required("spec.matchConstraints"))
    else:
        rules = match.get("resourceRules") or []
        if not rules:
            found.append(FieldError.required("spec.matchConstraints.resourceRules"))
        found += _match_resources_errors("spec.matchConstraints", match)
    validations = spec.get("validations") or []
    if not validations and not spec.get("auditAnnotations"):
        found.append(
            FieldError.required(
                "spec.validations", "validations or auditAnnotations must contain at least one item"
            )
        )
    for i, item in enumerate(validations):
        item = item if isinstance(item, dict) else {}
        if not item.get("expression"):
            found.append(FieldError.required(f"spec.validations[{i}].expression"))
    return found


def _match_resources_errors(path: str, match: JsonObj) -> list[FieldError]:
    found: list[FieldError] = []
    policy = match.get("matchPolicy")
    if policy is not None and policy not in MATCH_POLICIES:
        found.append(FieldError.not_supported(f"{path}.matchPolicy", policy, MATCH_POLICIES))
    for key in ("resourceRules", "excludeResourceRules"):
        for i, rule in enumerate(match.get(key) or []):
            found += rule_errors(f"{path}.{key}[{i}]", rule, operations=True)
    return found


def binding_errors(obj: JsonObj) -> list[FieldError]:
    """``ValidateValidatingAdmissionPolicyBinding``."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [FieldError.required("spec")]
    found: list[FieldError] = []
    if not spec.get("policyName"):
        found.append(FieldError.required("spec.policyName"))
    actions = spec.get("validationActions") or []
    if not actions:
        found.append(FieldError.required("spec.validationActions"))
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action in seen:
            found.append(
                FieldError(FieldErrorType.DUPLICATE, f"spec.validationActions[{i}]", "", action)
            )
        elif action not in VALIDATION_ACTIONS:
            found.append(
                FieldError.not_supported(f"spec.validationActions[{i}]", action, VALIDATION_ACTIONS)
            )
        seen.add(action)
    if {"Deny", "Warn"} <= seen:
        found.append(
            FieldError.invalid(
                "spec.validationActions",
                actions,
                "must not contain both Deny and Warn (repeating the same validation failure "
                "information in the API response and headers serves no purpose)",
            )
        )
    match = spec.get("matchResources")
    if isinstance(match, dict):
        found += _match_resources_errors("spec.matchResources", match)
    return found


# ---------------------------------------------------------------------------- the plugin


class AdmissionRegistration:
    """The admission plugin defaulting and validating the three kinds (main resource only:
    a VAP's ``/status`` write is not validated here, as its status strategy does not)."""

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        storage = request.rtype.storage
        if request.subresource or storage not in (WEBHOOK_CONFIGURATIONS, POLICIES, BINDINGS):
            return []
        obj = request.obj
        if storage == WEBHOOK_CONFIGURATIONS:
            for hook in obj.get("webhooks") or []:
                if isinstance(hook, dict):
                    default_webhook(hook)
            return configuration_errors(obj)
        spec = obj.get("spec")
        if storage == POLICIES:
            if isinstance(spec, dict):
                spec.setdefault("failurePolicy", "Fail")
                default_match_resources(spec.get("matchConstraints"))
            return policy_errors(obj)
        if isinstance(spec, dict):
            default_match_resources(spec.get("matchResources"))
        return binding_errors(obj)


def validating_policies(store: Store) -> ValidatingPolicies:
    """The ValidatingAdmissionPolicy plugin reading ``store`` (policies, bindings, namespaces,
    the served types)."""
    group = GROUP

    def load() -> tuple[list[JsonObj], list[JsonObj]]:
        policy_type = store.catalog.find(group, "v1", POLICIES[1])
        binding_type = store.catalog.find(group, "v1", BINDINGS[1])
        bindings = store.objects(binding_type) if binding_type is not None else []
        if not bindings or policy_type is None:  # the common case: nothing to evaluate
            return [], []
        return store.objects(policy_type), bindings

    def namespace(name: str) -> JsonObj | None:
        ns_type = store.catalog.find("", "v1", "namespaces")
        return store.peek(ns_type, None, name) if ns_type is not None else None

    return ValidatingPolicies(load, namespace, resource_types=lambda: list(store.catalog))

"""Which requests a ValidatingAdmissionPolicy or its binding applies to, as kube-apiserver's
``matching.Matcher`` decides (``k8s.io/apiserver/pkg/admission/plugin/policy/matching`` and the
webhook predicates it uses: ``namespace``, ``object``, ``rules``).

:meth:`Matcher.matches` takes a ``matchConstraints`` / ``matchResources`` object and answers
the resource type the request matched as (its own, or under ``matchPolicy: Equivalent`` another
version of the same stored resource), or None; it raises :class:`MatchError` when a selector
cannot be evaluated for a request the rules select (kube: a configuration error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.resources import ResourceType
from dispatch.testing.k8s.selectors import LabelSelector

JsonObj = dict[str, Any]
NamespaceLoader = Callable[[str], JsonObj | None]


class MatchError(Exception):
    """The request could not be matched (kube: a configuration error of the policy/binding)."""


@dataclass(frozen=True)
class Target:
    """What the matcher sees of a request (``admission.Attributes``)."""

    rtype: ResourceType
    subresource: str
    operation: str
    name: str
    namespace: str
    labels: tuple[Mapping[str, str] | None, Mapping[str, str] | None]  # new, old


def target_of(request: AdmissionRequest) -> Target:
    meta = request.obj.get("metadata") or {}
    old_meta = (request.old or {}).get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    if request.rtype.group == "" and request.rtype.plural == "namespaces":
        namespace = str(meta.get("name") or "")
    return Target(
        rtype=request.rtype,
        subresource=request.subresource or "",
        operation=request.operation,
        name=str(meta.get("name") or ""),
        namespace=namespace,
        labels=(meta.get("labels"), old_meta.get("labels") if request.old is not None else None),
    )


def is_namespace(rtype: ResourceType) -> bool:
    return rtype.group == "" and rtype.plural == "namespaces"


def _listed(items: Sequence[str] | None, value: str) -> bool:
    return any(item in ("*", value) for item in items or [])


def _rule_matches(rule: JsonObj, target: Target, rtype: ResourceType) -> bool:
    """``rules.Matcher.Matches``: scope, operation, group, version, resource/subresource."""
    scope = rule.get("scope") or "*"
    if scope == "Namespaced" and (is_namespace(rtype) or not target.namespace):
        return False
    if scope == "Cluster" and not (is_namespace(rtype) or not target.namespace):
        return False
    if not _listed(rule.get("operations"), target.operation):
        return False
    if not _listed(rule.get("apiGroups"), rtype.group):
        return False
    if not _listed(rule.get("apiVersions"), rtype.version):
        return False
    for entry in rule.get("resources") or []:
        res, _, sub = str(entry).partition("/")
        if res in ("*", rtype.plural) and sub in ("*", target.subresource):
            return True
    return False


def _named(rule: JsonObj, target: Target) -> bool:
    names = rule.get("resourceNames") or []
    return not names or target.name in names


def _matching_type(
    rules: Sequence[JsonObj],
    match_policy: str,
    target: Target,
    equivalents: Sequence[ResourceType],
) -> ResourceType | None:
    """``matchesResourceRules``: the resource type a rule matches (the request's own, else,
    under Equivalent, another version of the same stored resource), or None."""
    for rule in rules:
        if _rule_matches(rule, target, target.rtype) and _named(rule, target):
            return target.rtype
    if match_policy != "Equivalent":
        return None
    for rule in rules:
        for other in equivalents:
            if (
                other != target.rtype
                and _rule_matches(rule, target, other)
                and _named(rule, target)
            ):
                return other
    return None


def _selector(match: JsonObj, key: str) -> LabelSelector:
    try:
        return LabelSelector.from_dict(match.get(key))
    except (KeyError, TypeError) as ex:
        raise MatchError(f"invalid {key}: {ex}") from None


@dataclass
class Matcher:
    namespace: NamespaceLoader
    equivalents: Sequence[ResourceType]

    def matches(self, match: JsonObj, target: Target, obj: JsonObj) -> ResourceType | None:
        """``matching.Matcher.Matches``: the matched resource type, or None. Raises
        :class:`MatchError` when a selector cannot be evaluated for a request it applies to."""
        ns_ok, ns_error = self._namespace_matches(
            _selector(match, "namespaceSelector"), target, obj
        )
        if not ns_ok and ns_error is None:
            return None
        selector = _selector(match, "objectSelector")
        if not selector.empty and not any(
            labels is not None and selector.matches(labels) for labels in target.labels
        ):
            return None
        policy = str(match.get("matchPolicy") or "Equivalent")
        if _matching_type(
            match.get("excludeResourceRules") or [], policy, target, self.equivalents
        ):
            return None
        rules = match.get("resourceRules") or []
        found = _matching_type(rules, policy, target, self.equivalents) if rules else target.rtype
        if found is None:
            return None
        if ns_error is not None:
            raise MatchError(ns_error)
        return found

    def _namespace_matches(
        self, selector: LabelSelector, target: Target, obj: JsonObj
    ) -> tuple[bool, str | None]:
        if not target.namespace and not is_namespace(target.rtype):
            return True, None
        if selector.empty:
            return True, None
        if is_namespace(target.rtype) and not target.subresource:
            return selector.matches((obj.get("metadata") or {}).get("labels")), None
        namespace = self.namespace(target.namespace)
        if namespace is None:
            return False, f'namespaces "{target.namespace}" not found'
        return selector.matches((namespace.get("metadata") or {}).get("labels")), None

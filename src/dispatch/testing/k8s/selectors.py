"""Label and field selectors with the syntax and semantics of ``k8s.io/apimachinery``.

Label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x,y)``, ``a``, ``!a``,
comma-separated and AND-ed. Field selectors: ``f=v``, ``f==v``, ``f!=v`` over the fields a
resource supports (:data:`FIELD_GETTERS`); an unsupported field is a 400 BadRequest, as on a
real server. Parsing errors raise :class:`~dispatch.testing.k8s.errors.ApiError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dispatch.testing.k8s.errors import ApiError, bad_request

JsonObj = dict[str, Any]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_./-]*)\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        # "!=" and "notin" match objects without the label, as in Kubernetes
        return not present or value not in self.values


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in (p.strip() for p in parts) if p]


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if not text:
            return cls()
        reqs = []
        for part in _split_top(text):
            eq = _EQ_RE.match(part)
            if eq:
                key, op, value = eq.groups()
                reqs.append(Requirement(key, "!=" if op == "!=" else "=", frozenset([value])))
                continue
            st = _SET_RE.match(part)
            if not st:
                raise bad_request(f"unable to parse requirement: {part!r}")
            neg, key, op, values = st.groups()
            if op:
                if neg:
                    raise bad_request(f"unable to parse requirement: {part!r}")
                vals = frozenset(v.strip() for v in values.split(",") if v.strip())
                reqs.append(Requirement(key, op, vals))
            else:
                reqs.append(Requirement(key, "!exists" if neg else "exists"))
        return cls(tuple(reqs))

    @classmethod
    def from_dict(cls, selector: Mapping[str, Any] | None) -> LabelSelector:
        """From a ``metav1.LabelSelector`` object (``matchLabels`` / ``matchExpressions``)."""
        if not selector:
            return cls()
        reqs = [
            Requirement(k, "=", frozenset([v]))
            for k, v in (selector.get("matchLabels") or {}).items()
        ]
        ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}
        for expr in selector.get("matchExpressions") or []:
            reqs.append(
                Requirement(expr["key"], ops[expr["operator"]], frozenset(expr.get("values") or []))
            )
        return cls(tuple(reqs))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _path(*keys: str) -> Callable[[JsonObj], str | None]:
    def get(obj: JsonObj) -> str | None:
        cur: Any = obj
        for key in keys:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(key)
        if cur is None:
            return None
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


_META = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}
_INVOLVED = {
    f"involvedObject.{f}": _path("involvedObject", f)
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
}
_REGARDING = {
    f"regarding.{f}": _path("involvedObject", f)
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
}

# Supported fields per (storage group, plural); every resource supports the metadata fields.
FIELD_GETTERS: dict[tuple[str, str], dict[str, Callable[[JsonObj], str | None]]] = {
    ("", "pods"): {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    ("", "events"): {
        **_INVOLVED,
        **_REGARDING,
        "reason": _path("reason"),
        "type": _path("type"),
        "source": _path("source", "component"),
        "reportingComponent": _path("reportingComponent"),
    },
    ("", "namespaces"): {"status.phase": _path("status", "phase")},
    ("", "nodes"): {"spec.unschedulable": _path("spec", "unschedulable")},
    ("", "secrets"): {"type": _path("type")},
    ("batch", "jobs"): {"status.successful": _path("status", "succeeded")},
}


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[tuple[str, bool, str, Callable[[JsonObj], str | None]], ...] = ()

    @classmethod
    def parse(cls, text: str | None, storage: tuple[str, str], plural: str) -> FieldSelector:
        if not text:
            return cls()
        getters = {**_META, **FIELD_GETTERS.get(storage, {})}
        terms = []
        for part in _split_top(text):
            m = _EQ_RE.match(part)
            if not m:
                raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
            key, op, value = m.groups()
            getter = getters.get(key)
            if getter is None:
                raise ApiError(
                    400,
                    "BadRequest",
                    f'"{key}" is not a known field selector: only "metadata.name", "metadata.namespace"',
                )
            terms.append((key, op != "!=", value, getter))
        return cls(tuple(terms))

    def matches(self, obj: JsonObj) -> bool:
        for _key, equal, value, getter in self.terms:
            actual = getter(obj) or ""
            if (actual == value) != equal:
                return False
        return True

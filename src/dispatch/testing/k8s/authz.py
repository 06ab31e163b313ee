"""Authorization: everything is allowed unless a deny rule matches.

Rules apply to SelfSubjectAccessReviews (``status.allowed``) and, when ``enforce`` is true, to
the requests themselves (403 Forbidden with the API server's message).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

USER = "emulator-user"


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


class Authorizer:
    def __init__(self, *, enforce: bool = True) -> None:
        self.enforce = enforce
        self._rules: list[DenyRule] = []
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


def access_review(authorizer: Authorizer, body: dict[str, Any]) -> dict[str, Any]:
    """The answer to a SelfSubjectAccessReview ``body``: its spec with ``status.allowed``."""
    attrs = (body.get("spec") or {}).get("resourceAttributes") or {}
    resource = attrs.get("resource", "")
    if attrs.get("subresource"):
        resource = f"{resource}/{attrs['subresource']}"
    allowed = authorizer.allowed(
        attrs.get("verb", ""), attrs.get("group", ""), resource, attrs.get("namespace", "")
    )
    status: dict[str, Any] = {"allowed": allowed}
    if not allowed:
        status["reason"] = "denied by the emulator's authorization rules"
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": body.get("spec") or {},
        "status": status,
    }

"""Authorization: everything is allowed unless a deny rule matches.

Rules apply to SelfSubjectAccessReviews (``status.allowed``) and, when ``enforce`` is true, to
the requests themselves (403 Forbidden with the API server's message).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

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

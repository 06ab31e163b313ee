"""Admission: mutating and validating plugins run on every create and update.

A plugin sees an :class:`AdmissionRequest` (operation, storage resource type, the new object in
storage representation, the old object on update, the subresource) and returns field errors;
a mutating plugin may change ``request.obj`` in place. All errors of all plugins are returned
together as one 422 Invalid. Plugins may read the store (``request.store``) but must not write
to it. Controllers of later milestones register webhooks here (Trainer's runtimePatches
``time`` defaulter, Kueue's suspend-on-create).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dispatch.testing.k8s.errors import FieldError
from dispatch.testing.k8s.resources import ResourceType

if TYPE_CHECKING:
    from dispatch.testing.k8s.rbac import UserInfo
    from dispatch.testing.k8s.store import Store

JsonObj = dict[str, Any]


@dataclass
class AdmissionRequest:
    operation: str  # CREATE or UPDATE
    rtype: ResourceType  # storage version
    obj: JsonObj
    old: JsonObj | None
    subresource: str | None
    store: Store
    #: who asks (None: the emulator's own controllers, or an unauthenticated client)
    user: UserInfo | None = None
    #: ``dryRun=All``: nothing will be written (webhooks are told; side effects must not happen)
    dry_run: bool = False


class AdmissionPlugin(Protocol):
    def admit(self, request: AdmissionRequest) -> list[FieldError]: ...


@dataclass
class AdmissionChain:
    plugins: list[AdmissionPlugin] = field(default_factory=list)

    def add(self, plugin: AdmissionPlugin) -> None:
        self.plugins.append(plugin)

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        found: list[FieldError] = []
        for plugin in self.plugins:
            found += plugin.admit(request)
        return found

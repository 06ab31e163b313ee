"""Request paths to API request information, as the API server's ``RequestInfoFactory``."""

from __future__ import annotations

from dataclasses import dataclass

from dispatch.testing.k8s.resources import ResourceCatalog, ResourceType

_TRUE = ("1", "true", "True")


@dataclass(frozen=True)
class RequestInfo:
    verb: str  # get list watch create update patch delete deletecollection
    rtype: ResourceType
    namespace: str
    name: str
    subresource: str

    @property
    def resource(self) -> str:
        """``pods`` or ``pods/status``: the name used by accounting, faults and authz."""
        plural = self.rtype.plural
        return f"{plural}/{self.subresource}" if self.subresource else plural


class NotAResource(Exception):
    """The path is not a resource path (discovery, or unknown)."""


def parse(path: str, method: str, query: dict[str, str], catalog: ResourceCatalog) -> RequestInfo:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise NotAResource(path)
    watch = query.get("watch") in _TRUE
    if rest and rest[0] == "watch":
        watch, rest = True, rest[1:]
    namespace = ""
    if (
        len(rest) >= 3
        and rest[0] == "namespaces"
        and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
    ):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise NotAResource(path)
    rtype = catalog.find(group, version, rest[0])
    if rtype is None:
        raise NotAResource(path)
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if rtype.namespaced is False:
        namespace = ""
    verb = _verb(method, bool(name), watch)
    return RequestInfo(verb, rtype, namespace, name, subresource)


def _verb(method: str, named: bool, watch: bool) -> str:
    if method == "GET":
        if watch:
            return "watch"
        return "get" if named else "list"
    return {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if named else "deletecollection",
    }.get(method, method.lower())

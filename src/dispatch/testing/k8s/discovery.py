"""Discovery documents: ``/version``, ``/api``, ``/apis``, group and resource lists.

Legacy (unaggregated) discovery JSON; clients that ask for aggregated discovery fall back to it
because the response's content type is plain ``application/json``.
"""

from __future__ import annotations

from typing import Any

from dispatch.testing.k8s.resources import ResourceCatalog, ResourceType

JsonObj = dict[str, Any]
SERVER_ADDRESS = [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]


def version(git_version: str = "v1.33.0") -> JsonObj:
    major, minor = git_version.lstrip("v").split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
        "emulator": "dispatch.testing.k8s",
    }


def core_versions() -> JsonObj:
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": SERVER_ADDRESS}


def _group(catalog: ResourceCatalog, name: str, versions: list[str]) -> JsonObj:
    preferred = next(
        (t.version for t in catalog if t.group == name and t.storage_version), versions[0]
    )
    return {
        "name": name,
        "versions": [{"groupVersion": f"{name}/{v}", "version": v} for v in versions],
        "preferredVersion": {"groupVersion": f"{name}/{preferred}", "version": preferred},
    }


def group_list(catalog: ResourceCatalog) -> JsonObj:
    groups = [_group(catalog, g, vs) for g, vs in catalog.groups().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(catalog: ResourceCatalog, name: str) -> JsonObj | None:
    versions = catalog.groups().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(catalog, name, versions)}


def _entry(t: ResourceType) -> JsonObj:
    entry: JsonObj = {
        "name": t.plural,
        "singularName": t.singular_name,
        "namespaced": t.namespaced,
        "kind": t.kind,
        "verbs": list(t.verbs),
    }
    if t.short_names:
        entry["shortNames"] = list(t.short_names)
    if t.categories:
        entry["categories"] = list(t.categories)
    return entry


#: subresources whose request and answer are of another group's kind: discovery names it
#: (``kubectl drain`` evicts only when ``pods/eviction`` says ``policy/v1 Eviction``)
_OTHER_KIND: dict[str, JsonObj] = {
    "eviction": {"group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]},
    "token": {
        "group": "authentication.k8s.io",
        "version": "v1",
        "kind": "TokenRequest",
        "verbs": ["create"],
    },
}


def resource_list(catalog: ResourceCatalog, group_name: str, version_name: str) -> JsonObj | None:
    types = list(catalog.in_group_version(group_name, version_name))
    if not types:
        return None
    resources = []
    for t in types:
        resources.append(_entry(t))
        subs = (["status"] if t.status else []) + list(t.subresources)
        for sub in subs:
            verbs = ["get", "patch", "update"] if sub == "status" else ["get"]
            entry = {
                "name": f"{t.plural}/{sub}",
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind if sub == "status" else "Pod",
                "verbs": verbs,
            }
            resources.append({**entry, **_OTHER_KIND.get(sub, {})})
    gv = f"{group_name}/{version_name}" if group_name else version_name
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }


def document(catalog: ResourceCatalog, path: str, git_version: str) -> JsonObj | None:
    """The discovery document at ``path``, or None if ``path`` is not a discovery path."""
    parts = [p for p in path.split("/") if p]
    if parts == ["version"]:
        return version(git_version)
    if parts == ["api"]:
        return core_versions()
    if parts == ["apis"]:
        return group_list(catalog)
    if len(parts) == 2 and parts[0] == "api":
        return resource_list(catalog, "", parts[1])
    if len(parts) == 2 and parts[0] == "apis":
        return group(catalog, parts[1])
    if len(parts) == 3 and parts[0] == "apis":
        return resource_list(catalog, parts[1], parts[2])
    return None

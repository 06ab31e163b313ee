"""Small edits of a JobSet's replicated jobs as Trainer's plugins make them (``pkg/apply``).

Plain dicts in, plain dicts changed in place; shared by the renderer (``jobset``) and every
plugin (``plugins``), so each reads like the Go code it follows.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from dispatch.adapters.kubeflow.objects import dig
from dispatch.adapters.kubeflow.planning.runtime import ANCESTOR_LABEL, NODE_CONTAINER

JsonObj = dict[str, Any]
TRAINER_API = "trainer.kubeflow.org/v1alpha1"


def ensure(obj: JsonObj, *keys: str) -> JsonObj:
    """``obj[k1][k2]...``, made a dict where it is missing or not one."""
    for key in keys:
        nxt = obj.get(key)
        if not isinstance(nxt, dict):
            nxt = obj[key] = {}
        obj = nxt
    return obj


def upsert(items: list[JsonObj], item: JsonObj, same: Callable[[JsonObj, JsonObj], bool]) -> None:
    """Trainer's ``apply.upsert``: replace the first item ``same`` as ``item``, else append."""
    for i, old in enumerate(items):
        if same(old, item):
            items[i] = copy.deepcopy(item)
            return
    items.append(copy.deepcopy(item))


def by_name(a: JsonObj, b: JsonObj) -> bool:
    return a.get("name") == b.get("name")


def upsert_env(env: list[JsonObj], *values: JsonObj) -> None:
    for value in values:
        upsert(env, value, by_name)


def upsert_container_env(container: JsonObj, values: list[JsonObj]) -> None:
    if values:
        upsert_env(container.setdefault("env", []), *values)


def same_port(a: JsonObj, b: JsonObj) -> bool:
    """Trainer's byContainerPortOrName: an unnamed port "matches" another unnamed port."""
    return a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name")


def pod_spec(rjob: JsonObj) -> JsonObj:
    """The replicated job's PodSpec (``template.spec.template.spec``), made if missing."""
    return ensure(rjob, "template", "spec", "template", "spec")


def containers(rjob: JsonObj, key: str = "containers") -> list[JsonObj]:
    found = dig(rjob, "template", "spec", "template", "spec", key)
    return found if isinstance(found, list) else []


def container(rjob: JsonObj, name: str, key: str = "containers") -> JsonObj | None:
    return next((c for c in containers(rjob, key) if c.get("name") == name), None)


def node_container(rjob: JsonObj) -> JsonObj | None:
    return container(rjob, NODE_CONTAINER)


def ancestor(rjob: JsonObj) -> str | None:
    found = dig(rjob, "template", "metadata", "labels", ANCESTOR_LABEL)
    return str(found) if found is not None else None


def owner_reference(trainjob: Mapping[str, Any]) -> JsonObj:
    """The controller owner reference Trainer puts on every object it creates."""
    meta = trainjob.get("metadata") or {}
    ref: JsonObj = {"apiVersion": TRAINER_API, "kind": "TrainJob", "name": meta.get("name")}
    ref["uid"] = meta.get("uid", "")
    ref["controller"] = True
    ref["blockOwnerDeletion"] = True
    return ref

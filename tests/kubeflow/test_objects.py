"""The object shape helpers every part of the Kubeflow adapter (and the emulator) reads with."""

from __future__ import annotations

import copy
from collections import UserList
from types import MappingProxyType
from typing import Any

from dispatch.adapters.kubeflow.objects import (
    as_list,
    condition,
    dig,
    strategic_merge,
    true_condition,
)

POD_SPEC: dict[str, Any] = {
    "containers": [
        {"name": "node", "image": "a", "env": [{"name": "X", "value": "1"}]},
        {"name": "side", "image": "b"},
    ],
    "tolerations": [{"key": "gpu", "operator": "Exists"}],
}


def test_dig_reads_through_any_mapping_and_stops_at_anything_else() -> None:
    pod = {"status": {"phase": "Failed", "conditions": [{"type": "Ready"}]}}
    assert dig(pod, "status", "phase") == "Failed"
    assert dig(MappingProxyType({"status": MappingProxyType(pod["status"])}), "status",
               "phase") == "Failed"  # fmt: skip
    assert dig(pod, "status", "conditions", "type") is None  # a list is not a mapping
    assert dig(pod, "status", "phase", "x") is None  # nor a string
    assert dig(pod, "spec", "containers") is None
    assert dig(None, "status") is None
    assert dig(pod) is pod


def test_as_list_copies_any_sequence_but_text() -> None:
    items = [1, 2]
    copied = as_list(items)
    assert copied == [1, 2] and copied is not items
    assert as_list((1, 2)) == [1, 2]
    assert as_list(UserList([3])) == [3]
    assert as_list("ab") is None and as_list(b"ab") is None
    assert as_list({"a": 1}) is None and as_list(None) is None


def test_lists_with_a_merge_key_merge_by_it_others_are_replaced() -> None:
    patch = {
        "containers": [{"name": "node", "env": [{"name": "Y", "value": "2"}]}],
        "tolerations": [{"key": "spot", "operator": "Exists"}],
    }
    merged = strategic_merge(POD_SPEC, patch)
    node, side = merged["containers"]
    # an item the patch adds goes before the original's (apimachinery's element order)
    assert node == {"name": "node", "image": "a",
                    "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}]}  # fmt: skip
    assert side == {"name": "side", "image": "b"}
    # PodSpec.tolerations has no patchMergeKey in Kubernetes: the patch's list replaces it
    assert merged["tolerations"] == [{"key": "spot", "operator": "Exists"}]


def test_topology_spread_constraints_merge_by_topology_key() -> None:
    zone = {"topologyKey": "zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}
    base = {"topologySpreadConstraints": [zone]}
    patch = {"topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 2},
                                           {"topologyKey": "host", "maxSkew": 1}]}  # fmt: skip
    merged = strategic_merge(base, patch)["topologySpreadConstraints"]
    assert merged == [{**zone, "maxSkew": 2}, {"topologyKey": "host", "maxSkew": 1}]


def test_directives_delete_an_item_and_replace_a_map() -> None:
    patch = {
        "containers": [{"$patch": "delete", "name": "side"}],
        "securityContext": {"$patch": "replace", "runAsUser": 1000},
    }
    base = {**POD_SPEC, "securityContext": {"runAsUser": 0, "fsGroup": 2}}
    merged = strategic_merge(base, patch)
    assert [c["name"] for c in merged["containers"]] == ["node"]
    assert merged["securityContext"] == {"runAsUser": 1000}


def test_conditions_merge_by_type_and_owner_references_by_uid() -> None:
    base = {"conditions": [{"type": "Ready", "status": "False"}, {"type": "X", "status": "True"}],
            "ownerReferences": [{"uid": "u1", "name": "a"}]}  # fmt: skip
    patch = {"conditions": [{"type": "Ready", "status": "True"}],
             "ownerReferences": [{"uid": "u2", "name": "b"}]}  # fmt: skip
    merged = strategic_merge(base, patch)
    assert merged["conditions"] == [{"type": "Ready", "status": "True"},
                                    {"type": "X", "status": "True"}]  # fmt: skip
    assert [o["uid"] for o in merged["ownerReferences"]] == ["u2", "u1"]


def test_the_inputs_are_never_changed_nor_shared_with_the_result() -> None:
    base, patch = copy.deepcopy(POD_SPEC), {"containers": [{"name": "new", "image": "c"}]}
    merged = strategic_merge(base, patch)
    assert base == POD_SPEC and patch == {"containers": [{"name": "new", "image": "c"}]}
    merged["tolerations"][0]["key"] = "changed"  # a part the patch did not touch
    [new] = [c for c in merged["containers"] if c["name"] == "new"]
    new["image"] = "changed"  # a part taken from the patch
    assert base == POD_SPEC and patch["containers"][0]["image"] == "c"


def test_a_true_condition_skips_one_of_its_type_that_is_not_true() -> None:
    obj = {"status": {"conditions": [{"type": "Failed", "status": "False"},
                                     {"type": "Failed", "status": "True", "reason": "R"}]}}  # fmt: skip
    assert condition(obj, "Failed") == {"type": "Failed", "status": "False"}
    assert true_condition(obj, "Failed") == {"type": "Failed", "status": "True", "reason": "R"}
    assert true_condition(obj, "Complete") is None
    assert true_condition({"status": {"conditions": "garbage"}}, "Failed") is None

"""The permissions are written once (``VERB_CHECKS``): deploy/ and the docs are made from it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from dispatch.adapters.kubeflow.api.permissions import VERB_CHECKS, VerbCheck, rbac_rules
from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "permissions.py"
RBAC = REPO / "deploy" / "base" / "rbac.yaml"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("permissions_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_files_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_stale_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script()
    stale = tmp_path / "rbac.yaml"
    widened = RBAC.read_text().replace("verbs: [get]", "verbs: [get, list]")
    assert widened != RBAC.read_text()
    stale.write_text(widened)
    docs = tmp_path / "permissions.md"
    docs.write_text(script.DOCS.read_text())
    monkeypatch.setattr(script, "RBAC", stale)
    monkeypatch.setattr(script, "DOCS", docs)
    monkeypatch.setattr(script, "REPO", tmp_path)
    assert script.main(["--check"]) == 1
    assert script.main([]) == 0
    assert stale.read_text() == RBAC.read_text()


def test_the_role_grants_exactly_the_namespaced_checks() -> None:
    role, cluster_role = yaml.safe_load_all(RBAC.read_text())
    assert role["kind"] == "Role" and cluster_role["kind"] == "ClusterRole"
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    checked = {(c.group, c.rule_resource, c.verb) for c in VERB_CHECKS if not c.cluster_scoped}
    assert granted == checked
    assert cluster_role["rules"] == rbac_rules(cluster_scoped=True)
    assert {(r["resources"][0], tuple(r["verbs"])) for r in cluster_role["rules"]} == {
        ("clustertrainingruntimes", ("get",)),
        ("nodes", ("list", "watch")),
    }


def test_rules_merge_verbs_per_resource_in_kubernetes_order() -> None:
    checks = [
        VerbCheck("delete", "g", "things"),
        VerbCheck("get", "g", "things"),
        VerbCheck("get", "", "pods", subresource="log"),
        VerbCheck("list", "", "nodes", cluster_scoped=True),
    ]
    assert rbac_rules(checks) == [
        {"apiGroups": ["g"], "resources": ["things"], "verbs": ["get", "delete"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]
    assert rbac_rules(checks, cluster_scoped=True) == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}
    ]


def test_every_resource_the_adapter_follows_is_checked() -> None:
    from dispatch.adapters.kubeflow.api.kinds import watched_kinds

    listed = {(c.group, c.resource) for c in VERB_CHECKS if c.verb in ("list", "watch")}
    for kind in watched_kinds("prod"):
        assert (kind.resource.group, kind.resource.plural) in listed, kind.name


def test_the_docs_list_every_check() -> None:
    text = (REPO / "docs" / "reference" / "permissions.md").read_text()
    for check in VERB_CHECKS:
        row = next(
            (
                line
                for line in text.splitlines()
                if line.startswith(f"| {check.group or 'core'} | {check.rule_resource} |")
                and f" {check.verb}" in line.split("|")[3]
            ),
            None,
        )
        assert row is not None, check.name

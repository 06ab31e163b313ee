"""deploy/: the kustomize manifests render, say what the supervisors need, and apply (server
dry run) to the emulator; the Dockerfile agrees with them. The image itself is not built here
(no container runtime on these machines)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from dispatch.adapters.kubeflow.api.permissions import rbac_rules
from dispatch.config import parse_config
from dispatch.testing.k8s import Emulator
from tests.conftest import REPO
from tests.deploy.conftest import (
    NAME,
    NAMESPACE,
    OVERLAY,
    create_namespace,
    kubectl,
    needs_kubectl,
    one,
)

Objects = list[dict[str, Any]]
NAMESPACED = {
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "Deployment",
    "PodDisruptionBudget",
}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding"}


def test_the_base_names_no_namespace() -> None:
    for path in sorted((REPO / "deploy" / "base").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") != "Kustomization":
                assert "namespace" not in document.get("metadata", {}), path.name
                assert document["kind"] != "Namespace", path.name


def test_every_rendered_object_parses(rendered: Objects) -> None:
    assert {o["kind"] for o in rendered} == NAMESPACED | CLUSTER_SCOPED
    assert len(rendered) == len(NAMESPACED | CLUSTER_SCOPED)
    for obj in rendered:
        assert obj["apiVersion"] and obj["metadata"]["name"], obj
        if obj["kind"] in NAMESPACED:
            assert obj["metadata"]["namespace"] == NAMESPACE, obj["kind"]
        else:
            assert "namespace" not in obj["metadata"], obj["kind"]


def test_the_roles_are_the_probes_list(rendered: Objects) -> None:
    assert one(rendered, "Role")["rules"] == rbac_rules()
    assert one(rendered, "ClusterRole")["rules"] == rbac_rules(cluster_scoped=True)
    subject = {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}
    for binding, role in (("RoleBinding", "Role"), ("ClusterRoleBinding", "ClusterRole")):
        found = one(rendered, binding)
        assert found["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role,
            "name": NAME,
        }
        assert found["subjects"] == [subject]


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container["env"]}


def test_the_deployment_runs_supervisors_as_asked(rendered: Objects) -> None:
    deployment = one(rendered, "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    env = _env(container)
    assert spec["replicas"] == 2
    assert pod["serviceAccountName"] == one(rendered, "ServiceAccount")["metadata"]["name"]
    args = container["args"]
    assert args[args.index("supervise") + 1 :] == [
        "--owner",
        "$(POD_NAME)",
        "--cluster",
        "$(SUPERVISED_CLUSTER)",
    ]
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    cluster_ref = env["SUPERVISED_CLUSTER"]["valueFrom"]["configMapKeyRef"]
    assert cluster_ref == {"name": "dispatch-config", "key": "cluster"}
    secret_ref = env["DISPATCH_RECORDS"]["valueFrom"]["secretKeyRef"]
    assert secret_ref == {"name": "dispatch-records", "key": "url"}
    # SIGTERM ends the pass in progress; a pass's requests time out after 30 s each
    assert pod["terminationGracePeriodSeconds"] >= 60
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert set(container["resources"]) == {"requests", "limits"}
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    state = env["DISPATCH_STATE_DIR"]["value"]
    assert volumes[mounts[state]] == {"name": mounts[state], "emptyDir": {}}
    assert volumes[mounts["/tmp"]]["emptyDir"] == {}
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()


def test_the_config_file_is_the_configmaps_and_names_no_kubeconfig(rendered: Objects) -> None:
    deployment = one(rendered, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    path = Path(_env(container)["DISPATCH_CONFIG"]["value"])
    [mount] = [m for m in container["volumeMounts"] if Path(m["mountPath"]) == path.parent]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    configmap = one(rendered, "ConfigMap")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"] == "dispatch-config"
    config = parse_config(yaml.safe_load(configmap["data"][path.name]))
    supervised = config.cluster(configmap["data"]["cluster"])  # --cluster names one of them
    assert supervised.adapter == "kubeflow"
    assert supervised.supervision == "remote"  # teammates' dispatch submit starts none
    # in the pod: the service account's credentials and namespace
    assert "kubeconfig" not in supervised.settings and "context" not in supervised.settings


def test_the_example_secret_holds_no_password(rendered: Objects) -> None:
    secret = one(rendered, "Secret")
    url = urlsplit(secret["stringData"]["url"])
    assert url.scheme == "postgresql"
    assert url.password == "REPLACE-ME"


def test_the_budget_lets_one_supervisor_go_at_a_time(rendered: Objects) -> None:
    budget = one(rendered, "PodDisruptionBudget")
    deployment = one(rendered, "Deployment")
    assert budget["spec"]["maxUnavailable"] == 1
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()


@needs_kubectl
def test_a_server_dry_run_on_the_emulator_succeeds_and_creates_nothing(
    emulator: Emulator, rendered: Objects, tmp_path: Path
) -> None:
    create_namespace(emulator, tmp_path)
    # --validate=false: the emulator serves no OpenAPI document for kubectl's schema check
    done = kubectl(
        tmp_path,
        "apply",
        "--dry-run=server",
        "--validate=false",
        "-k",
        str(OVERLAY),
        kubeconfig=emulator.kubeconfig,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(rendered)
    assert all(line.endswith(" created (server dry run)") for line in lines), lines
    kinds = "serviceaccounts,roles,rolebindings,configmaps,secrets,deployments,poddisruptionbudgets"
    left = kubectl(
        tmp_path, "get", kinds, "-n", NAMESPACE, "-o", "name", kubeconfig=emulator.kubeconfig
    )
    assert left.returncode == 0, left.stderr
    assert [n for n in left.stdout.split() if NAME in n or "dispatch-" in n] == []
    for kind in ("clusterrole", "clusterrolebinding"):
        gone = kubectl(tmp_path, "get", kind, NAME, kubeconfig=emulator.kubeconfig)
        assert gone.returncode == 1 and "NotFound" in gone.stderr, gone.stdout + gone.stderr


# --- the image ---------------------------------------------------------------------------------


def _dockerfile() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(maxsplit=1)[0].upper(), line.split(maxsplit=1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_dockerfile_installs_the_locked_package_and_runs_as_the_deployments_user() -> None:
    instructions = _dockerfile()
    [base] = [arg for op, arg in instructions if op == "FROM"]
    assert re.fullmatch(r"python:3\.1[12]-slim", base)
    installs = [arg for op, arg in instructions if op == "RUN" and "pip install" in arg]
    assert installs and "--constraint constraints.txt" in installs[0]
    assert '".[kubeflow,postgres]"' in installs[0]
    [user] = [arg for op, arg in instructions if op == "USER"]
    uid, _, gid = user.partition(":")
    assert uid != "0" and uid.isdigit()
    assert [arg for op, arg in instructions if op == "ENTRYPOINT"] == ['["dispatch"]']
    deployment = yaml.safe_load((REPO / "deploy" / "base" / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
        int(uid),
        int(gid),
    )


def test_the_build_context_is_only_what_the_image_copies() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ignored[ignored.index("**") :][:1] == ["**"]
    copied = {
        part.rstrip("/") for op, arg in _dockerfile() if op == "COPY" for part in arg.split()[:-1]
    }
    allowed = {line[1:].rstrip("/") for line in ignored if line.startswith("!")}
    assert copied == allowed == {"pyproject.toml", "README.md", "constraints.txt", "src"}

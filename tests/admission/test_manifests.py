"""`dispatch admission manifests`: every object is one the official Kubernetes models read
back unchanged (a misspelt field would be dropped), the webhooks select what the brief says,
the server's arguments are ones `dispatch admission serve` accepts, and the command prints a
YAML stream or a JSON List with notes on stderr."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import dispatch
from dispatch.adapters.kubeflow.admission.contract import (
    DEFAULT_IDENTITIES,
    PATH_IDENTITY,
    PATH_RUNTIMES,
    WEBHOOK_IDENTITY,
    WEBHOOK_RUNTIMES,
)
from dispatch.adapters.kubeflow.admission.manifests import (
    ManifestOptions,
    default_image,
    server_args,
    supervisor_identity,
    webhook_objects,
)
from dispatch.adapters.kubeflow.admission.policy import policy_objects
from dispatch.cli.cmd_admission_manifests import command as manifests
from tests.emulator.conftest import KUBECTL, kubectl

kubernetes = pytest.importorskip("kubernetes")

JsonObj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
#: the official client's model of each kind
MODELS = {
    "ServiceAccount": "V1ServiceAccount",
    "ClusterRole": "V1ClusterRole",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "Service": "V1Service",
    "Deployment": "V1Deployment",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
    "ValidatingWebhookConfiguration": "V1ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy": "V1ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding": "V1ValidatingAdmissionPolicyBinding",
}
FULL = ManifestOptions(
    namespace="ml-guard",
    name="guard",
    image="registry.example.org/dispatch:9.9.9",
    identities=("ci-robot", "system:serviceaccount:ml-guard:dispatch-supervisor"),
    groups=("ml-platform",),
    runtime_selector={"dispatch.dev/checked": None, "team": "vision"},
    ca_bundle=base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode(),
    failure_policy="Ignore",
    timeout_seconds=10,
    namespace_selector={"dispatch.dev/guarded": "true"},
    allow_rank_restart=False,
    publish_init_container="publish",
)


def by_kind(objects: list[JsonObj]) -> dict[str, JsonObj]:
    found = {o["kind"]: o for o in objects}
    assert len(found) == len(objects)
    return found


def webhooks(options: ManifestOptions) -> dict[str, JsonObj]:
    configuration = by_kind(webhook_objects(options))["ValidatingWebhookConfiguration"]
    return {w["name"]: w for w in configuration["webhooks"]}


@pytest.mark.parametrize("options", [ManifestOptions(), FULL], ids=["defaults", "everything"])
def test_the_official_models_read_every_object_back_unchanged(options: ManifestOptions) -> None:
    client = kubernetes.client.ApiClient()
    objects = webhook_objects(options) + policy_objects(options)
    for obj in objects:
        model = client._ApiClient__deserialize(obj, MODELS[obj["kind"]])
        assert client.sanitize_for_serialization(model) == obj, obj["kind"]
    assert [o["kind"] for o in webhook_objects(options)] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "Deployment",
        "PodDisruptionBudget",
        "ValidatingWebhookConfiguration",
    ]


def test_the_identity_webhook_sees_updates_of_dispatchs_objects_only() -> None:
    webhook = webhooks(ManifestOptions())[WEBHOOK_IDENTITY]
    assert webhook["rules"] == [
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "apiVersions": ["v1alpha1"],
            "operations": ["UPDATE"],
            "resources": ["trainjobs", "trainingruntimes"],
            "scope": "Namespaced",
        }
    ]
    assert webhook["objectSelector"] == {
        "matchExpressions": [{"key": "dispatch.dev/job", "operator": "Exists"}]
    }
    assert webhook["clientConfig"] == {
        "service": {
            "namespace": "dispatch",
            "name": "dispatch-admission",
            "path": PATH_IDENTITY,
            "port": 443,
        }
    }


def test_the_runtimes_webhook_sees_selected_runtimes_only() -> None:
    webhook = webhooks(ManifestOptions())[WEBHOOK_RUNTIMES]
    [rule] = webhook["rules"]
    assert rule["operations"] == ["CREATE", "UPDATE"]
    assert rule["resources"] == ["trainingruntimes", "clustertrainingruntimes"]
    # dispatch's runtime copies keep the checked label but are not sent: submitting a job
    # never waits for this webhook
    copies = {"key": "dispatch.dev/job", "operator": "DoesNotExist"}
    assert webhook["objectSelector"] == {
        "matchExpressions": [{"key": "dispatch.dev/checked", "operator": "Exists"}, copies]
    }
    assert webhook["clientConfig"]["service"]["path"] == PATH_RUNTIMES
    assert webhooks(FULL)[WEBHOOK_RUNTIMES]["objectSelector"] == {
        "matchLabels": {"team": "vision"},
        "matchExpressions": [{"key": "dispatch.dev/checked", "operator": "Exists"}, copies],
    }


def test_both_webhooks_share_their_settings() -> None:
    for options in (ManifestOptions(), FULL):
        for webhook in webhooks(options).values():
            assert webhook["admissionReviewVersions"] == ["v1"]
            assert webhook["sideEffects"] == "NoneOnDryRun"
            assert webhook["matchPolicy"] == "Equivalent"
            assert webhook["failurePolicy"] == options.failure_policy
            assert webhook["timeoutSeconds"] == options.timeout_seconds
            if options is FULL:
                assert webhook["clientConfig"]["caBundle"] == FULL.ca_bundle
                assert webhook["namespaceSelector"] == {
                    "matchLabels": {"dispatch.dev/guarded": "true"}
                }
            else:
                assert "caBundle" not in webhook["clientConfig"]
                assert "namespaceSelector" not in webhook
    assert {w["failurePolicy"] for w in webhooks(ManifestOptions()).values()} == {"Fail"}


def test_the_server_may_only_write_events() -> None:
    objects = by_kind(webhook_objects(FULL))
    assert objects["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}
    ]
    binding = objects["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "guard"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "guard", "namespace": "ml-guard"}
    ]
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"] == "guard"


def test_the_deployment_runs_two_hardened_replicas_across_nodes() -> None:
    objects = by_kind(webhook_objects(ManifestOptions()))
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert set(container["resources"]) == {"requests", "limits"}
    probes = {k: container[k]["httpGet"] for k in ("readinessProbe", "livenessProbe")}
    assert probes == {
        "readinessProbe": {"path": "/readyz", "port": "https", "scheme": "HTTPS"},
        "livenessProbe": {"path": "/healthz", "port": "https", "scheme": "HTTPS"},
    }
    assert container["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]
    assert {"name": "tls", "secret": {"secretName": "dispatch-admission-tls"}} in pod["volumes"]
    assert {"name": "tls", "mountPath": "/tls", "readOnly": True} in container["volumeMounts"]
    [spread] = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert spread["labelSelector"]["matchLabels"] == selector
    assert objects["PodDisruptionBudget"]["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": selector},
    }
    service = objects["Service"]["spec"]
    assert service["selector"] == selector
    assert service["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]


def test_the_server_arguments_are_ones_serve_accepts() -> None:
    from dispatch.cli.cmd_admission import command as admission

    args = server_args(FULL)
    assert args[:2] == ["admission", "serve"]
    serve = admission.commands["serve"]
    parsed = serve.make_context("serve", args[2:]).params
    assert str(parsed["cert_file"]) == "/tls/tls.crt"
    assert str(parsed["key_file"]) == "/tls/tls.key"
    assert parsed["port"] == 8443
    assert parsed["identities"] == (
        "system:serviceaccount:ml-guard:dispatch-supervisor",
        "ci-robot",
    )
    assert parsed["groups"] == ("ml-platform",)
    assert set(parsed["selector"]) == {"dispatch.dev/checked", "team=vision"}
    assert parsed["allow_rank_restart"] is False
    assert parsed["publish_init_container"] == "publish"
    deployment = by_kind(webhook_objects(FULL))["Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == args
    assert container["image"] == "registry.example.org/dispatch:9.9.9"


def test_the_defaults_match_what_deploy_installs() -> None:
    deployment = yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())
    [supervisor] = deployment["spec"]["template"]["spec"]["containers"]
    assert default_image() == supervisor["image"] == f"dispatch:{dispatch.__version__}"
    account = yaml.safe_load((REPO / "deploy/base/serviceaccount.yaml").read_text())
    assert supervisor_identity("dispatch") == (
        f"system:serviceaccount:dispatch:{account['metadata']['name']}"
    )
    assert ManifestOptions().all_identities == DEFAULT_IDENTITIES
    [container] = by_kind(webhook_objects(ManifestOptions()))["Deployment"]["spec"]["template"][
        "spec"
    ]["containers"]
    assert container["image"] == default_image()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"failure_policy": "Sometimes"}, "failure policy 'Sometimes'"),
        ({"timeout_seconds": 31}, "timeout 31 s"),
        ({"replicas": 0}, "replicas 0"),
        ({"runtime_selector": {}}, "the runtime selector is empty"),
        ({"name": "Guard"}, "name 'Guard'"),
        ({"name": "9guard"}, "starting with a letter"),
        ({"namespace": "ml_team"}, "namespace 'ml_team'"),
    ],
)
def test_options_the_api_would_refuse(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ManifestOptions(**options)


# --- the command ---------------------------------------------------------------------------


def run(*args: str) -> Any:
    return CliRunner().invoke(manifests, list(args))


def test_the_command_prints_a_yaml_stream_and_notes_on_stderr() -> None:
    result = run("--identity", "ci-robot")
    assert result.exit_code == 0, result.stderr
    printed = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    assert printed == webhook_objects(ManifestOptions(identities=("ci-robot",)))
    assert result.stdout.count("\n---\n") == len(printed) - 1
    assert "failurePolicy Fail" in result.stderr
    assert "dispatch admission certs --service dispatch-admission --namespace dispatch" in (
        result.stderr
    )
    assert "#" not in result.stdout.split("\n", 1)[0]


def test_the_command_prints_a_json_list() -> None:
    result = run("-o", "json", "--namespace", "ml", "--timeout", "7", "--failure-policy", "Ignore")
    assert result.exit_code == 0, result.stderr
    printed = json.loads(result.stdout)
    options = ManifestOptions(namespace="ml", timeout_seconds=7, failure_policy="Ignore")
    assert printed == {"apiVersion": "v1", "kind": "List", "items": webhook_objects(options)}


def test_the_command_prints_the_policies() -> None:
    result = run("--policy", "--group", "ml-platform", "--namespace-selector", "team=vision")
    assert result.exit_code == 0, result.stderr
    printed = list(yaml.safe_load_all(result.stdout))
    options = ManifestOptions(groups=("ml-platform",), namespace_selector={"team": "vision"})
    assert printed == policy_objects(options)
    assert [o["kind"] for o in printed] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ] * 2
    assert "dispatch-admission-ended" in result.stderr


def test_the_ca_bundle_comes_from_a_pem_file(tmp_path: Path) -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    (tmp_path / "ca.crt").write_bytes(pem)
    result = run("-o", "json", "--ca-file", str(tmp_path / "ca.crt"))
    assert result.exit_code == 0, result.stderr
    [configuration] = [
        o for o in json.loads(result.stdout)["items"] if o["kind"].startswith("Validating")
    ]
    bundles = {w["clientConfig"]["caBundle"] for w in configuration["webhooks"]}
    assert bundles == {base64.b64encode(pem).decode()}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ca-file", "{tmp}/missing.pem"], "cannot read {tmp}/missing.pem"),
        (["--ca-file", "{tmp}/not-a-cert"], "holds no PEM certificate"),
        (["--namespace-selector", "team"], "expected KEY=VALUE"),
        (["--runtime-selector", "=x"], "expected KEY or KEY=VALUE"),
        (["--namespace", "ML"], "namespace 'ML'"),
    ],
)
def test_bad_usage_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "not-a-cert").write_text("hello\n")
    result = run(*(a.format(tmp=tmp_path) for a in args))
    assert result.exit_code == 2
    assert message.format(tmp=tmp_path) in result.stderr
    assert result.stdout == ""


# --- kubectl apply -f - ----------------------------------------------------------------------


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
@pytest.mark.parametrize("output", ["yaml", "json"])
def test_kubectl_applies_what_the_command_prints(tmp_path: Path, output: str) -> None:
    """The real kubectl reads the stream (or the List) and the emulator stores every object."""
    from dispatch.testing.k8s import ClusterConfig, Emulator

    printed = [run("-o", output).stdout, run("-o", output, "--policy").stdout]
    with Emulator(ClusterConfig(), kubeconfig=tmp_path / "kubeconfig") as emulator:
        emulator.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dispatch"}})
        for stream in printed:
            applied = kubectl(
                emulator, tmp_path, "apply", "--validate=false", "-f", "-", stdin=stream
            )
            assert applied.returncode == 0, applied.stderr
        names = kubectl(
            emulator,
            tmp_path,
            "get",
            "-o",
            "name",
            "validatingwebhookconfigurations,validatingadmissionpolicies,"
            "validatingadmissionpolicybindings,clusterroles,clusterrolebindings",
        )
        assert names.returncode == 0, names.stderr
        for name in (
            "validatingwebhookconfiguration.admissionregistration.k8s.io/dispatch-admission",
            "validatingadmissionpolicy.admissionregistration.k8s.io/dispatch-admission-ended",
            "validatingadmissionpolicybinding.admissionregistration.k8s.io/dispatch-admission-owned",
            "clusterrole.rbac.authorization.k8s.io/dispatch-admission",
        ):
            assert name in names.stdout.split()
        listed = kubectl(
            emulator, tmp_path, "-n", "dispatch", "get", "deploy,svc,sa,pdb", "-o", "name"
        )
        assert len(listed.stdout.split()) == 4, listed.stdout + listed.stderr

"""Validating admission webhooks in the emulator, against a real HTTPS webhook server.

The server runs in its own thread (never on the emulator's loop: the emulator waits for it
synchronously), with certificates from ``admission.certs.issue``. Expected texts are kube's
(``k8s.io/apiserver/pkg/admission/plugin/webhook``, v1.33).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from dispatch.adapters.kubeflow.admission.certs import CertFiles, issue
from dispatch.testing.k8s import ClusterConfig, Emulator
from dispatch.testing.k8s.controllers import ClusterQueue, KueueConfig
from dispatch.testing.k8s.errors import ApiError

from .conftest import KUBECTL, kubectl
from .scenario_helpers import TRAINER, cluster, find, objects, trainjob, wait_for

JsonObj = dict[str, Any]
REG = "admissionregistration.k8s.io/v1"
SERVICE_NAME = "hook.webhooks.svc"
KUEUE_USER = "system:serviceaccount:kueue-system:kueue-controller-manager"


# ---------------------------------------------------------------------------- the webhook server


@dataclass
class Hook:
    """A small validating webhook. Each path answers one way; every review is recorded."""

    port: int = 0
    reviews: list[tuple[str, JsonObj]] = field(default_factory=list)
    #: ``/policy``: the review's request -> a refusal message, or None to allow
    policy: Callable[[JsonObj], str | None] = lambda request: None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self, path: str) -> list[JsonObj]:
        with self.lock:
            return [r["request"] for p, r in self.reviews if p == path]

    def answer(self, path: str, review: JsonObj) -> tuple[int, JsonObj | str]:
        uid = review["request"]["uid"]
        allow = {"uid": uid, "allowed": True}
        if path == "/deny":
            status = {"code": 403, "reason": "Forbidden", "message": "no thanks"}
            return 200, _review({"uid": uid, "allowed": False, "status": status})
        if path == "/deny-bare":
            return 200, _review({"uid": uid, "allowed": False, "status": {"message": "bare"}})
        if path == "/warn":
            return 200, _review({**allow, "warnings": ["careful", "twice careful"]})
        if path == "/slow":
            time.sleep(2.5)
        if path == "/patch":
            return 200, _review({**allow, "patchType": "JSONPatch", "patch": "W10="})
        if path == "/uid":
            return 200, _review({**allow, "uid": "not-yours"})
        if path == "/boom":
            return 500, "boom"
        if path == "/policy":
            refusal = self.policy(review["request"])
            if refusal is not None:
                status = {"code": 403, "reason": "Forbidden", "message": refusal}
                return 200, _review({"uid": uid, "allowed": False, "status": status})
        return 200, _review(allow)


def _review(response: JsonObj) -> JsonObj:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: the tests provoke TLS failures (a client that does not trust the server)."""


def serve(hook: Hook, certs: CertFiles) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            path, _, query = self.path.partition("?")
            review["query"] = query
            with hook.lock:
                hook.reviews.append((path, review))
            status, body = hook.answer(path, review)
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header(
                "Content-Type", "text/plain" if isinstance(body, str) else "application/json"
            )
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certs.cert, certs.key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    hook.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, name="webhook", daemon=True).start()
    return server


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return issue(["localhost", "127.0.0.1", SERVICE_NAME], tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def hook(certs: CertFiles) -> Iterator[Hook]:
    found = Hook()
    server = serve(found, certs)
    yield found
    server.shutdown()
    server.server_close()


@pytest.fixture
def emu(tmp_path: Path, hook: Hook) -> Iterator[Emulator]:
    with hook.lock:
        hook.reviews.clear()
    hook.policy = lambda request: None
    with Emulator(ClusterConfig(), kubeconfig=tmp_path / "kubeconfig") as emulator:
        yield emulator


@pytest.fixture
def core(emu: Emulator) -> Iterator[client.CoreV1Api]:
    api = config.new_client_from_config(str(emu.kubeconfig))
    yield client.CoreV1Api(api)
    api.close()


def configuration(name: str, *webhooks: JsonObj, labels: dict[str, str] | None = None) -> JsonObj:
    return {
        "apiVersion": REG,
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": labels or {}},
        "webhooks": list(webhooks),
    }


def webhook(
    name: str,
    hook: Hook,
    certs: CertFiles,
    path: str = "/allow",
    *,
    resources: tuple[str, ...] = ("configmaps",),
    operations: tuple[str, ...] = ("CREATE", "UPDATE"),
    groups: tuple[str, ...] = ("",),
    versions: tuple[str, ...] = ("v1",),
    scope: str = "*",
    **extra: Any,
) -> JsonObj:
    return {
        "name": name,
        "clientConfig": {
            "url": f"https://127.0.0.1:{hook.port}{path}",
            "caBundle": certs.ca_bundle,
        },
        "rules": [
            {
                "operations": list(operations),
                "apiGroups": list(groups),
                "apiVersions": list(versions),
                "resources": list(resources),
                "scope": scope,
            }
        ],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **extra,
    }


def register(emu: Emulator, *webhooks: JsonObj, name: str = "guard") -> JsonObj:
    return emu.create(configuration(name, *webhooks))


def configmap(name: str, labels: dict[str, str] | None = None) -> JsonObj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": {"k": "v"},
    }


def refused(call: Callable[[], object]) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    return caught.value


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------------------- configuration


def test_configuration_is_defaulted_and_validated(
    emu: Emulator, hook: Hook, certs: CertFiles
) -> None:
    stored = register(emu, webhook("ok.example.com", hook, certs))
    hook_ = stored["webhooks"][0]
    assert hook_["failurePolicy"] == "Fail"
    assert hook_["matchPolicy"] == "Equivalent"
    assert hook_["timeoutSeconds"] == 10
    assert hook_["namespaceSelector"] == {} and hook_["objectSelector"] == {}
    assert hook_["rules"][0]["scope"] == "*"

    bad = webhook("short", hook, certs, timeoutSeconds=31, failurePolicy="Sometimes")
    del bad["sideEffects"]
    bad["clientConfig"]["url"] = "http://127.0.0.1/x"
    error = refused(lambda: register(emu, bad, name="bad"))
    assert error.code == 422
    assert error.message == (
        'ValidatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: ['
        'webhooks[0].name: Invalid value: "short": should be a domain with at least three '
        "segments separated by dots, "
        'webhooks[0].failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", '
        '"Ignore", '
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, "
        "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 "
        "and 30 seconds, "
        "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed "
        "URL scheme; desired format: https://host[/path]]"
    )

    both = webhook("both.example.com", hook, certs, sideEffects="Some")
    both["clientConfig"]["service"] = {"namespace": "webhooks", "name": "hook"}
    both["admissionReviewVersions"] = []
    error = refused(lambda: register(emu, both, both, name="both"))
    causes = {(c["field"], c["message"]) for c in (error.details or {})["causes"]}
    assert ("webhooks[0].sideEffects", 'Unsupported value: "Some": supported values: "None", '
            '"NoneOnDryRun"') in causes  # fmt: skip
    assert ("webhooks[0].clientConfig", "Required value: exactly one of url or service is "
            "required") in causes  # fmt: skip
    assert ("webhooks[0].admissionReviewVersions",
            "Required value: must specify one of v1, v1beta1") in causes  # fmt: skip
    assert ("webhooks[1].name", 'Duplicate value: "both.example.com"') in causes


def test_kubectl_applies_and_lists_configurations(
    emu: Emulator, hook: Hook, certs: CertFiles, tmp_path: Path
) -> None:
    if KUBECTL is None:
        pytest.skip("no kubectl on this machine")
    manifest = [
        configuration("from-kubectl", webhook("a.example.com", hook, certs)),
        {
            "apiVersion": REG,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "no-bad"},
            "spec": {
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["configmaps"],
                        }
                    ]
                },
                "validations": [{"expression": "!has(object.data) || !('bad' in object.data)"}],
            },
        },
        {
            "apiVersion": REG,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "no-bad"},
            "spec": {"policyName": "no-bad", "validationActions": ["Deny"]},
        },
    ]
    text = "\n---\n".join(json.dumps(m) for m in manifest)
    applied = kubectl(emu, tmp_path, "apply", "--validate=false", "-f", "-", stdin=text)
    assert applied.returncode == 0, applied.stderr
    assert "validatingwebhookconfiguration.admissionregistration.k8s.io/from-kubectl created" in (
        applied.stdout
    )
    listed = kubectl(emu, tmp_path, "get", "validatingwebhookconfigurations")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "WEBHOOKS", "AGE"]
    assert row.split()[:2] == ["from-kubectl", "1"]
    bindings = kubectl(emu, tmp_path, "get", "validatingadmissionpolicybindings")
    header, row = bindings.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "POLICYNAME", "PARAMREF", "AGE"]
    assert row.split()[:3] == ["no-bad", "no-bad", "<unset>"]
    # the policy refuses, as kube-apiserver would, before any webhook is called
    denied = kubectl(
        emu,
        tmp_path,
        "create",
        "--validate=false",
        "-f",
        "-",
        stdin=json.dumps({**configmap("c"), "data": {"bad": "1"}}),
    )
    assert "ValidatingAdmissionPolicy 'no-bad' with binding 'no-bad' denied request" in (
        denied.stderr
    )
    assert hook.seen("/allow") == []


# ---------------------------------------------------------------------------- calls


def test_allowed_review_carries_what_kube_sends(
    emu: Emulator, hook: Hook, certs: CertFiles, core: client.CoreV1Api
) -> None:
    register(emu, webhook("record.example.com", hook, certs, "/allow"))
    core.create_namespaced_config_map("default", configmap("c1"))
    core.patch_namespaced_config_map("c1", "default", {"data": {"k": "w"}})
    created, updated = hook.seen("/allow")
    assert created["operation"] == "CREATE" and updated["operation"] == "UPDATE"
    assert created["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert created["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert created["requestKind"] == created["kind"]
    assert created["requestResource"] == created["resource"]
    assert (created["name"], created["namespace"]) == ("c1", "default")
    assert created["userInfo"] == {
        "username": "kubernetes-admin",
        "groups": ["system:masters", "system:authenticated"],
    }
    assert created["object"]["data"] == {"k": "v"} and created["oldObject"] is None
    assert created["dryRun"] is False
    assert created["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert updated["oldObject"]["data"] == {"k": "v"} and updated["object"]["data"] == {"k": "w"}
    assert updated["options"]["kind"] == "UpdateOptions"
    assert created["uid"] != updated["uid"]
    queries = [r["query"] for p, r in hook.reviews]
    assert queries == ["timeout=10s", "timeout=10s"]


def test_denial_through_the_official_client_and_kubectl(
    emu: Emulator, hook: Hook, certs: CertFiles, core: client.CoreV1Api, tmp_path: Path
) -> None:
    register(emu, webhook("deny.example.com", hook, certs, "/deny"))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("default", configmap("c1"))
    assert caught.value.status == 403
    body = json.loads(caught.value.body)
    assert body["message"] == 'admission webhook "deny.example.com" denied the request: no thanks'
    assert body["reason"] == "Forbidden" and body["code"] == 403
    assert core.list_namespaced_config_map("default").items == []
    if KUBECTL is not None:
        out = kubectl(
            emu,
            tmp_path,
            "create",
            "--validate=false",
            "-f",
            "-",
            stdin=json.dumps(configmap("c2")),
        )
        assert out.returncode == 1
        assert out.stderr.strip() == (
            'Error from server (Forbidden): error when creating "STDIN": admission webhook '
            '"deny.example.com" denied the request: no thanks'
        )


def test_denial_without_a_code_is_400(emu: Emulator, hook: Hook, certs: CertFiles) -> None:
    register(emu, webhook("bare.example.com", hook, certs, "/deny-bare"))
    error = refused(lambda: emu.create(configmap("c1")))
    assert (error.code, error.reason) == (400, "")
    assert error.message == 'admission webhook "bare.example.com" denied the request: bare'


def test_warnings_are_response_headers(emu: Emulator, hook: Hook, certs: CertFiles) -> None:
    register(emu, webhook("warn.example.com", hook, certs, "/warn"))
    request = urllib.request.Request(
        f"{emu.url}/api/v1/namespaces/default/configmaps",
        data=json.dumps(configmap("c1")).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request) as response:
        assert response.status == 201
        assert response.headers.get_all("Warning") == ['299 - "careful"', '299 - "twice careful"']


def test_service_reference_is_routed_and_verified_for_its_dns_name(
    emu: Emulator, hook: Hook, certs: CertFiles, tmp_path: Path
) -> None:
    by_service = webhook("svc.example.com", hook, certs, "/deny")
    by_service["clientConfig"] = {
        "service": {"namespace": "webhooks", "name": "hook", "path": "/deny"},
        "caBundle": certs.ca_bundle,
    }
    register(emu, by_service)
    emu.route_service("webhooks", "hook", 443, ("127.0.0.1", hook.port))
    error = refused(lambda: emu.create(configmap("c1")))
    assert error.message == 'admission webhook "svc.example.com" denied the request: no thanks'

    other_ca = issue(["localhost"], tmp_path / "other")
    wrong = json.loads(json.dumps(by_service))
    wrong["name"] = "wrong-ca.example.com"
    wrong["clientConfig"]["caBundle"] = other_ca.ca_bundle
    register(emu, wrong, name="a-first")  # sorted by name: called first
    error = refused(lambda: emu.create(configmap("c2")))
    assert (error.code, error.reason) == (500, "InternalError")
    assert error.message == (
        'Internal error occurred: failed calling webhook "wrong-ca.example.com": failed to call '
        'webhook: Post "https://hook.webhooks.svc:443/deny?timeout=10s": tls: failed to verify '
        "certificate: x509: certificate signed by unknown authority"
    )


def test_unrouted_service_fails_closed(emu: Emulator, hook: Hook, certs: CertFiles) -> None:
    hooked = webhook("nowhere.example.com", hook, certs)
    hooked["clientConfig"] = {"service": {"namespace": "webhooks", "name": "nowhere"}}
    register(emu, hooked)
    error = refused(lambda: emu.create(configmap("c1")))
    assert error.message == (
        'Internal error occurred: failed calling webhook "nowhere.example.com": failed to call '
        'webhook: Post "https://nowhere.webhooks.svc:443?timeout=10s": dial tcp: lookup '
        "nowhere.webhooks.svc: no such host"
    )


# ---------------------------------------------------------------------------- matching


def test_selectors(emu: Emulator, hook: Hook, certs: CertFiles) -> None:
    register(
        emu,
        webhook(
            "ns.example.com", hook, certs, "/deny",
            resources=("configmaps", "namespaces", "clustertrainingruntimes"),
            groups=("", "trainer.kubeflow.org"), versions=("v1", "v1alpha1"),
            namespaceSelector={"matchLabels": {"guarded": "yes"}},
        ),
        webhook(
            "obj.example.com", hook, certs, "/deny-bare",
            objectSelector={"matchExpressions": [{"key": "guarded", "operator": "Exists"}]},
        ),
    )  # fmt: skip
    emu.create(configmap("free"))  # neither: an unlabelled namespace and object
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "plain"}})
    error = refused(
        lambda: emu.create(
            {"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": "g", "labels": {"guarded": "yes"}}}
        )
    )  # fmt: skip
    assert "ns.example.com" in error.message  # a Namespace is matched on its own labels
    # cluster-scoped objects other than Namespaces always match a namespaceSelector
    runtime = {"apiVersion": TRAINER, "kind": "ClusterTrainingRuntime",
               "metadata": {"name": "r"}, "spec": {"template": {"spec": {}}}}  # fmt: skip
    error = refused(lambda: emu.create(runtime))
    assert "ns.example.com" in error.message
    # the object selector: the new object's labels, or the old one's
    error = refused(lambda: emu.create(configmap("g", {"guarded": "1"})))
    assert error.message == 'admission webhook "obj.example.com" denied the request: bare'
    cluster_ = emu.cluster
    cm_type = cluster_.rtype("v1", "ConfigMap")
    emu.call(lambda: cluster_.store.system_write(cm_type, {
        **configmap("was", {"guarded": "1"}),
        "metadata": {"name": "was", "namespace": "default", "labels": {"guarded": "1"},
                     "uid": "u-was", "resourceVersion": "1"}}))  # fmt: skip
    error = refused(
        lambda: emu.call(
            lambda: cluster_.store.patch(
                cm_type, "default", "was", "application/merge-patch+json",
                {"metadata": {"labels": None}},
            )
        )
    )  # fmt: skip
    assert "obj.example.com" in error.message
    assert [r["name"] for r in hook.seen("/deny")] == ["g", "r"]


def test_rules_operations_subresources_and_scope(
    emu: Emulator, hook: Hook, certs: CertFiles
) -> None:
    register(
        emu,
        webhook("upd.example.com", hook, certs, "/allow", operations=("UPDATE",)),
        webhook("status.example.com", hook, certs, "/warn", resources=("pods/status",),
                operations=("*",)),
        webhook("all.example.com", hook, certs, "/boom", resources=("*/*",), groups=("*",),
                versions=("*",), scope="Cluster", failurePolicy="Ignore"),
    )  # fmt: skip
    emu.create(configmap("c1"))
    assert hook.seen("/allow") == []  # CREATE is not in the rule
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}}  # fmt: skip
    emu.create(pod)
    assert hook.seen("/warn") == []  # pods, not pods/status
    cluster_ = emu.cluster
    pod_type = cluster_.rtype("v1", "Pod")
    emu.call(lambda: cluster_.store.patch(pod_type, "default", "p", "application/merge-patch+json",
                                          {"status": {"phase": "Running"}}, subresource="status"))  # fmt: skip
    (status,) = hook.seen("/warn")
    assert (status["subResource"], status["requestSubResource"]) == ("status", "status")
    assert status["kind"]["kind"] == "Pod"
    # scope Cluster: the Namespace and the cluster-scoped objects only
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n2"}})
    assert sorted(r["name"] for r in hook.seen("/boom")) == ["n2"]


def test_match_policy_equivalent_converts_exact_does_not(
    emu: Emulator, hook: Hook, certs: CertFiles
) -> None:
    register(
        emu,
        webhook("equivalent.example.com", hook, certs, "/allow", resources=("events",),
                groups=("events.k8s.io",), operations=("CREATE",)),
        webhook("exact.example.com", hook, certs, "/warn", resources=("events",),
                groups=("events.k8s.io",), operations=("CREATE",), matchPolicy="Exact"),
    )  # fmt: skip
    emu.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
                "involvedObject": {"kind": "Pod", "name": "p"}, "message": "hello",
                "reason": "R", "type": "Normal"})  # fmt: skip
    (seen,) = hook.seen("/allow")
    assert seen["kind"] == {"group": "events.k8s.io", "version": "v1", "kind": "Event"}
    assert seen["resource"]["group"] == "events.k8s.io"
    assert seen["requestKind"] == {"group": "", "version": "v1", "kind": "Event"}
    assert seen["object"]["apiVersion"] == "events.k8s.io/v1"
    assert seen["object"]["note"] == "hello" and "message" not in seen["object"]
    assert hook.seen("/warn") == []


def test_match_conditions(emu: Emulator, hook: Hook, certs: CertFiles) -> None:
    guarded = {"name": "guarded", "expression": "object.metadata.name.startsWith('guarded-')"}
    register(emu, webhook("cond.example.com", hook, certs, "/deny", matchConditions=[guarded]))
    emu.create(configmap("free"))
    assert "cond.example.com" in refused(lambda: emu.create(configmap("guarded-1"))).message
    assert [r["name"] for r in hook.seen("/deny")] == ["guarded-1"]

    broken = {"name": "broken", "expression": "object.data.missing == 'x'"}
    register(emu, webhook("broken.example.com", hook, certs, "/deny", matchConditions=[broken]),
             name="a-broken")  # fmt: skip
    error = refused(lambda: emu.create(configmap("c1")))
    assert (error.code, error.reason) == (403, "Forbidden")
    assert error.message == (
        "configmaps \"c1\" is forbidden: expression 'object.data.missing == 'x'' resulted in "
        "error: no such key: missing"
    )
    error = refused(
        lambda: register(
            emu,
            webhook(
                "bad.example.com",
                hook,
                certs,
                matchConditions=[{"name": "x", "expression": "object.("}],
            ),
            name="bad",
        )
    )
    assert error.code == 422
    assert (error.details or {})["causes"][0][
        "field"
    ] == "webhooks[0].matchConditions[0].expression"
    assert "compilation failed: ERROR: <input>:1:" in error.message


# ---------------------------------------------------------------------------- failures


def test_timeout_with_fail_and_with_ignore(emu: Emulator, hook: Hook, certs: CertFiles) -> None:
    register(emu, webhook("slow.example.com", hook, certs, "/slow", timeoutSeconds=1))
    started = time.monotonic()
    error = refused(lambda: emu.create(configmap("c1")))
    assert time.monotonic() - started < 2.4
    assert (error.code, error.reason) == (500, "InternalError")
    assert error.message == (
        'Internal error occurred: failed calling webhook "slow.example.com": failed to call '
        f'webhook: Post "https://127.0.0.1:{hook.port}/slow?timeout=1s": context deadline exceeded'
    )
    assert (error.details or {})["causes"] == [{"message": error.message.removeprefix(
        "Internal error occurred: ")}]  # fmt: skip
    register(emu, webhook("slow.example.com", hook, certs, "/slow", timeoutSeconds=1,
                          failurePolicy="Ignore"), name="lenient")  # fmt: skip
    cluster_ = emu.cluster
    vwc = cluster_.rtype(REG, "ValidatingWebhookConfiguration")
    emu.call(lambda: cluster_.store.delete(vwc, None, "guard"))
    assert emu.create(configmap("c2"))["metadata"]["name"] == "c2"


def test_webhook_down_fails_closed_or_open(emu: Emulator, hook: Hook, certs: CertFiles) -> None:
    port = free_port()
    down = webhook("down.example.com", hook, certs)
    down["clientConfig"]["url"] = f"https://127.0.0.1:{port}/validate"
    register(emu, down)
    error = refused(lambda: emu.create(configmap("c1")))
    assert (error.code, error.reason) == (500, "InternalError")
    assert error.message == (
        'Internal error occurred: failed calling webhook "down.example.com": failed to call '
        f'webhook: Post "https://127.0.0.1:{port}/validate?timeout=10s": dial tcp '
        f"127.0.0.1:{port}: connect: connection refused"
    )
    cluster_ = emu.cluster
    vwc = cluster_.rtype(REG, "ValidatingWebhookConfiguration")
    lenient = emu.call(lambda: cluster_.store.get(vwc, None, "guard"))
    lenient["webhooks"][0]["failurePolicy"] = "Ignore"
    emu.call(lambda: cluster_.store.update(vwc, None, "guard", lenient))
    assert emu.create(configmap("c2"))["metadata"]["name"] == "c2"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/patch", "received invalid webhook response: validating webhook may not return "
                   "response.patchType"),
        ("/uid", 'received invalid webhook response: expected response.uid="{uid}", got '
                 '"not-yours"'),
        ("/boom", 'failed to call webhook: an error on the server ("boom") has prevented the '
                  "request from succeeding"),
    ],
)  # fmt: skip
def test_bad_answers_are_call_failures(
    emu: Emulator, hook: Hook, certs: CertFiles, path: str, reason: str
) -> None:
    register(emu, webhook("bad.example.com", hook, certs, path))
    error = refused(lambda: emu.create(configmap("c1")))
    (review,) = hook.seen(path)
    assert error.code == 500
    assert error.message == (
        'Internal error occurred: failed calling webhook "bad.example.com": '
        + reason.format(uid=review["uid"])
    )


# ---------------------------------------------------------------------------- dry run, users


def test_dry_run_is_passed_through_and_side_effects_refused(
    emu: Emulator, hook: Hook, certs: CertFiles, core: client.CoreV1Api
) -> None:
    register(emu, webhook("dry.example.com", hook, certs, "/allow", sideEffects="NoneOnDryRun"))
    core.create_namespaced_config_map("default", configmap("c1"), dry_run="All")
    (seen,) = hook.seen("/allow")
    assert seen["dryRun"] is True and seen["options"]["dryRun"] == ["All"]
    assert core.list_namespaced_config_map("default").items == []
    # v1 stores no other sideEffects; one written by hand is refused on a dry run, as kube does
    cluster_ = emu.cluster
    vwc = cluster_.rtype(REG, "ValidatingWebhookConfiguration")
    stored = emu.call(lambda: cluster_.store.get(vwc, None, "guard"))
    stored["webhooks"][0]["sideEffects"] = "Some"
    emu.call(lambda: cluster_.store.system_write(vwc, stored))
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_config_map("default", configmap("c2"), dry_run="All")
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["message"] == (
        'admission webhook "dry.example.com" does not support dry run'
    )
    assert len(hook.seen("/allow")) == 1
    core.create_namespaced_config_map("default", configmap("c3"))  # not a dry run: called
    assert len(hook.seen("/allow")) == 2


def test_the_webhook_sees_who_asks(
    emu: Emulator, hook: Hook, certs: CertFiles, tmp_path: Path
) -> None:
    register(emu, webhook("who.example.com", hook, certs, "/allow"))
    emu.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})
    emu.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "robot-edit"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "robot-cm",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"}],
        }
    )
    emu.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "robot-cm"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]})  # fmt: skip
    path = emu.service_account_kubeconfig(tmp_path / "robot", "default", "robot")
    api = config.new_client_from_config(str(path))
    try:
        client.CoreV1Api(api).create_namespaced_config_map("default", configmap("by-robot"))
    finally:
        api.close()
    emu.create(configmap("by-admin"))
    cluster_ = emu.cluster
    cm_type = cluster_.rtype("v1", "ConfigMap")
    controller = cluster_.builtin_controllers[0]  # the disruption controller's identity
    with_user = getattr(controller, "user")  # noqa: B009 (a class attribute of Reconciler)

    def as_controller() -> None:
        with cluster_.store.acting_as(with_user):
            cluster_.store.create(cm_type, "default", configmap("by-controller"))

    emu.call(as_controller)
    users = {r["name"]: r["userInfo"]["username"] for r in hook.seen("/allow")}
    assert users == {
        "by-robot": "system:serviceaccount:default:robot",
        "by-admin": "kubernetes-admin",
        "by-controller": "system:serviceaccount:kube-system:disruption-controller",
    }
    robot = next(r for r in hook.seen("/allow") if r["name"] == "by-robot")
    assert robot["userInfo"]["groups"] == [
        "system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]  # fmt: skip


# ---------------------------------------------------------------------------- Kueue


def _resumes_by_kueue(request: JsonObj) -> str | None:
    old, new = request.get("oldObject") or {}, request["object"]
    resumed = (old.get("spec") or {}).get("suspend") and not new["spec"].get("suspend")
    if resumed and request["userInfo"]["username"] == KUEUE_USER:
        return f"TrainJob {new['metadata']['name']} may not resume"
    return None


def test_kueue_survives_a_refused_unsuspend(hook: Hook, certs: CertFiles) -> None:
    """A webhook refusing Kueue's unsuspend: the TrainJob stays suspended, its Workload stays
    admitted, Kueue retries with backoff and is not broken; without the webhook it starts."""
    with hook.lock:
        hook.reviews.clear()
    hook.policy = _resumes_by_kueue
    kueue = KueueConfig(cluster_queues=(ClusterQueue("cq", {"cpu": "8"}, local_queues=("q",)),))
    with cluster(None, kueue, time_scale=20) as emu:
        register(emu, webhook("resume.example.com", hook, certs, "/policy",
                              resources=("trainjobs",), groups=("trainer.kubeflow.org",),
                              versions=("v1alpha1",), operations=("UPDATE",)))  # fmt: skip
        emu.create(trainjob("tj", labels={"kueue.x-k8s.io/queue-name": "q"}))

        def refusals() -> int:
            return sum(1 for r in hook.seen("/policy") if _resumes_by_kueue(r) is not None)

        wait_for("Kueue refused twice", lambda: refusals() >= 2)
        first = len(hook.seen("/policy"))
        tj = find(emu, TRAINER, "TrainJob", "tj")
        assert tj is not None and tj["spec"]["suspend"] is True
        (wl,) = objects(emu, "kueue.x-k8s.io/v1beta2", "Workload")
        admitted = [c for c in wl["status"]["conditions"] if c["type"] == "Admitted"]
        assert admitted and admitted[0]["status"] == "True"
        assert emu.cluster.controller_errors == []
        cluster_ = emu.cluster
        vwc = cluster_.rtype(REG, "ValidatingWebhookConfiguration")
        emu.call(lambda: cluster_.store.delete(vwc, None, "guard"))
        wait_for(
            "resumed once the webhook is gone",
            lambda: (
                (find(emu, TRAINER, "TrainJob", "tj") or {}).get("spec", {}).get("suspend") is False
            ),
        )
        assert len(hook.seen("/policy")) >= first
        refused_by = {r["userInfo"]["username"] for r in hook.seen("/policy")
                      if _resumes_by_kueue(r)}  # fmt: skip
        assert refused_by == {KUEUE_USER}

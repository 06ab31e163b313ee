"""Issue 27, the core workload APIs around a training job, through the official ``kubernetes``
client and raw HTTP: PodDisruptionBudgets and ``pods/eviction`` (item 6), Service defaulting,
allocation, deletion and strategic merge (item 8), Leases, Deployments, ServiceAccounts and RBAC
enforced on ServiceAccount tokens with access reviews that agree with it.

Expected answers are kube-apiserver's (pkg/registry/core/pod/storage/eviction.go,
pkg/controller/disruption, pkg/registry/core/service, plugin/pkg/auth/authorizer/rbac).
"""

from __future__ import annotations

import ipaddress
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from dispatch.testing.k8s import ClusterConfig, Emulator  # noqa: E402

from .conftest import pod  # noqa: E402

JsonObj = dict[str, Any]
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def api(emulator: Emulator) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(str(emulator.kubeconfig))
    yield api_client
    api_client.close()


def _http(
    emulator: Emulator,
    path: str,
    method: str = "GET",
    body: Any = None,
    *,
    token: str | None = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """One request as raw JSON: (status code, decoded body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(emulator.url + path, data=data, method=method)
    request.add_header("Content-Type", content_type)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _status(exc: ApiException) -> JsonObj:
    body: JsonObj = json.loads(exc.body)
    return body


def _wait(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


# ---------------------------------------------------------------------------------- item 6


def _running(
    core: client.CoreV1Api,
    name: str,
    labels: dict[str, str],
    *,
    ready: bool = True,
    owner: JsonObj | None = None,
    finalizer: bool = False,
) -> None:
    """A pod bound to node-1 that its kubelet reports Running (and Ready or not)."""
    body: JsonObj = pod(name, labels)
    body["spec"]["nodeName"] = "node-1"  # type: ignore[index]
    if owner is not None:
        body["metadata"]["ownerReferences"] = [owner]  # type: ignore[index]
    if finalizer:
        body["metadata"]["finalizers"] = ["example.com/keep"]  # type: ignore[index]
    core.create_namespaced_pod("default", body)
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    core.patch_namespaced_pod_status(name, "default", {"status": status})


def _budget(policy: client.PolicyV1Api, name: str, **spec: Any) -> JsonObj:
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "train"}}, **spec},
    }
    policy.create_namespaced_pod_disruption_budget("default", body)
    return _settled(policy, name)


def _settled(policy: client.PolicyV1Api, name: str) -> JsonObj:
    """The budget once the disruption controller has written its status for this spec."""

    def read() -> JsonObj | None:
        found = policy.api_client.sanitize_for_serialization(
            policy.read_namespaced_pod_disruption_budget(name, "default")
        )
        status = found.get("status") or {}
        settled = status.get("observedGeneration") == found["metadata"]["generation"]
        return found if settled else None

    found = _wait(read)
    assert found, f"budget {name} never observed"
    return found  # type: ignore[no-any-return]


def _evict(core: client.CoreV1Api, name: str) -> Any:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace="default"))
    return core.create_namespaced_pod_eviction(name, "default", body)


def test_policy_and_eviction_are_in_discovery(api: client.ApiClient) -> None:
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert groups["policy"].preferred_version.group_version == "policy/v1"
    core = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    eviction = core["pods/eviction"]
    assert (eviction.group, eviction.version, eviction.kind) == ("policy", "v1", "Eviction")
    assert eviction.verbs == ["create"]
    policy = {r.name: r for r in client.PolicyV1Api(api).get_api_resources().resources}
    assert policy["poddisruptionbudgets"].short_names == ["pdb"]


def test_budget_status_as_the_disruption_controller_computes_it(api: client.ApiClient) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    for name in ("a", "b", "c"):
        _running(core, name, {"app": "train"})
    _running(core, "unready", {"app": "train"}, ready=False)
    status = _budget(policy, "pdb", minAvailable=2)["status"]
    assert {k: status[k] for k in ("currentHealthy", "desiredHealthy", "expectedPods")} == {
        "currentHealthy": 3,
        "desiredHealthy": 2,
        "expectedPods": 4,
    }
    assert status["disruptionsAllowed"] == 1 and status["observedGeneration"] == 1
    (allowed,) = status["conditions"]
    assert (allowed["type"], allowed["status"], allowed["reason"], allowed["message"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
        "",
    )
    # a spec change: generation 2, then the controller catches up
    policy.patch_namespaced_pod_disruption_budget("pdb", "default", {"spec": {"minAvailable": 3}})
    status = _settled(policy, "pdb")["status"]
    assert status["observedGeneration"] == 2 and status["disruptionsAllowed"] == 0
    assert status["conditions"][0]["reason"] == "InsufficientPods"


def test_percentages_read_the_controllers_scale(api: client.ApiClient) -> None:
    core, policy, apps = client.CoreV1Api(api), client.PolicyV1Api(api), client.AppsV1Api(api)
    deployment = apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 4,
                "selector": {"matchLabels": {"app": "train"}},
                "template": {
                    "metadata": {"labels": {"app": "train"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        },
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "uid": deployment.metadata.uid,
        "controller": True,
    }
    for name in ("a", "b", "c"):
        _running(core, name, {"app": "train"}, owner=owner)
    status = _budget(policy, "half", maxUnavailable="50%")["status"]
    # expected = the Deployment's 4 replicas (3 exist); desired = 4 - ceil(50% of 4)
    assert (status["expectedPods"], status["desiredHealthy"], status["currentHealthy"]) == (4, 2, 3)
    assert status["disruptionsAllowed"] == 1


def test_a_percentage_over_job_pods_fails_the_sync(api: client.ApiClient) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    job = client.BatchV1Api(api).create_namespaced_job(
        "default",
        {
            "metadata": {"name": "j"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox"}],
                    }
                }
            },
        },
    )
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": job.metadata.uid,
             "controller": True}  # fmt: skip
    _running(core, "a", {"app": "train"}, owner=owner)
    policy.create_namespaced_pod_disruption_budget(
        "default",
        {"metadata": {"name": "p"}, "spec": {"maxUnavailable": "10%",
                                             "selector": {"matchLabels": {"app": "train"}}}},
    )  # fmt: skip

    def failed() -> JsonObj | None:
        got = policy.read_namespaced_pod_disruption_budget("p", "default")
        conditions = got.status.conditions or []
        return conditions[0] if conditions and conditions[0].reason == "SyncFailed" else None

    condition = _wait(failed)
    assert condition is not None
    assert condition.message == "jobs.batch does not implement the scale subresource"


def test_eviction_decrements_the_budget_then_answers_429(
    api: client.ApiClient, emulator: Emulator
) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    for name in ("a", "b", "c"):
        _running(core, name, {"app": "train"})
    _budget(policy, "pdb", minAvailable=2)
    # the official client's create_namespaced_pod_eviction decodes the answer as a V1Eviction;
    # the raw answer is the Status the server writes
    code, answer = _http(
        emulator,
        "/api/v1/namespaces/default/pods/a/eviction",
        "POST",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}},
    )
    assert (code, answer) == (
        201,
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
    )
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("a", "default")
    assert gone.value.status == 404
    after = policy.read_namespaced_pod_disruption_budget("pdb", "default")
    assert after.status.disruptions_allowed == 0
    with pytest.raises(ApiException) as refused:
        _evict(core, "b")
    assert refused.value.status == 429
    status = _status(refused.value)
    assert status["reason"] == "TooManyRequests" and status["message"] == VIOLATION
    assert status["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget pdb needs 2 healthy pods and has 2 currently",
            }
        ]
    }
    assert core.read_namespaced_pod("b", "default").metadata.deletion_timestamp is None


def test_evicted_pod_is_marked_and_deleted_gracefully(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    _running(core, "kept", {"app": "other"}, finalizer=True)
    _evict(core, "kept")
    evicted = core.read_namespaced_pod("kept", "default")
    assert evicted.metadata.deletion_timestamp is not None
    target = next(c for c in evicted.status.conditions if c.type == "DisruptionTarget")
    assert (target.status, target.reason, target.message) == (
        "True",
        "EvictionByEvictionAPI",
        "Eviction API: evicting",
    )


def test_pods_not_running_or_not_ready_ignore_a_met_budget(api: client.ApiClient) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    for name in ("a", "b"):
        _running(core, name, {"app": "train"})
    _running(core, "sick", {"app": "train"}, ready=False)
    core.create_namespaced_pod("default", pod("pending", {"app": "train"}))
    _budget(policy, "all", minAvailable=2)  # 2 healthy of 2 desired: no disruption allowed
    _evict(core, "pending")  # Pending: budgets do not apply
    _evict(core, "sick")  # not Ready, the budget is met: let go without using it
    names = {p.metadata.name for p in core.list_namespaced_pod("default").items}
    assert names == {"a", "b"}
    with pytest.raises(ApiException) as refused:
        _evict(core, "a")
    assert refused.value.status == 429


def test_two_budgets_and_missing_pods(api: client.ApiClient, emulator: Emulator) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    _running(core, "a", {"app": "train"})
    _budget(policy, "one", minAvailable=0)
    _budget(policy, "two", minAvailable=0)
    code, body = _http(
        emulator,
        "/api/v1/namespaces/default/pods/a/eviction",
        "POST",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}},
    )
    assert code == 500
    assert body["message"] == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does "
        "not support."
    )
    with pytest.raises(ApiException) as missing:
        _evict(core, "nobody")
    assert missing.value.status == 404
    assert _status(missing.value)["message"] == 'pods "nobody" not found'
    code, body = _http(
        emulator,
        "/api/v1/namespaces/default/pods/a/eviction",
        "POST",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "b"}},
    )
    assert (code, body["message"]) == (400, "name in URL does not match name in Eviction object")


# ---------------------------------------------------------------------------------- item 8


def _service(name: str, **spec: Any) -> JsonObj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": "train"}, "ports": [{"port": 80}], **spec},
    }


def test_service_defaults_and_cluster_ip(emulator: Emulator) -> None:
    code, svc = _http(emulator, "/api/v1/namespaces/default/services", "POST", _service("web"))
    assert code == 201
    spec = svc["spec"]
    assert ipaddress.ip_address(spec["clusterIP"]) in ipaddress.ip_network("10.96.0.0/12")
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    assert {k: spec[k] for k in ("type", "sessionAffinity", "internalTrafficPolicy")} == {
        "type": "ClusterIP",
        "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster",
    }
    assert (spec["ipFamilies"], spec["ipFamilyPolicy"]) == (["IPv4"], "SingleStack")
    assert svc["status"] == {"loadBalancer": {}}
    assert "generation" not in svc["metadata"]  # the Service strategy sets none
    _, other = _http(emulator, "/api/v1/namespaces/default/services", "POST", _service("api"))
    assert other["spec"]["clusterIP"] != spec["clusterIP"]


def test_headless_and_node_port_services(emulator: Emulator) -> None:
    path = "/api/v1/namespaces/default/services"
    _, headless = _http(emulator, path, "POST", _service("pods", clusterIP="None"))
    assert (headless["spec"]["clusterIP"], headless["spec"]["clusterIPs"]) == ("None", ["None"])
    assert headless["spec"]["ipFamilyPolicy"] == "SingleStack"
    no_selector = _service("dns", clusterIP="None")
    del no_selector["spec"]["selector"]
    _, dns = _http(emulator, path, "POST", no_selector)
    assert (dns["spec"]["ipFamilyPolicy"], dns["spec"]["ipFamilies"]) == (
        "RequireDualStack",
        ["IPv4", "IPv6"],
    )
    _, node_port = _http(emulator, path, "POST", _service("np", type="NodePort"))
    assert 30000 <= node_port["spec"]["ports"][0]["nodePort"] <= 32767
    assert node_port["spec"]["externalTrafficPolicy"] == "Cluster"
    code, bad = _http(emulator, path, "POST", _service("x", clusterIP="192.168.0.1"))
    assert code == 422
    assert bad["message"] == (
        'Service "x" is invalid: spec.clusterIPs: Invalid value: []string{"192.168.0.1"}: '
        "failed to allocate IP 192.168.0.1: the provided IP (192.168.0.1) is not in the valid "
        "range. The range of valid IPs is 10.96.0.0/12"
    )


def test_cluster_ip_is_immutable_and_kept_on_update(emulator: Emulator) -> None:
    path = "/api/v1/namespaces/default/services/web"
    _, svc = _http(emulator, "/api/v1/namespaces/default/services", "POST", _service("web"))
    ip = svc["spec"]["clusterIP"]
    code, put = _http(emulator, path, "PUT", _service("web", selector={"app": "other"}))
    assert code == 200 and put["spec"]["clusterIP"] == ip  # left out: kept
    code, refused = _http(
        emulator,
        path,
        "PATCH",
        {"spec": {"clusterIP": "10.96.7.7"}},
        content_type="application/merge-patch+json",
    )
    assert code == 422
    assert refused["message"] == (
        'Service "web" is invalid: spec.clusterIPs[0]: Invalid value: []string{"10.96.7.7"}: '
        "may not change once set"
    )


def test_service_ports_merge_by_port(emulator: Emulator) -> None:
    path = "/api/v1/namespaces/default/services/web"
    _http(emulator, "/api/v1/namespaces/default/services", "POST", _service("web"))
    code, svc = _http(
        emulator,
        path,
        "PATCH",
        {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert code == 200
    assert sorted((p["port"], p.get("name"), p["targetPort"]) for p in svc["spec"]["ports"]) == [
        (80, "http", 80),
        (443, "https", 443),
    ]
    code, svc = _http(
        emulator,
        path,
        "PATCH",
        {"spec": {"ports": [{"port": 443, "$patch": "delete"}]}},
        content_type="application/strategic-merge-patch+json",
    )
    assert [p["port"] for p in svc["spec"]["ports"]] == [80]


def test_deleting_a_service_returns_it(api: client.ApiClient, emulator: Emulator) -> None:
    client.CoreV1Api(api).create_namespaced_service("default", _service("web"))
    code, body = _http(emulator, "/api/v1/namespaces/default/services/web", "DELETE")
    assert code == 200 and body["kind"] == "Service" and body["metadata"]["name"] == "web"


# ---------------------------------------------------------------------------------- stored kinds


def test_leases_deployments_and_service_accounts_are_served(api: client.ApiClient) -> None:
    leases = client.CoordinationV1Api(api)
    lease = leases.create_namespaced_lease(
        "default",
        {
            "metadata": {"name": "leader"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15},
        },
    )
    assert lease.spec.holder_identity == "me"
    leases.patch_namespaced_lease("leader", "default", {"spec": {"holderIdentity": "you"}})
    assert leases.read_namespaced_lease("leader", "default").spec.holder_identity == "you"
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account("default", {"metadata": {"name": "trainer"}})
    assert [s.metadata.name for s in core.list_namespaced_service_account("default").items] == [
        "trainer"
    ]
    deleted = core.delete_namespaced_service_account("trainer", "default")
    assert deleted.metadata.name == "trainer"  # a ServiceAccount, not a Status
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        },
    )
    assert [d.metadata.name for d in apps.list_namespaced_deployment("default").items] == ["web"]


# ---------------------------------------------------------------------------------- RBAC


@pytest.fixture
def robot(emulator: Emulator, api: client.ApiClient, tmp_path: Path) -> Iterator[client.ApiClient]:
    """The official client authenticated as ServiceAccount default/robot."""
    client.CoreV1Api(api).create_namespaced_service_account(
        "default", {"metadata": {"name": "robot"}}
    )
    path = emulator.service_account_kubeconfig(tmp_path / "robot.kubeconfig", "default", "robot")
    robot_client = config.new_client_from_config(str(path))
    yield robot_client
    robot_client.close()


def _bind(
    rbac: client.RbacAuthorizationV1Api,
    name: str,
    rules: list[JsonObj],
    subject: JsonObj,
    *,
    cluster_role: bool = False,
) -> None:
    if cluster_role:
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    else:
        rbac.create_namespaced_role("default", {"metadata": {"name": name}, "rules": rules})
    rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": f"{name}-binding"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole" if cluster_role else "Role",
                "name": name,
            },
            "subjects": [subject],
        },
    )


ROBOT = {"kind": "ServiceAccount", "name": "robot", "namespace": "default"}


def test_service_account_requests_are_denied_without_rbac(robot: client.ApiClient) -> None:
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(robot).list_namespaced_pod("default")
    assert denied.value.status == 403
    status = _status(denied.value)
    assert status["message"] == (
        'pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource '
        '"pods" in API group "" in the namespace "default"'
    )
    assert status["reason"] == "Forbidden" and status["details"] == {"kind": "pods"}
    with pytest.raises(ApiException) as named:
        client.BatchV1Api(robot).read_namespaced_job("j", "default")
    assert _status(named.value)["message"] == (
        'jobs.batch "j" is forbidden: User "system:serviceaccount:default:robot" cannot get '
        'resource "jobs" in API group "batch" in the namespace "default"'
    )
    # discovery is every authenticated user's (system:discovery)
    assert client.CoreV1Api(robot).get_api_resources().group_version == "v1"


def test_roles_bindings_and_rules_grant_access(
    api: client.ApiClient, robot: client.ApiClient
) -> None:
    rbac, core = client.RbacAuthorizationV1Api(api), client.CoreV1Api(api)
    core.create_namespaced_pod("default", pod("p"))
    _bind(rbac, "reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
          ROBOT)  # fmt: skip
    robot_core = client.CoreV1Api(robot)
    assert [p.metadata.name for p in robot_core.list_namespaced_pod("default").items] == ["p"]
    with pytest.raises(ApiException) as no_log:
        robot_core.read_namespaced_pod_log("p", "default")
    assert 'cannot get resource "pods/log" in API group ""' in _status(no_log.value)["message"]
    with pytest.raises(ApiException) as no_delete:
        robot_core.delete_namespaced_pod("p", "default")
    assert no_delete.value.status == 403
    # a ClusterRole bound in the namespace, to the group of the namespace's service accounts,
    # for one ConfigMap by name
    core.create_namespaced_config_map("default", {"metadata": {"name": "mine"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "theirs"}})
    _bind(
        rbac,
        "one-map",
        [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"],
          "verbs": ["get"]}],
        {"kind": "Group", "name": "system:serviceaccounts:default",
         "apiGroup": "rbac.authorization.k8s.io"},
        cluster_role=True,
    )  # fmt: skip
    assert robot_core.read_namespaced_config_map("mine", "default").metadata.name == "mine"
    with pytest.raises(ApiException) as theirs:
        robot_core.read_namespaced_config_map("theirs", "default")
    assert theirs.value.status == 403


def test_access_reviews_agree_with_rbac(
    api: client.ApiClient, robot: client.ApiClient, emulator: Emulator
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    _bind(rbac, "logs", [{"apiGroups": [""], "resources": ["pods", "pods/log"],
                          "verbs": ["get"]}], ROBOT)  # fmt: skip
    review = client.AuthorizationV1Api(robot).create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods",
                                         "subresource": "log", "namespace": "default"}}}
    )  # fmt: skip
    assert review.status.allowed is True
    assert review.status.reason == (
        'RBAC: allowed by RoleBinding "logs-binding/default" of Role "logs" to '
        'ServiceAccount "robot/default"'
    )
    denied = client.AuthorizationV1Api(robot).create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"verb": "list", "resource": "pods",
                                         "namespace": "default"}}}
    )  # fmt: skip
    assert denied.status.allowed is False
    with pytest.raises(ApiException):
        client.CoreV1Api(robot).list_namespaced_pod("default")
    sar = client.AuthorizationV1Api(api).create_subject_access_review(
        {
            "spec": {
                "user": "system:serviceaccount:default:robot",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:default"],
                "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"},
            }
        }
    )
    assert sar.status.allowed is True and sar.status.reason == review.status.reason
    other = client.AuthorizationV1Api(api).create_subject_access_review(
        {"spec": {"user": "system:serviceaccount:default:robot",
                  "resourceAttributes": {"verb": "get", "resource": "pods",
                                         "namespace": "elsewhere"}}}
    )  # fmt: skip
    assert other.status.allowed is False
    # a SubjectAccessReview is itself subject to RBAC
    with pytest.raises(ApiException) as forbidden:
        client.AuthorizationV1Api(robot).create_subject_access_review(
            {"spec": {"user": "x", "resourceAttributes": {"verb": "get", "resource": "pods"}}}
        )
    assert _status(forbidden.value)["message"] == (
        "subjectaccessreviews.authorization.k8s.io is forbidden: User "
        '"system:serviceaccount:default:robot" cannot create resource "subjectaccessreviews" '
        'in API group "authorization.k8s.io" at the cluster scope'
    )


def test_unknown_and_stale_tokens_are_unauthorized(
    api: client.ApiClient, emulator: Emulator
) -> None:
    code, body = _http(emulator, "/api/v1/namespaces/default/pods", token="not-a-token")
    assert (code, body) == (
        401,
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": "Unauthorized", "reason": "Unauthorized", "code": 401},
    )  # fmt: skip
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account("default", {"metadata": {"name": "gone"}})
    token = emulator.service_account_token("default", "gone")
    assert _http(emulator, "/version", token=token)[0] == 200
    core.delete_namespaced_service_account("gone", "default")
    core.create_namespaced_service_account("default", {"metadata": {"name": "gone"}})
    assert _http(emulator, "/version", token=token)[0] == 401  # a new account, a new uid


def test_token_requests_mint_expiring_tokens(tmp_path: Path) -> None:
    # a thousand emulated seconds per real one: a ten-minute token lasts 0.6 s
    config_ = ClusterConfig(time_scale=1000)
    with Emulator(config_, kubeconfig=tmp_path / "kubeconfig") as emu:
        api_client = config.new_client_from_config(str(emu.kubeconfig))
        core = client.CoreV1Api(api_client)
        core.create_namespaced_service_account("default", {"metadata": {"name": "robot"}})
        with pytest.raises(ApiException) as short:
            core.create_namespaced_service_account_token(
                "robot", "default", {"spec": {"expirationSeconds": 60}}
            )
        assert _status(short.value)["message"] == (
            'TokenRequest.authentication.k8s.io "robot" is invalid: spec.expirationSeconds: '
            "Invalid value: 60: may not specify a duration less than 10 minutes"
        )
        answer = core.create_namespaced_service_account_token(
            "robot", "default", {"spec": {"expirationSeconds": 600}}
        )
        api_client.close()
        assert answer.spec.audiences == ["https://kubernetes.default.svc.cluster.local"]
        assert answer.spec.expiration_seconds == 600
        token = answer.status.token
        assert _http(emu, "/version", token=token)[0] == 200
        time.sleep(0.8)
        assert _http(emu, "/version", token=token)[0] == 401


def test_rbac_objects_are_defaulted_and_validated(api: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    with pytest.raises(ApiException) as namespaced:
        rbac.create_namespaced_role(
            "default",
            {"metadata": {"name": "metrics"},
             "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]},
        )  # fmt: skip
    assert _status(namespaced.value)["message"] == (
        'Role.rbac.authorization.k8s.io "metrics" is invalid: rules[0].nonResourceURLs: '
        'Invalid value: []string{"/metrics"}: namespaced rules cannot apply to non-resource URLs'
    )
    binding = rbac.create_namespaced_role_binding(
        "default",
        {
            "metadata": {"name": "b"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Group", "name": "devs"}],
        },
    )
    assert binding.role_ref.api_group == "rbac.authorization.k8s.io"
    assert binding.subjects[0].api_group == "rbac.authorization.k8s.io"
    with pytest.raises(ApiException) as changed:
        rbac.patch_namespaced_role_binding("b", "default", {"roleRef": {"name": "edit"}})
    assert _status(changed.value)["message"] == (
        'RoleBinding.rbac.authorization.k8s.io "b" is invalid: roleRef: Invalid value: '
        'rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", Name:"edit"}: '
        "cannot change roleRef"
    )


def test_a_dry_run_eviction_changes_nothing(api: client.ApiClient, emulator: Emulator) -> None:
    core, policy = client.CoreV1Api(api), client.PolicyV1Api(api)
    for name in ("a", "b"):
        _running(core, name, {"app": "train"})
    before = _budget(policy, "pdb", minAvailable=1)
    code, answer = _http(
        emulator,
        "/api/v1/namespaces/default/pods/a/eviction?dryRun=All",
        "POST",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}},
    )
    assert (code, answer["status"]) == (201, "Success")
    assert core.read_namespaced_pod("a", "default").metadata.deletion_timestamp is None
    after = policy.read_namespaced_pod_disruption_budget("pdb", "default")
    assert after.metadata.resource_version == before["metadata"]["resourceVersion"]

"""The emulator's ValidatingAdmissionPolicy plugin (dispatch.testing.k8s.policies) over
AdmissionRequest values built by hand: matching, selectors, matchConditions, each validation
field, codes and exact messages as kube-apiserver writes them, failurePolicy on errors."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest

from dispatch.testing.k8s import cel
from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.policies import ValidatingPolicies
from dispatch.testing.k8s.rbac import UserInfo
from dispatch.testing.k8s.resources import ResourceType

JsonObj = dict[str, Any]
DEPLOYMENTS = ResourceType("apps", "v1", "deployments", "Deployment", True)
DEPLOYMENTS_BETA = ResourceType(
    "apps", "v1beta2", "deployments", "Deployment", True, storage_version=False
)
NODES = ResourceType("", "v1", "nodes", "Node", False)
NAMESPACES = {
    "team": {"metadata": {"name": "team", "labels": {"env": "prod"}}},
    "play": {"metadata": {"name": "play", "labels": {"env": "dev"}}},
}
DEPLOYMENT_RULE = {
    "apiGroups": ["apps"],
    "apiVersions": ["v1"],
    "operations": ["CREATE", "UPDATE"],
    "resources": ["deployments"],
}


def deployment(replicas: int = 3, namespace: str = "team", **labels: str) -> JsonObj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nginx", "namespace": namespace, "labels": labels},
        "spec": {"replicas": replicas},
    }


def policy(name: str = "demo-policy.example.com", **spec: Any) -> JsonObj:
    spec.setdefault("matchConstraints", {"resourceRules": [DEPLOYMENT_RULE]})
    spec.setdefault("validations", [{"expression": "object.spec.replicas <= 5"}])
    return {"metadata": {"name": name}, "spec": spec}


def binding(
    name: str = "demo-binding-test.example.com",
    policy_name: str = "demo-policy.example.com",
    **spec: Any,
) -> JsonObj:
    spec.setdefault("validationActions", ["Deny"])
    return {"metadata": {"name": name}, "spec": {"policyName": policy_name, **spec}}


def request(
    obj: JsonObj,
    old: JsonObj | None = None,
    rtype: ResourceType = DEPLOYMENTS,
    subresource: str | None = None,
    user: UserInfo | None = None,
    dry_run: bool = False,
) -> AdmissionRequest:
    store: Any = SimpleNamespace(warnings=[])
    return AdmissionRequest(
        "UPDATE" if old is not None else "CREATE",
        rtype,
        obj,
        old,
        subresource,
        store,
        user=user,
        dry_run=dry_run,
    )


def plugin(policies: list[JsonObj], bindings: list[JsonObj]) -> ValidatingPolicies:
    return ValidatingPolicies(
        load=lambda: (policies, bindings),
        namespace=NAMESPACES.get,
        resource_types=lambda: (DEPLOYMENTS, DEPLOYMENTS_BETA, NODES),
    )


def refusal(plugin: ValidatingPolicies, req: AdmissionRequest) -> ApiError:
    with pytest.raises(ApiError) as err:
        plugin.admit(req)
    return err.value


def admits(plugin: ValidatingPolicies, req: AdmissionRequest) -> bool:
    return plugin.admit(req) == []


# --- the Kubernetes documentation's example -----------------------------------------------------

DOCS_MESSAGE = (
    "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding "
    "'demo-binding-test.example.com' denied request: failed expression: object.spec.replicas <= 5"
)


def test_the_docs_example_refuses_more_than_five_replicas_exactly_as_kube() -> None:
    p = plugin([policy()], [binding()])
    assert admits(p, request(deployment(5)))
    err = refusal(p, request(deployment(6)))
    assert err.code == 422
    assert err.reason == "Invalid"
    assert err.message == f'deployments.apps "nginx" is forbidden: {DOCS_MESSAGE}'
    assert err.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": err.message,
        "reason": "Invalid",
        "details": {
            "name": "nginx",
            "group": "apps",
            "kind": "deployments",
            "causes": [{"message": DOCS_MESSAGE}],
        },
        "code": 422,
    }


def test_policies_run_on_dry_run_requests_too() -> None:
    p = plugin([policy()], [binding()])
    assert refusal(p, request(deployment(6), dry_run=True)).code == 422


def test_a_generated_name_or_none_is_named_as_kube_names_it() -> None:
    p = plugin([policy()], [binding()])
    obj = deployment(6)
    obj["metadata"] = {"generateName": "nginx-", "namespace": "team"}
    assert refusal(p, request(obj)).message.startswith('deployments.apps "nginx-" is forbidden')
    obj["metadata"] = {"namespace": "team"}
    assert refusal(p, request(obj)).message.startswith('deployments.apps "Unknown" is forbidden')


# --- validations: reason, message, messageExpression --------------------------------------------


@pytest.mark.parametrize(
    ("reason", "code"),
    [("Forbidden", 403), ("Unauthorized", 401), ("RequestEntityTooLarge", 413), ("Invalid", 422)],
)
def test_the_reason_sets_the_code(reason: str, code: int) -> None:
    validation = {"expression": "object.spec.replicas <= 5", "reason": reason}
    err = refusal(plugin([policy(validations=[validation])], [binding()]), request(deployment(6)))
    assert (err.code, err.reason) == (code, reason)


def deny_with(**validation: Any) -> str:
    validation = {"expression": "object.spec.replicas <= 5", **validation}
    err = refusal(plugin([policy(validations=[validation])], [binding()]), request(deployment(6)))
    prefix = (
        "ValidatingAdmissionPolicy 'demo-policy.example.com' with binding "
        "'demo-binding-test.example.com' denied request: "
    )
    inner = err.details["causes"][0]["message"] if err.details else ""
    assert inner.startswith(prefix)
    return inner.removeprefix(prefix)


def test_message_and_message_expression() -> None:
    assert deny_with(message="  too many  ") == "too many"
    assert (
        deny_with(message="m", messageExpression="'replicas: ' + string(object.spec.replicas)")
        == "replicas: 6"
    )
    # messageExpression that fails, is not a string, is empty, or spans lines: falls back
    assert deny_with(message="m", messageExpression="object.spec.nothing") == "m"
    assert deny_with(message="m", messageExpression="object.spec.replicas") == "m"
    assert deny_with(message="m", messageExpression="'   '") == "m"
    assert deny_with(message="m", messageExpression="'a\\nb'") == "m"
    assert deny_with(message="m", messageExpression="'x'.repeat(3)") == "m"  # does not compile
    assert (
        deny_with(messageExpression="object.spec.nothing")
        == "failed expression: object.spec.replicas <= 5"
    )


def test_every_validation_is_evaluated_and_the_first_refusal_is_raised() -> None:
    validations = [
        {"expression": "object.spec.replicas < 100", "message": "first"},
        {"expression": "object.spec.replicas <= 5", "message": "second"},
        {"expression": "object.spec.replicas <= 4", "message": "third"},
    ]
    p = plugin([policy(validations=validations)], [binding()])
    decisions = p.decide(request(deployment(6)))
    assert [d.message for d in decisions] == ["second", "third"]
    assert refusal(p, request(deployment(6))).message.endswith("denied request: second")


def test_variables_are_available_to_validations_and_messages() -> None:
    spec = {
        "variables": [
            {"name": "limit", "expression": "5"},
            {"name": "over", "expression": "object.spec.replicas > variables.limit"},
        ],
        "validations": [
            {
                "expression": "!variables.over",
                "messageExpression": "'at most ' + string(variables.limit)",
            }
        ],
    }
    p = plugin([policy(**spec)], [binding()])
    assert admits(p, request(deployment(5)))
    assert refusal(p, request(deployment(6))).message.endswith("denied request: at most 5")


def test_the_request_variable() -> None:
    checks = [
        "request.operation == 'UPDATE'",
        "request.kind == {'group': 'apps', 'version': 'v1', 'kind': 'Deployment'}",
        "request.resource.resource == 'deployments' && request.subResource == ''",
        "request.name == 'nginx' && request.namespace == 'team'",
        "request.userInfo.username == 'alice' && request.userInfo.groups == ['dev']",
        "request.dryRun == true",
        "namespaceObject.metadata.labels.env == 'prod'",
        "oldObject.spec.replicas == 1",
    ]
    validations = [{"expression": c, "message": c} for c in checks]
    p = plugin([policy(validations=validations)], [binding()])
    req = request(deployment(3), deployment(1), user=UserInfo("alice", ("dev",)), dry_run=True)
    assert p.decide(req) == []


# --- failurePolicy --------------------------------------------------------------------------------


def test_a_runtime_error_refuses_under_fail_and_is_ignored_under_ignore() -> None:
    validations = [{"expression": "object.spec.nothing > 1"}]
    err = refusal(plugin([policy(validations=validations)], [binding()]), request(deployment()))
    assert err.code == 422
    assert err.message.endswith(
        "denied request: expression 'object.spec.nothing > 1' resulted in error: "
        "no such key: nothing"
    )
    ignoring = policy(validations=validations, failurePolicy="Ignore")
    assert admits(plugin([ignoring], [binding()]), request(deployment()))


def test_a_compile_error_follows_the_failure_policy() -> None:
    validations = [{"expression": "object.spec.replicas <=", "reason": "Forbidden"}]
    err = refusal(plugin([policy(validations=validations)], [binding()]), request(deployment()))
    assert err.code == 422  # an error is Invalid, whatever the validation's reason
    assert "denied request: compilation error: compilation failed: ERROR: <input>:" in err.message
    ignoring = policy(validations=validations, failurePolicy="Ignore")
    assert admits(plugin([ignoring], [binding()]), request(deployment()))


def test_an_unsupported_feature_is_a_compile_error_naming_it() -> None:
    validations = [{"expression": "object.spec?.replicas.orValue(0) <= 5"}]
    err = refusal(plugin([policy(validations=validations)], [binding()]), request(deployment()))
    assert "optional types" in err.message and "not supported by the emulator's CEL" in err.message


def test_a_validation_that_is_not_boolean_is_an_error() -> None:
    validations = [{"expression": "object.spec.replicas"}]
    err = refusal(plugin([policy(validations=validations)], [binding()]), request(deployment()))
    assert err.message.endswith("must evaluate to bool but got int")


def test_param_kind_is_refused_as_a_configuration_error() -> None:
    spec = {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}}
    err = refusal(plugin([policy(**spec)], [binding()]), request(deployment()))
    assert err.message.endswith(
        "with binding 'demo-binding-test.example.com' denied request: failed to configure "
        "binding: paramKind is not supported by the emulator"
    )
    assert admits(
        plugin([policy(failurePolicy="Ignore", **spec)], [binding()]), request(deployment())
    )


def test_a_policy_without_match_constraints_is_a_configuration_error() -> None:
    broken = {"metadata": {"name": "p"}, "spec": {"validations": [{"expression": "true"}]}}
    err = refusal(plugin([broken], [binding(policy_name="p")]), request(deployment()))
    assert err.message.endswith(
        "ValidatingAdmissionPolicy 'p' denied request: failed to configure policy: "
        "policy contained no match constraints, a required field"
    )


EXPENSIVE = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, x > 0)"
OUT_OF_BUDGET = (
    "denied request: validation failed due to running out of cost budget, "
    "no further validation rules will be run"
)


def test_a_binding_out_of_its_cost_budget_follows_the_failure_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cel, "BINDING_BUDGET", 40)
    validations = [{"expression": EXPENSIVE}, {"expression": "object.spec.replicas <= 5"}]
    err = refusal(plugin([policy(validations=validations)], [binding()]), request(deployment(6)))
    assert err.code == 422
    assert err.message.endswith(OUT_OF_BUDGET)
    ignoring = policy(validations=validations, failurePolicy="Ignore")
    assert admits(plugin([ignoring], [binding()]), request(deployment(6)))


def test_message_expressions_out_of_budget_fail_every_validation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cel, "BINDING_BUDGET", 40)
    validations = [{"expression": "object.spec.replicas <= 5", "messageExpression": EXPENSIVE}]
    p = plugin([policy(validations=validations)], [binding()])
    # kube evaluates every messageExpression up front: a passing validation fails too
    err = refusal(p, request(deployment(1)))
    assert err.message.endswith(
        "denied request: failed messageExpression: validation failed due to running out of "
        "cost budget, no further validation rules will be run"
    )


def test_match_conditions_out_of_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "MATCH_CONDITIONS_BUDGET", 30)
    assert refusal(conditions(EXPENSIVE), request(deployment(6))).message.endswith(OUT_OF_BUDGET)
    assert admits(conditions(EXPENSIVE, failure="Ignore"), request(deployment(6)))


# --- matchConditions ------------------------------------------------------------------------------


def conditions(*expressions: str, failure: str = "Fail") -> ValidatingPolicies:
    matched = [{"name": f"c{i}", "expression": e} for i, e in enumerate(expressions)]
    return plugin([policy(matchConditions=matched, failurePolicy=failure)], [binding()])


def test_match_conditions_must_all_be_true() -> None:
    assert refusal(conditions("true", "object.spec.replicas > 1"), request(deployment(6)))
    assert admits(conditions("true", "object.spec.replicas > 10"), request(deployment(6)))


def test_a_match_condition_error_follows_the_failure_policy_unless_one_is_false() -> None:
    err = refusal(conditions("object.nothing == 1"), request(deployment(6)))
    assert err.message.endswith(
        "denied request: expression 'object.nothing == 1' resulted in error: no such key: nothing"
    )
    assert admits(conditions("object.nothing == 1", "false"), request(deployment(6)))
    assert admits(conditions("object.nothing == 1", failure="Ignore"), request(deployment(6)))


def test_match_conditions_see_no_namespace_object() -> None:
    assert admits(conditions("namespaceObject != null"), request(deployment(6)))


# --- matching ---------------------------------------------------------------------------------------


def matching(constraints: JsonObj, **binding_spec: Any) -> ValidatingPolicies:
    return plugin([policy(matchConstraints=constraints)], [binding(**binding_spec)])


def rule(**fields: Any) -> JsonObj:
    return {**DEPLOYMENT_RULE, **fields}


def test_resource_rules() -> None:
    six = request(deployment(6))
    assert refusal(matching({"resourceRules": [rule(apiGroups=["*"], resources=["*"])]}), six)
    assert admits(matching({"resourceRules": [rule(operations=["DELETE"])]}), six)
    assert admits(matching({"resourceRules": [rule(apiGroups=["batch"])]}), six)
    assert admits(matching({"resourceRules": [rule(resources=["pods"])]}), six)
    assert admits(matching({"resourceRules": [rule(resourceNames=["other"])]}), six)
    assert refusal(matching({"resourceRules": [rule(resourceNames=["nginx"])]}), six)
    assert refusal(matching({"resourceRules": [rule(operations=["*"], scope="Namespaced")]}), six)
    assert admits(matching({"resourceRules": [rule(scope="Cluster")]}), six)


def test_subresources_match_only_rules_naming_them() -> None:
    status = request(deployment(6), deployment(1), subresource="status")
    assert admits(matching({"resourceRules": [rule()]}), status)
    assert refusal(matching({"resourceRules": [rule(resources=["deployments/status"])]}), status)
    assert refusal(matching({"resourceRules": [rule(resources=["deployments/*"])]}), status)
    assert refusal(matching({"resourceRules": [rule(resources=["*/status"])]}), status)
    assert admits(matching({"resourceRules": [rule(resources=["deployments/scale"])]}), status)


def test_exclude_resource_rules() -> None:
    constraints = {
        "resourceRules": [rule()],
        "excludeResourceRules": [rule(resourceNames=["nginx"])],
    }
    assert admits(matching(constraints), request(deployment(6)))


def test_match_policy_equivalent_matches_other_versions_of_the_same_resource() -> None:
    beta = rule(apiVersions=["v1beta2"])
    equivalent = {"resourceRules": [beta], "matchPolicy": "Equivalent"}
    validations = [{"expression": "request.kind.version == 'v1beta2'"}]
    p = plugin([policy(matchConstraints=equivalent, validations=validations)], [binding()])
    assert p.decide(request(deployment(6))) == []  # matched as v1beta2
    assert admits(
        matching({"resourceRules": [beta], "matchPolicy": "Exact"}), request(deployment(6))
    )
    assert refusal(matching({"resourceRules": [beta]}), request(deployment(6)))  # the default


def test_object_selector_matches_the_new_or_the_old_object() -> None:
    constraints = {"resourceRules": [rule()], "objectSelector": {"matchLabels": {"guard": "on"}}}
    p = matching(constraints)
    assert admits(p, request(deployment(6)))
    assert refusal(p, request(deployment(6, guard="on")))
    assert refusal(p, request(deployment(6), deployment(1, guard="on")))  # label removed


def test_namespace_selector() -> None:
    constraints = {
        "resourceRules": [rule(), {**rule(), "apiGroups": [""], "resources": ["nodes"]}],
        "namespaceSelector": {"matchLabels": {"env": "prod"}},
    }
    p = matching(constraints)
    assert refusal(p, request(deployment(6, namespace="team")))
    assert admits(p, request(deployment(6, namespace="play")))
    node = {"metadata": {"name": "n1"}, "spec": {"replicas": 6}}
    assert refusal(p, request(node, rtype=NODES))  # cluster-scoped: never exempted
    err = refusal(p, request(deployment(6, namespace="gone")))
    assert err.message.endswith(
        'denied request: failed to configure policy: namespaces "gone" not found'
    )


def test_binding_match_resources_narrow_the_policy() -> None:
    narrow = {"namespaceSelector": {"matchLabels": {"env": "dev"}}}
    p = matching({"resourceRules": [rule()]}, matchResources=narrow)
    assert admits(p, request(deployment(6, namespace="team")))
    assert refusal(p, request(deployment(6, namespace="play")))


def test_bindings_pair_with_their_policy_by_name() -> None:
    p = plugin([policy()], [binding(policy_name="another")])
    assert admits(p, request(deployment(6)))


def test_admission_configuration_is_never_subject_to_policies() -> None:
    vap = ResourceType(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        False,
    )
    everything = {
        "resourceRules": [
            {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}
        ]
    }
    p = plugin(
        [policy(matchConstraints=everything, validations=[{"expression": "false"}])], [binding()]
    )
    assert admits(p, request({"metadata": {"name": "x"}}, rtype=vap))
    assert refusal(p, request(deployment()))


# --- validationActions ----------------------------------------------------------------------------


def test_warn_records_kube_s_warning_and_audit_does_nothing() -> None:
    warn = request(deployment(6))
    assert admits(plugin([policy()], [binding(validationActions=["Warn", "Audit"])]), warn)
    assert warn.store.warnings == [
        "Validation failed for ValidatingAdmissionPolicy 'demo-policy.example.com' with binding "
        "'demo-binding-test.example.com': failed expression: object.spec.replicas <= 5"
    ]
    both = request(deployment(6))
    assert refusal(plugin([policy()], [binding(validationActions=["Deny", "Warn"])]), both)
    assert len(both.store.warnings) == 1


def test_policies_and_bindings_are_evaluated_in_name_order() -> None:
    policies = [policy("b-policy"), policy("a-policy")]
    bindings = [binding("z", "b-policy"), binding("y", "a-policy"), binding("x", "a-policy")]
    p = plugin(policies, bindings)
    decisions = p.decide(request(deployment(6)))
    assert [(d.policy, d.binding) for d in decisions] == [
        ("a-policy", "x"),
        ("a-policy", "y"),
        ("b-policy", "z"),
    ]


def test_the_stored_objects_are_not_changed() -> None:
    policies, bindings = [policy()], [binding()]
    before = copy.deepcopy((policies, bindings))
    obj = deployment(6)
    with pytest.raises(ApiError):
        plugin(policies, bindings).admit(request(obj))
    assert (policies, bindings) == before
    assert obj == deployment(6)


# --- dispatch's own policy (dispatch admission manifests --policy) ------------------------------

TRAINJOBS = ResourceType(
    "trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True, builtin=False
)
KUEUE = UserInfo(
    "system:serviceaccount:kueue-system:kueue-controller-manager",
    ("system:serviceaccounts", "system:serviceaccounts:kueue-system", "system:authenticated"),
)


def trainjob(suspend: bool, ended: str | None = None) -> JsonObj:
    annotations = {"dispatch.dev/ended": ended} if ended else {}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "tj-1",
            "namespace": "team",
            "labels": {"dispatch.dev/job": "J7", "dispatch.dev/attempt": "2"},
            "annotations": annotations,
        },
        "spec": {
            "suspend": suspend,
            "runtimeRef": {"name": "torch"},
            "trainer": {"numNodes": 2},
            "runtimePatches": [{"manager": "kueue.x-k8s.io/manager"}],
        },
    }


def dispatch_policy() -> ValidatingPolicies:
    from dispatch.adapters.kubeflow.admission.manifests import ManifestOptions
    from dispatch.adapters.kubeflow.admission.policy import policy_objects

    objects = policy_objects(ManifestOptions())
    policies = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"]
    bindings = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    return ValidatingPolicies(
        load=lambda: (policies, bindings),
        namespace=NAMESPACES.get,
        resource_types=lambda: (TRAINJOBS,),
    )


def test_dispatch_policy_refuses_kueue_resuming_an_ended_trainjob() -> None:
    p = dispatch_policy()
    resume = request(
        trainjob(False, ended="Failed"), trainjob(True, ended="Failed"), TRAINJOBS, user=KUEUE
    )
    err = refusal(p, resume)
    assert err.code == 403
    assert err.reason == "Forbidden"
    assert err.message.startswith(
        'trainjobs.trainer.kubeflow.org "tj-1" is forbidden: ValidatingAdmissionPolicy '
        "'dispatch-admission-ended' with binding 'dispatch-admission-ended' denied request: "
        "TrainJob team/tj-1 (dispatch job J7, attempt 2): resuming refused"
    )
    assert "dispatch.dev/ended=Failed" in err.message


def test_dispatch_policy_lets_kueue_resume_and_suspend_a_live_trainjob() -> None:
    p = dispatch_policy()
    assert admits(p, request(trainjob(False), trainjob(True), TRAINJOBS, user=KUEUE))
    assert admits(p, request(trainjob(True), trainjob(False), TRAINJOBS, user=KUEUE))
    ended = trainjob(True, ended="Failed")
    assert admits(p, request(ended, trainjob(False, ended="Failed"), TRAINJOBS, user=KUEUE))


def test_dispatch_policy_refuses_a_stranger_changing_the_spec() -> None:
    p = dispatch_policy()
    changed = trainjob(True)
    changed["spec"]["trainer"] = {"numNodes": 8}
    err = refusal(p, request(changed, trainjob(True), TRAINJOBS, user=KUEUE))
    assert err.code == 403
    assert "'dispatch-admission-owned'" in err.message and "spec.trainer" in err.message

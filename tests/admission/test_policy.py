"""The ValidatingAdmissionPolicies' CEL, evaluated with cel-python over AdmissionReview-like
requests: Kueue's resume and its runtimePatches entry pass, a resume after the end and a
stranger's changes are refused with messages naming the job and attempt.

``judge`` below is a small model of kube-apiserver's policy evaluation (match constraints,
match conditions, validations in order, the message prefix); the emulator's own evaluation
is tested in tests/emulator.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import celpy
import pytest

from dispatch.adapters.kubeflow.admission.contract import GuardConfig
from dispatch.adapters.kubeflow.admission.guard import review
from dispatch.adapters.kubeflow.admission.manifests import ManifestOptions
from dispatch.adapters.kubeflow.admission.policy import (
    KUEUE_ENTRY_SHAPE,
    OTHER_PATCHES_UNCHANGED,
    RESUMES,
    TRAINJOB_FIELDS,
    policy_objects,
)

JsonObj = dict[str, Any]
SUPERVISOR = "system:serviceaccount:dispatch:dispatch-supervisor"
KUEUE_USER = "system:serviceaccount:kueue-system:kueue-controller-manager"
STRANGER = "alice"
KUEUE = "kueue.x-k8s.io/manager"
OPTIONS = ManifestOptions(identities=("ci-robot",), groups=("ml-platform",))
_ENV = celpy.Environment()


# --- a model of the API server's evaluation --------------------------------------------


def evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    """The expression's value; a CEL error fails the test (failurePolicy Fail would refuse)."""
    program = _ENV.program(_ENV.compile(expression))
    value = program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()})
    if isinstance(value, celpy.CELEvalError):
        raise AssertionError(f"{expression!r} failed: {value}")
    return value


def _selected(policy: JsonObj, request: JsonObj) -> bool:
    constraints = policy["spec"]["matchConstraints"]
    rule = constraints["resourceRules"][0]
    resource = request["resource"]
    if (
        request.get("subResource")
        or request["operation"] not in rule["operations"]
        or resource["group"] not in rule["apiGroups"]
        or resource["resource"] not in rule["resources"]
    ):
        return False
    wanted = [e["key"] for e in constraints["objectSelector"]["matchExpressions"]]
    for obj in (request.get("object"), request.get("oldObject")):
        labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
        if all(key in labels for key in wanted):
            return True
    return False


def judge(request: JsonObj, policies: list[JsonObj] | None = None) -> list[str]:
    """The denials of ``policies`` (default: every one of ``OPTIONS``) as the API server words
    them; empty when the request is allowed."""
    objects = policy_objects(OPTIONS) if policies is None else policies
    activation = {
        "object": request.get("object"),
        "oldObject": request.get("oldObject"),
        "request": request,
    }
    denials = []
    for policy in (o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"):
        if not _selected(policy, request):
            continue
        spec = policy["spec"]
        if not all(evaluate(c["expression"], activation) for c in spec["matchConditions"]):
            continue
        for validation in spec["validations"]:
            if not evaluate(validation["expression"], activation):
                message = evaluate(validation["messageExpression"], activation)
                name = policy["metadata"]["name"]
                denials.append(
                    f"ValidatingAdmissionPolicy '{name}' with binding '{name}' denied request: "
                    f"{message}"
                )
                break
    return denials


# --- realistic objects --------------------------------------------------------------------


def trainjob(*, suspend: bool = True, ended: str | None = None) -> JsonObj:
    """A TrainJob as dispatch makes it, after Kueue's webhook added its (empty) patch entry."""
    labels = {
        "dispatch.dev/job": "j-20261202-7f3a",
        "dispatch.dev/attempt": "2",
        "dispatch.dev/cluster": "prod",
        "app.kubernetes.io/managed-by": "dispatch",
        "kueue.x-k8s.io/queue-name": "team-a",
    }
    annotations = {"dispatch.dev/spec-hash": "sha256:1234"}
    if ended is not None:
        annotations["dispatch.dev/ended"] = ended
    pod_labels = {"dispatch.dev/job": "j-20261202-7f3a", "dispatch.dev/attempt": "2"}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "tj-7f3a-2",
            "namespace": "team-a",
            "uid": "5d0c7a2e-0000-4000-8000-000000000001",
            "resourceVersion": "1042",
            "generation": 1,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {
            "suspend": suspend,
            "managedBy": "trainer.kubeflow.org/trainjob-controller",
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "TrainingRuntime",
                "name": "tj-7f3a-2",
            },
            "trainer": {
                "image": "registry.example.org/train:1.4",
                "command": ["torchrun", "train.py"],
                "numNodes": 4,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}},
                "env": [{"name": "DISPATCH_JOB_ID", "value": "j-20261202-7f3a"}],
            },
            "activeDeadlineSeconds": 86400,
            "runtimePatches": [
                {
                    "manager": "dispatch.dev/adapter",
                    "time": "2026-12-02T05:00:00Z",
                    "trainingRuntimeSpec": {
                        "template": {
                            "metadata": {"labels": dict(pod_labels)},
                            "spec": {
                                "replicatedJobs": [
                                    {
                                        "name": "node",
                                        "template": {
                                            "spec": {
                                                "template": {"metadata": {"labels": pod_labels}}
                                            }
                                        },
                                    }
                                ]
                            },
                        }
                    },
                },
                {
                    "manager": KUEUE,
                    "time": "2026-12-02T05:00:00Z",
                    "trainingRuntimeSpec": {"template": {"spec": {}}},
                },
            ],
        },
        "status": {"conditions": []},
    }


def runtime_copy() -> JsonObj:
    """dispatch's TrainingRuntime copy for the attempt."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": "tj-7f3a-2",
            "namespace": "team-a",
            "labels": {
                "dispatch.dev/job": "j-20261202-7f3a",
                "dispatch.dev/attempt": "2",
                "dispatch.dev/runtime-copy-of": "torch-distributed",
            },
        },
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
            "template": {"spec": {"replicatedJobs": [{"name": "node", "replicas": 1}]}},
        },
    }


def kueue_admits(tj: JsonObj) -> JsonObj:
    """What Kueue's RunWithPodSetsInfo writes: its entry's replicated job patches, unsuspend."""
    new = copy.deepcopy(tj)
    entry = next(p for p in new["spec"]["runtimePatches"] if p["manager"] == KUEUE)
    entry["time"] = "2026-12-02T05:10:00Z"
    entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = [
        {
            "name": "node",
            "template": {
                "spec": {
                    "template": {
                        "metadata": {
                            "labels": {"kueue.x-k8s.io/podset": "node"},
                            "annotations": {"kueue.x-k8s.io/workload": "trainjob-tj-7f3a-2"},
                        },
                        "spec": {
                            "nodeSelector": {"cloud.example.org/pool": "a100"},
                            "tolerations": [
                                {
                                    "key": "nvidia.com/gpu",
                                    "operator": "Exists",
                                    "effect": "NoSchedule",
                                }
                            ],
                        },
                    }
                }
            },
        }
    ]
    new["spec"]["suspend"] = False
    return new


def update(
    old: JsonObj,
    new: JsonObj,
    user: str,
    groups: tuple[str, ...] = ("system:authenticated",),
    subresource: str | None = None,
) -> JsonObj:
    """An AdmissionReview v1 ``request`` for an UPDATE of ``old`` into ``new``."""
    plural = "trainjobs" if new["kind"] == "TrainJob" else "trainingruntimes"
    gvk = {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": new["kind"]}
    gvr = {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": plural}
    request: JsonObj = {
        "uid": "0f0e0d0c-0000-4000-8000-000000000002",
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": new["metadata"]["name"],
        "namespace": new["metadata"]["namespace"],
        "operation": "UPDATE",
        "userInfo": {"username": user, "uid": "u-1", "groups": list(groups)},
        "object": new,
        "oldObject": old,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
    }
    if subresource:
        request["subResource"] = subresource
    return request


def changed(obj: JsonObj, change: Callable[[JsonObj], None]) -> JsonObj:
    new = copy.deepcopy(obj)
    change(new)
    return new


SUBJECT = "TrainJob team-a/tj-7f3a-2 (dispatch job j-20261202-7f3a, attempt 2)"


# --- rule 1: no resume after the end ----------------------------------------------------


def test_kueue_resumes_a_trainjob_that_has_not_ended() -> None:
    old = trainjob()
    assert judge(update(old, kueue_admits(old), KUEUE_USER)) == []


def test_kueue_cannot_resume_an_ended_trainjob() -> None:
    old = trainjob(ended="preempted")
    assert judge(update(old, kueue_admits(old), KUEUE_USER)) == [
        "ValidatingAdmissionPolicy 'dispatch-admission-ended' with binding "
        f"'dispatch-admission-ended' denied request: {SUBJECT}: resuming refused: its attempt "
        "has ended (dispatch.dev/ended=preempted) and an ended attempt is never resumed; "
        f"changed: spec.suspend true -> false; asked by {KUEUE_USER}"
    ]


def test_kueue_cannot_resume_a_trainjob_whose_ranks_started() -> None:
    old = started(trainjob())
    [denial] = judge(update(old, kueue_admits(old), KUEUE_USER))
    assert (
        "its attempt has ended (dispatch.dev/started=2026-12-02T06:00:00Z, then suspended)"
        in denial
    )


@pytest.mark.parametrize("user", [SUPERVISOR, "ci-robot", STRANGER])
def test_nobody_resumes_an_ended_trainjob(user: str) -> None:
    old = trainjob(ended="app_error")
    new = changed(old, lambda o: o["spec"].update(suspend=False))
    [denial] = judge(update(old, new, user))
    assert "dispatch.dev/ended=app_error" in denial and user in denial


def test_removing_suspend_of_an_ended_trainjob_is_a_resume() -> None:
    old = trainjob(ended="succeeded")
    new = changed(old, lambda o: o["spec"].pop("suspend"))
    assert len(judge(update(old, new, SUPERVISOR))) == 1


def test_the_ended_mark_written_with_the_resume_refuses_it_too() -> None:
    old = trainjob()
    new = changed(kueue_admits(old), lambda o: o["metadata"]["annotations"].update({
        "dispatch.dev/ended": "cancelled"}))  # fmt: skip
    [denial] = judge(update(old, new, SUPERVISOR))
    assert "dispatch.dev/ended=cancelled" in denial


def test_suspending_an_ended_trainjob_is_allowed() -> None:
    old = trainjob(suspend=False, ended="preempted")
    new = changed(old, lambda o: o["spec"].update(suspend=True))
    assert judge(update(old, new, KUEUE_USER)) == []


def test_the_resume_condition_alone() -> None:
    old, new = trainjob(), kueue_admits(trainjob())
    activation = {"object": new, "oldObject": old}
    assert evaluate(RESUMES, activation) == True  # noqa: E712
    assert evaluate(RESUMES, {"object": old, "oldObject": new}) == False  # noqa: E712


# --- rule 2: only dispatch writes dispatch's objects ------------------------------------


def test_kueue_restores_its_entry_and_suspends() -> None:
    old = kueue_admits(trainjob())

    def stop(o: JsonObj) -> None:
        o["spec"]["suspend"] = True
        o["spec"]["runtimePatches"][1]["trainingRuntimeSpec"]["template"]["spec"] = {}

    assert judge(update(old, changed(old, stop), KUEUE_USER)) == []


def test_a_strangers_change_to_the_trainer_is_refused() -> None:
    old = trainjob()
    new = changed(old, lambda o: o["spec"]["trainer"].update(numNodes=8))
    assert judge(update(old, new, STRANGER)) == [
        "ValidatingAdmissionPolicy 'dispatch-admission-owned' with binding "
        f"'dispatch-admission-owned' denied request: {SUBJECT}: only dispatch may change its "
        f"spec; changed: spec.trainer; asked by {STRANGER}"
    ]


#: a different value for each compared field of a TrainJob's spec
OTHER_VALUES: dict[str, Any] = {
    "activeDeadlineSeconds": 3600,
    "initializer": {"model": {"storageUri": "hf://org/other"}},
    "managedBy": "kueue.x-k8s.io/multikueue",
    "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": "x"},
    "trainer": {"image": "registry.example.org/train:1.4", "numNodes": 1},
}


def test_every_field_has_another_value() -> None:
    assert set(OTHER_VALUES) == set(TRAINJOB_FIELDS)


@pytest.mark.parametrize("field", TRAINJOB_FIELDS)
def test_each_spec_field_is_compared(field: str) -> None:
    old = trainjob()
    old["spec"].setdefault("initializer", {"model": {"storageUri": "hf://org/model"}})
    for new in (
        changed(old, lambda o: o["spec"].pop(field)),
        changed(old, lambda o: o["spec"].update({field: OTHER_VALUES[field]})),
    ):
        [denial] = judge(update(old, new, STRANGER))
        assert f"changed: spec.{field};" in denial
    added = changed(old, lambda o: o["spec"].pop(field))
    assert len(judge(update(added, old, STRANGER))) == 1


def test_dispatchs_identities_may_change_the_spec() -> None:
    old = trainjob()
    new = changed(old, lambda o: o["spec"]["trainer"].update(numNodes=8))
    new["metadata"]["annotations"].pop("dispatch.dev/spec-hash")
    assert judge(update(old, new, SUPERVISOR)) == []
    assert judge(update(old, new, "ci-robot")) == []
    assert judge(update(old, new, "bob", groups=("system:authenticated", "ml-platform"))) == []


def test_a_stranger_may_not_remove_the_ended_mark() -> None:
    old = trainjob(ended="preempted")
    new = changed(old, lambda o: o["metadata"]["annotations"].pop("dispatch.dev/ended"))
    [denial] = judge(update(old, new, STRANGER))
    assert "only dispatch may change its dispatch.dev labels and annotations" in denial
    assert "changed: metadata.annotations;" in denial


@pytest.mark.parametrize(
    "change",
    [
        lambda o: o["metadata"]["labels"].update({"dispatch.dev/attempt": "3"}),
        lambda o: o["metadata"]["labels"].update({"dispatch.dev/extra": "x"}),
        lambda o: o["metadata"]["labels"].pop("dispatch.dev/cluster"),
        lambda o: o["metadata"].pop("labels"),
        lambda o: o["metadata"]["annotations"].update({"dispatch.dev/ended": "succeeded"}),
    ],
    ids=["changed", "added", "removed", "all-removed", "annotation-added"],
)
def test_a_stranger_may_not_touch_dispatch_marks(change: Callable[[JsonObj], None]) -> None:
    old = trainjob(suspend=False)
    assert len(judge(update(old, changed(old, change), STRANGER))) == 1


def test_other_metadata_is_anyones() -> None:
    old = trainjob()

    def touch(o: JsonObj) -> None:
        o["metadata"]["labels"]["team"] = "vision"
        o["metadata"]["annotations"]["note"] = "looked at by alice"
        o["metadata"]["finalizers"] = ["example.org/audit"]

    assert judge(update(old, changed(old, touch), STRANGER)) == []


def test_a_stranger_may_not_change_dispatchs_patch_entry() -> None:
    old = trainjob()
    new = changed(old, lambda o: o["spec"]["runtimePatches"][0].update(time="2026-12-03T00:00:00Z"))
    [denial] = judge(update(old, new, STRANGER))
    assert "changed: spec.runtimePatches (other than kueue.x-k8s.io/manager);" in denial
    removed = changed(old, lambda o: o["spec"]["runtimePatches"].pop(0))
    assert len(judge(update(old, removed, STRANGER))) == 1


def test_kueues_entry_holds_only_what_kueue_writes() -> None:
    old = trainjob()

    def inject(o: JsonObj) -> None:
        job = o["spec"]["runtimePatches"][1]["trainingRuntimeSpec"]["template"]["spec"]
        job["replicatedJobs"] = [
            {
                "name": "node",
                "template": {
                    "spec": {
                        "template": {
                            "spec": {
                                "containers": [
                                    {"name": "node", "env": [{"name": "X", "value": "1"}]}
                                ]
                            }
                        }
                    }
                },
            }
        ]

    [denial] = judge(update(old, changed(old, inject), STRANGER))
    assert "spec.runtimePatches[manager=kueue.x-k8s.io/manager] beyond Kueue" in denial
    activation = {"object": kueue_admits(old), "oldObject": old}
    assert evaluate(KUEUE_ENTRY_SHAPE, activation) == True  # noqa: E712
    assert evaluate(OTHER_PATCHES_UNCHANGED, activation) == True  # noqa: E712


def test_removing_the_job_label_is_judged_on_the_old_object() -> None:
    old = trainjob()
    new = changed(old, lambda o: o["metadata"]["labels"].pop("dispatch.dev/job"))
    [denial] = judge(update(old, new, STRANGER))
    assert "(dispatch job j-20261202-7f3a, attempt 2)" in denial


def test_a_runtime_copys_spec_is_dispatchs() -> None:
    old = runtime_copy()
    new = changed(old, lambda o: o["spec"]["mlPolicy"].update(numNodes=2))
    [denial] = judge(update(old, new, STRANGER))
    assert denial.endswith(
        "TrainingRuntime team-a/tj-7f3a-2 (dispatch job j-20261202-7f3a, attempt 2): only "
        f"dispatch may change its spec; changed: spec; asked by {STRANGER}"
    )
    assert judge(update(old, new, SUPERVISOR)) == []
    relabelled = changed(old, lambda o: o["metadata"]["labels"].update(owner="vision"))
    assert judge(update(old, relabelled, STRANGER)) == []


def test_status_and_unlabelled_objects_are_not_matched() -> None:
    old = trainjob(ended="preempted")
    new = changed(old, lambda o: o["spec"].update(suspend=False))
    assert judge(update(old, new, STRANGER, subresource="status")) == []
    for obj in (old, new):
        obj["metadata"]["labels"].pop("dispatch.dev/job")
    assert judge(update(old, new, STRANGER)) == []


# --- the policy agrees with the webhook's guard -----------------------------------------


def started(trainjob: JsonObj) -> JsonObj:
    """``trainjob`` marked ``dispatch.dev/started``: its ranks ran."""
    return changed(
        trainjob,
        lambda o: o["metadata"]["annotations"].update(
            {"dispatch.dev/started": "2026-12-02T06:00:00Z"}
        ),
    )


SCENARIOS: dict[str, tuple[JsonObj, JsonObj, str]] = {
    "kueue-admits": (trainjob(), kueue_admits(trainjob()), KUEUE_USER),
    "kueue-resumes-ended": (
        trainjob(ended="preempted"),
        kueue_admits(trainjob(ended="preempted")),
        KUEUE_USER,
    ),
    "kueue-resumes-started": (
        started(trainjob()),
        kueue_admits(started(trainjob())),
        KUEUE_USER,
    ),
    "stranger-trainer": (
        trainjob(),
        changed(trainjob(), lambda o: o["spec"]["trainer"].update(image="evil:1")),
        STRANGER,
    ),
    "supervisor-trainer": (
        trainjob(),
        changed(trainjob(), lambda o: o["spec"]["trainer"].update(image="next:1")),
        SUPERVISOR,
    ),
    "stranger-unmarks": (
        trainjob(ended="app_error"),
        changed(
            trainjob(ended="app_error"),
            lambda o: o["metadata"]["annotations"].pop("dispatch.dev/ended"),
        ),
        STRANGER,
    ),
    "stranger-runtime": (
        runtime_copy(),
        changed(runtime_copy(), lambda o: o["spec"].update(mlPolicy={"numNodes": 9})),
        STRANGER,
    ),
    "stranger-other-label": (
        trainjob(),
        changed(trainjob(), lambda o: o["metadata"]["labels"].update(team="x")),
        STRANGER,
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_policy_decides_as_the_webhook(scenario: str) -> None:
    old, new, user = SCENARIOS[scenario]
    request = update(old, new, user)
    config = GuardConfig(
        identities=frozenset(OPTIONS.all_identities), groups=frozenset(OPTIONS.groups)
    )
    decision = review(request, config)
    denials = judge(request)
    assert decision.allowed == (denials == [])
    if decision.rule == "resume-after-end":
        assert denials[0].endswith(decision.message)


# --- through the emulator's ValidatingAdmissionPolicy plugin ----------------------------


def emulator_admits(request: JsonObj) -> None:
    """Run ``request`` through the emulator's policy plugin (raises its ApiError)."""
    from dispatch.clock import ManualClock
    from dispatch.testing.k8s.admission import AdmissionRequest
    from dispatch.testing.k8s.meta import Identity
    from dispatch.testing.k8s.policies import ValidatingPolicies
    from dispatch.testing.k8s.rbac import UserInfo
    from dispatch.testing.k8s.resources import DEFAULT_RESOURCES, ResourceCatalog
    from dispatch.testing.k8s.store import Store

    catalog = ResourceCatalog(list(DEFAULT_RESOURCES))
    objects = policy_objects(OPTIONS)
    plugin = ValidatingPolicies(
        load=lambda: (
            [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"],
            [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"],
        ),
        namespace=lambda name: {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
        },
    )
    group, version, plural = (request["resource"][k] for k in ("group", "version", "resource"))
    rtype = catalog.find(group, version, plural)
    assert rtype is not None
    user = request["userInfo"]
    plugin.admit(
        AdmissionRequest(
            operation=request["operation"],
            rtype=rtype,
            obj=request["object"],
            old=request["oldObject"],
            subresource=request.get("subResource"),
            store=Store(catalog, ManualClock(), Identity()),
            user=UserInfo(user["username"], tuple(user["groups"])),
        )
    )


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_emulator_decides_as_this_model(scenario: str) -> None:
    from dispatch.testing.k8s.errors import ApiError

    request = update(*SCENARIOS[scenario])
    denials = judge(request)
    if not denials:
        emulator_admits(request)
        return
    with pytest.raises(ApiError) as refused:
        emulator_admits(request)
    kind = "trainjobs" if request["kind"]["kind"] == "TrainJob" else "trainingruntimes"
    assert (refused.value.code, refused.value.reason) == (403, "Forbidden")
    assert refused.value.message == (
        f'{kind}.trainer.kubeflow.org "tj-7f3a-2" is forbidden: {denials[0]}'
    )

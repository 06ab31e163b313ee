"""The guard's decisions (``admission/guard.py``), built from AdmissionReview requests by hand."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dispatch.adapters.kubeflow.admission.contract import (
    ANNOTATION_ENDED,
    ANNOTATION_STARTED,
    KUEUE_MANAGER,
    LABEL_CHECKED,
    LABEL_JOB,
    GuardConfig,
)
from dispatch.adapters.kubeflow.admission.guard import (
    MAX_PATHS_SHOWN,
    Decision,
    Rule,
    response,
    review,
)
from dispatch.adapters.kubeflow.planning.settings import KubeflowSettings
from tests.admission.conftest import (
    DISPATCH_USER,
    KUEUE_USER,
    STRANGER,
    JsonObj,
    kueue_entry,
    kueue_restores,
    kueue_runs,
    request,
    trainjob,
    with_suspend,
)
from tests.conftest import EXAMPLES

CONFIG = GuardConfig()


def judge(req: Any, config: GuardConfig = CONFIG) -> Decision:
    return review(req, config)


# --- what the guard does not judge -------------------------------------------------------


def test_delete_status_and_other_resources_are_not_judged() -> None:
    ended = trainjob(suspend=True, ended="preempted")
    resumed = with_suspend(ended, False)
    assert judge(request(None, ended, operation="DELETE")).rule is Rule.NOT_GUARDED
    assert judge(request(resumed, ended, sub_resource="status")).rule is Rule.NOT_GUARDED
    pod_like = request(resumed, ended)
    pod_like["resource"] = {"group": "", "version": "v1", "resource": "pods"}
    assert judge(pod_like).rule is Rule.NOT_GUARDED
    other_group = request(resumed, ended)
    other_group["resource"] = {"group": "jobset.x-k8s.io", "version": "v1", "resource": "trainjobs"}
    assert judge(other_group).allowed


def test_objects_without_the_job_label_are_anyone_s() -> None:
    old = trainjob()
    del old["metadata"]["labels"][LABEL_JOB]
    new = copy.deepcopy(old)
    new["spec"]["trainer"]["numNodes"] = 64
    decision = judge(request(new, old, user=STRANGER))
    assert (decision.allowed, decision.rule) == (True, Rule.PASSED)


# --- rule 1: an ended attempt is never resumed -------------------------------------------


@pytest.mark.parametrize("user", [KUEUE_USER, DISPATCH_USER, "kubernetes-admin"])
def test_resuming_an_ended_trainjob_is_refused_whoever_asks(user: str) -> None:
    old = trainjob(suspend=True, ended="preempted", attempt=3)
    decision = judge(request(with_suspend(old, False), old, user=user))
    assert not decision.allowed
    assert (decision.rule, decision.code, decision.refused_resume) == (
        Rule.RESUME_AFTER_END, 403, True
    )  # fmt: skip
    message = decision.message
    assert message.startswith("TrainJob ml/train-abc-3 (dispatch job train-abc, attempt 3): ")
    assert f"{ANNOTATION_ENDED}=preempted" in message
    assert "spec.suspend true -> false" in message
    assert message.endswith(f"asked by {user}")
    assert "\n" not in message


def test_resuming_a_trainjob_whose_ranks_started_is_refused_before_dispatch_saw_the_end() -> None:
    """``dispatch.dev/started``: the suspension being undone ended the attempt, whether or not
    a supervisor has seen it (none running, or behind)."""
    old = trainjob(suspend=True, attempt=2)
    old["metadata"]["annotations"][ANNOTATION_STARTED] = "2026-12-02T06:00:00Z"
    decision = judge(request(with_suspend(old, False), old, user=KUEUE_USER))
    assert (decision.allowed, decision.rule, decision.refused_resume) == (
        False, Rule.RESUME_AFTER_END, True
    )  # fmt: skip
    assert f"({ANNOTATION_STARTED}=2026-12-02T06:00:00Z, then suspended)" in decision.message
    # the first start (no mark yet) and a suspension of a started one are allowed
    fresh = trainjob(suspend=True, attempt=2)
    assert judge(request(with_suspend(fresh, False), fresh, user=KUEUE_USER)).allowed
    running = with_suspend(old, False)
    assert judge(request(with_suspend(running, True), running, user=KUEUE_USER)).allowed


def test_the_end_mark_added_with_the_resume_is_refused_too() -> None:
    old = trainjob(suspend=True)
    new = with_suspend(old, False)
    new["metadata"]["annotations"][ANNOTATION_ENDED] = "succeeded"
    decision = judge(request(new, old, user=DISPATCH_USER))
    assert decision.rule is Rule.RESUME_AFTER_END


def test_suspending_an_ended_trainjob_and_resuming_a_live_one_are_allowed() -> None:
    running_ended = trainjob(suspend=False, ended="preempted")
    stop = judge(request(with_suspend(running_ended, True), running_ended, user=KUEUE_USER))
    assert stop.allowed
    live = trainjob(suspend=True)
    assert judge(request(with_suspend(live, False), live, user=KUEUE_USER)).allowed


# --- rule 3: Kueue's own changes, exactly -------------------------------------------------


def test_kueue_admitting_a_trainjob_is_allowed() -> None:
    # RunWithPodSetsInfo: its entry filled while suspended, then suspend false
    admitted = trainjob(suspend=True)
    patched = kueue_runs(admitted)
    first = judge(request(patched, admitted, user=KUEUE_USER))
    assert (first.allowed, first.rule) == (True, Rule.PASSED)
    second = judge(request(with_suspend(patched, False), patched, user=KUEUE_USER))
    assert second.allowed
    # and both at once (a controller may merge them into one update)
    both = judge(request(with_suspend(patched, False), admitted, user=KUEUE_USER))
    assert both.allowed


def test_kueue_stopping_a_trainjob_is_allowed() -> None:
    running = with_suspend(kueue_runs(trainjob(suspend=True)), False)
    suspended = with_suspend(running, True)
    assert judge(request(suspended, running, user=KUEUE_USER)).allowed
    restored = kueue_restores(suspended)
    assert judge(request(restored, suspended, user=KUEUE_USER)).allowed


def test_kueue_s_entry_added_from_nothing_is_allowed() -> None:
    # the emulator's Kueue (and a Kueue whose webhook did not run on create) adds its entry
    old = trainjob()
    old["spec"]["runtimePatches"] = old["spec"]["runtimePatches"][:1]
    new = kueue_runs(trainjob())
    assert judge(request(new, old, user=KUEUE_USER)).allowed
    bare = copy.deepcopy(old)
    bare["spec"]["runtimePatches"].append({"manager": KUEUE_MANAGER})
    assert judge(request(bare, old, user=KUEUE_USER)).allowed


def test_more_than_kueue_writes_in_its_entry_is_refused() -> None:
    old = kueue_runs(trainjob())
    new = copy.deepcopy(old)
    pod = kueue_entry(new)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    pod["template"]["spec"]["template"]["spec"]["containers"] = [{"name": "node", "image": "x"}]
    decision = judge(request(new, old, user=KUEUE_USER))
    assert (decision.allowed, decision.rule, decision.code) == (False, Rule.SPEC_CHANGED, 403)
    assert (
        f"spec.runtimePatches[manager={KUEUE_MANAGER}].trainingRuntimeSpec.template.spec"
        ".replicatedJobs[0].template.spec.template.spec.containers[0].image"
    ) in decision.message


def test_a_stranger_changing_the_spec_is_refused_with_the_path_named() -> None:
    old = trainjob()
    new = copy.deepcopy(old)
    new["spec"]["trainer"]["numNodes"] = 4
    decision = judge(request(new, old, user=STRANGER))
    assert not decision.allowed
    assert (decision.rule, decision.code, decision.refused_resume) == (
        Rule.SPEC_CHANGED, 403, False
    )  # fmt: skip
    assert decision.message == (
        "TrainJob ml/train-abc-1 (dispatch job train-abc, attempt 1): only dispatch may change "
        f"its spec; changed: spec.trainer.numNodes; asked by {STRANGER}"
    )


def test_a_stranger_editing_dispatch_s_runtime_patch_is_refused() -> None:
    old = trainjob()
    new = copy.deepcopy(old)
    env = new["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    env["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"][0][
        "value"
    ] = "2"
    decision = judge(request(new, old, user=KUEUE_USER))
    assert decision.rule is Rule.SPEC_CHANGED
    assert "spec.runtimePatches[manager=dispatch.dev/dispatch].trainingRuntimeSpec" in (
        decision.message
    )
    # removing it, or adding another manager's entry, is refused as well
    gone = copy.deepcopy(old)
    gone["spec"]["runtimePatches"] = gone["spec"]["runtimePatches"][1:]
    assert judge(request(gone, old)).rule is Rule.SPEC_CHANGED
    other = copy.deepcopy(old)
    other["spec"]["runtimePatches"].append({"manager": "example.com/mine"})
    assert judge(request(other, old)).rule is Rule.SPEC_CHANGED


def test_a_denial_names_a_bounded_number_of_paths() -> None:
    old = trainjob()
    new = copy.deepcopy(old)
    new["spec"]["trainer"]["env"] = [{"name": f"V{i}", "value": "x"} for i in range(50)]
    decision = judge(request(new, old))
    assert decision.message.count("spec.trainer.env[") == MAX_PATHS_SHOWN
    assert "and more" in decision.message


def test_a_suspend_that_is_not_a_boolean_is_a_spec_change() -> None:
    old = trainjob()
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = {"sneaky": True}
    assert judge(request(new, old, user=KUEUE_USER)).rule is Rule.SPEC_CHANGED


def test_dispatch_s_identities_may_change_the_spec() -> None:
    old = trainjob()
    new = copy.deepcopy(old)
    new["spec"]["trainer"]["numNodes"] = 4
    assert judge(request(new, old, user=DISPATCH_USER)).allowed
    by_group = GuardConfig(identities=frozenset(), groups=frozenset({"dispatch-robots"}))
    assert judge(request(new, old, groups=("dispatch-robots",)), by_group).allowed
    assert not judge(request(new, old, groups=("others",)), by_group).allowed


# --- rule 2: dispatch's marks -------------------------------------------------------------


def test_removing_the_end_mark_is_refused() -> None:
    old = trainjob(suspend=True, ended="preempted")
    new = copy.deepcopy(old)
    del new["metadata"]["annotations"][ANNOTATION_ENDED]
    decision = judge(request(new, old, user=KUEUE_USER))
    assert (decision.allowed, decision.rule, decision.code) == (False, Rule.DISPATCH_LABELS, 403)
    assert 'changed: metadata.annotations["dispatch.dev/ended"] removed;' in decision.message
    assert judge(request(new, old, user=DISPATCH_USER)).allowed


def test_changing_or_removing_the_job_label_is_refused() -> None:
    old = trainjob()
    new = copy.deepcopy(old)
    new["metadata"]["labels"][LABEL_JOB] = "someone-else"
    decision = judge(request(new, old))
    assert decision.rule is Rule.DISPATCH_LABELS
    assert 'metadata.labels["dispatch.dev/job"] train-abc -> someone-else' in decision.message
    del new["metadata"]["labels"][LABEL_JOB]
    assert judge(request(new, old)).rule is Rule.DISPATCH_LABELS


def test_other_metadata_is_anyone_s() -> None:
    old = trainjob()
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["team"] = "a"
    new["metadata"]["annotations"]["note"] = "hi"
    new["metadata"]["finalizers"] = ["example.com/keep"]
    assert judge(request(new, old)).allowed


def test_a_stranger_creating_an_object_with_dispatch_s_labels_is_refused() -> None:
    tj = trainjob()
    decision = judge(request(tj, None, user=STRANGER))
    assert decision.rule is Rule.DISPATCH_LABELS
    assert 'metadata.labels["dispatch.dev/job"] added' in decision.message
    assert judge(request(tj, None, user=DISPATCH_USER)).allowed


# --- rule 4: the runtime rules ------------------------------------------------------------


def _runtime(name: str, **labels: str) -> JsonObj:
    raw: JsonObj = yaml.safe_load((EXAMPLES / "kubeflow" / "runtimes" / name).read_text())
    raw["metadata"].setdefault("labels", {}).update(labels)
    return raw


def test_a_checked_runtime_breaking_the_rules_is_refused_with_every_reason() -> None:
    bad = _runtime("built-in-torch.yaml", **{LABEL_CHECKED: "true"})
    decision = judge(request(bad, None, user=DISPATCH_USER))
    assert (decision.allowed, decision.rule, decision.code) == (False, Rule.RUNTIME_RULES, 422)
    assert decision.message.startswith(
        "ClusterTrainingRuntime torch-distributed: refused by dispatch's runtime rules"
    )
    from dispatch.adapters.kubeflow.planning.rules import check_runtime

    reasons = check_runtime(bad, KubeflowSettings()).reasons
    assert len(reasons) >= 2
    for reason in reasons:
        assert f"{reason.rule}: {' '.join(reason.message.split())}" in decision.message


def test_a_checked_good_runtime_and_an_unchecked_bad_one_are_allowed() -> None:
    good = _runtime("torch.yaml", **{LABEL_CHECKED: ""})
    assert judge(request(good, None)).allowed
    unchecked = _runtime("built-in-torch.yaml")
    assert judge(request(unchecked, None)).allowed
    # updates are checked as well
    bad = _runtime("built-in-torch.yaml", **{LABEL_CHECKED: ""})
    assert judge(request(bad, good)).rule is Rule.RUNTIME_RULES


def test_a_runtime_copy_keeps_the_checked_label_but_is_dispatch_s_not_judged_again() -> None:
    """dispatch copies a checked runtime with its labels: the copy, created by dispatch, is
    not held to the runtime rules again (it was checked when its job was planned); created by
    anyone else, it is refused for the dispatch labels it adds."""
    copy_ = _runtime("built-in-torch.yaml", **{LABEL_CHECKED: "", "dispatch.dev/job": "j"})
    copy_["kind"] = "TrainingRuntime"
    copy_["metadata"]["namespace"] = "ml"
    assert judge(request(copy_, None, user=DISPATCH_USER)).allowed
    assert judge(request(copy_, None, user=STRANGER)).rule is Rule.DISPATCH_LABELS


def test_the_runtime_selector_and_settings_are_the_configured_ones() -> None:
    rank_restart = _runtime("torch-rank-restart.yaml", tier="prod")
    strict = GuardConfig(runtime_selector={"tier": "prod"})
    refused = judge(request(rank_restart, None), strict)
    assert refused.rule is Rule.RUNTIME_RULES
    assert judge(request(rank_restart, None), GuardConfig(runtime_selector={"tier": "dev"})).allowed
    lenient = GuardConfig(
        runtime_selector={"tier": "prod"}, settings=KubeflowSettings(allow_rank_restart=True)
    )
    allowed = judge(request(rank_restart, None), lenient)
    assert allowed.allowed
    assert allowed.warnings and "allowRankRestart" in allowed.warnings[0]


def test_a_stranger_changing_a_runtime_copy_is_refused() -> None:
    copy_ = _runtime("torch.yaml", **{LABEL_JOB: "train-abc"})
    copy_["kind"] = "TrainingRuntime"
    copy_["metadata"]["namespace"] = "ml"
    changed = copy.deepcopy(copy_)
    changed["spec"]["mlPolicy"]["numNodes"] = 9
    decision = judge(request(changed, copy_, user=STRANGER))
    assert decision.rule is Rule.SPEC_CHANGED
    assert "TrainingRuntime ml/" in decision.message
    assert "spec.mlPolicy.numNodes" in decision.message


# --- the response -------------------------------------------------------------------------


def test_the_response_echoes_the_uid_and_carries_the_status_of_a_denial() -> None:
    old = trainjob(ended="app_error")
    req = request(with_suspend(old, False), old, uid="abc-123")
    decision = judge(req)
    answer = response({"request": req}, decision)
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == "abc-123"
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"] == {
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": decision.message,
    }
    allowed = response({"request": req}, Decision(True, Rule.PASSED, warnings=("w",)))
    assert allowed["response"] == {"uid": "abc-123", "allowed": True, "warnings": ["w"]}
    assert response("garbage", decision)["response"]["uid"] == ""


# --- hostile input ------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json)
def test_any_json_is_answered_without_raising(value: Any) -> None:
    assert judge(value).allowed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=st.dictionaries(st.sampled_from(["suspend", "runtimePatches", "trainer", "x"]), _json),
    meta=st.dictionaries(st.sampled_from(["labels", "annotations", "name"]), _json),
    kind=st.sampled_from(["TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"]),
)
def test_any_object_of_a_guarded_kind_is_answered_without_raising(
    spec: JsonObj, meta: JsonObj, kind: str
) -> None:
    old = trainjob()
    old["kind"] = kind
    new = copy.deepcopy(old)
    new["spec"].update(spec)
    new["metadata"].update(meta)
    for req in (request(new, old), request(old, new), request(new, None)):
        decision = judge(req, GuardConfig(runtime_selector={}))
        assert isinstance(decision.message, str) and "\n" not in decision.message


def _deep(levels: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": [value]}
    return value


def test_deep_nesting_is_answered_without_raising() -> None:
    old = trainjob()
    new = copy.deepcopy(old)
    old["spec"]["trainer"]["deep"] = _deep(20_000, 1)
    new["spec"]["trainer"]["deep"] = _deep(20_000, 1)
    decision = judge(request(new, old))
    assert decision.rule is Rule.SPEC_CHANGED  # too deep to compare counts as changed
    assert judge(request(new, old, user=DISPATCH_USER)).allowed
    new["metadata"]["annotations"]["dispatch.dev/x"] = _deep(20_000, 2)
    old["metadata"]["annotations"]["dispatch.dev/x"] = _deep(20_000, 2)
    assert judge(request(new, old)).rule is Rule.DISPATCH_LABELS
    runtime = _runtime("torch.yaml", **{LABEL_CHECKED: ""})
    runtime["spec"]["template"]["spec"]["deep"] = _deep(20_000, 3)
    judge(request(runtime, None))


def test_huge_objects_are_answered_quickly_and_bounded() -> None:
    import time

    old = trainjob()
    new = copy.deepcopy(old)
    new["spec"]["trainer"]["env"] = [{"name": f"V{i}", "value": "x" * 50} for i in range(50_000)]
    new["metadata"]["name"] = "n" * 1_000_000
    started = time.perf_counter()
    decision = judge(request(new, old))
    assert time.perf_counter() - started < 2.0
    assert decision.rule is Rule.SPEC_CHANGED
    assert len(decision.message) < 3000
    labels_only = copy.deepcopy(old)
    labels_only["metadata"]["labels"].update({f"dispatch.dev/k{i}": "v" for i in range(100_000)})
    assert len(judge(request(labels_only, old)).message) < 3000


def test_malformed_requests_are_allowed_not_raised() -> None:
    tj = trainjob()
    for broken in (
        {**request(tj, tj), "object": "not an object"},
        {**request(tj, tj), "oldObject": None},
        {**request(tj, tj), "userInfo": ["x"]},
        {**request(tj, tj), "resource": "trainjobs"},
        {**request(tj, tj), "operation": 7},
    ):
        judge(broken)
    assert judge({**request(tj, tj), "oldObject": None}).allowed

"""Torch ``envInjection`` (Trainer v2.3), case by case after
``pkg/runtime/framework/plugins/torch/torch_test.go`` at v2.3.0 (``TestTorch``, the cases
named ``envInjection ...``; the torchtune one is a golden case, cases/torchtune): each
target container or init container gets the five ``PET_*`` variables, master address and
port included; a target the runtime does not have fails the build with Trainer's message, and
the runtime rules refuse such a runtime before anything is created."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.adapters.kubeflow.planning.jobset import BuildRefused, render_jobset
from dispatch.adapters.kubeflow.planning.rules import ML_POLICY, check_runtime
from dispatch.adapters.kubeflow.planning.settings import settings_from_mapping
from tests.kubeflow.planning.test_jobset import pod_spec, runtime, trainjob

PET = {
    "PET_NNODES": "2",
    "PET_NPROC_PER_NODE": "1",
    "PET_NODE_RANK": {
        "fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        }
    },
    "PET_MASTER_ADDR": "test-job-node-0-0.test-job",
    "PET_MASTER_PORT": "29500",
}


def targets(*pairs: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "torch": {
            "envInjection": {
                "targets": [{"jobName": job, "containerNames": names} for job, names in pairs]
            }
        }
    }


def with_containers(
    rt: dict[str, Any],
    job: str,
    *,
    init: list[str] = (),
    extra: list[str] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    rjob = next(r for r in rt["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == job)
    spec = rjob["template"]["spec"]["template"]["spec"]
    if init:
        spec["initContainers"] = [{"name": n, "image": "busybox"} for n in init]
    spec["containers"] += [{"name": n, "image": "busybox"} for n in extra]
    return rt


def env(jobset: dict[str, Any], job: str, container: str) -> dict[str, Any] | None:
    spec = pod_spec(jobset, job)
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if c["name"] == container:
                return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}
    return None


def render(rt: dict[str, Any]) -> dict[str, Any]:
    return render_jobset(trainjob({"numNodes": 2}), rt)


def test_an_init_container() -> None:
    """Case "envInjection with init container"."""
    got = render(with_containers(runtime(targets(("node", ["preflight-check"]))), "node",
                                 init=["preflight-check"]))  # fmt: skip
    assert env(got, "node", "preflight-check") == PET
    assert env(got, "node", "node") == PET


def test_several_containers_of_one_target() -> None:
    """Case "envInjection with multiple containers in same target"."""
    rt = with_containers(
        runtime(targets(("node", ["preflight-check", "setup-env"]))),
        "node",
        init=["preflight-check", "setup-env"],
    )
    got = render(rt)
    assert env(got, "node", "preflight-check") == PET
    assert env(got, "node", "setup-env") == PET


def test_a_sidecar() -> None:
    """Case "envInjection with sidecar (regular container)"."""
    rt = with_containers(runtime(targets(("node", ["sidecar"]))), "node", extra=["sidecar"])
    assert env(render(rt), "node", "sidecar") == PET


def test_no_targets_changes_nothing_else() -> None:
    """Case "envInjection with empty targets (no additional injection)"."""
    rt = with_containers(runtime({"torch": {"envInjection": {"targets": []}}}), "node",
                         init=["preflight-check"])  # fmt: skip
    assert env(render(rt), "node", "preflight-check") == {}


def test_targets_in_different_jobs_leave_unlisted_containers_unchanged() -> None:
    """Case "envInjection with multiple targets in different jobs leaves unlisted init
    container unchanged"."""
    rt = runtime(targets(("node", ["preflight-check"]), ("dataset-initializer", ["warmup"])))
    with_containers(rt, "node", init=["preflight-check", "untouched"])
    with_containers(rt, "dataset-initializer", init=["warmup"])
    got = render(rt)
    assert env(got, "node", "preflight-check") == PET
    assert env(got, "dataset-initializer", "warmup") == PET
    assert env(got, "node", "untouched") == {}


@pytest.mark.parametrize(
    ("job", "container"),
    [
        ("node", "non-existent-container"),  # "envInjection target container does not exist"
        ("missing-job", "preflight-check"),  # "envInjection target job does not exist"
    ],
)
def test_a_missing_target_fails_the_build_and_the_rules(job: str, container: str) -> None:
    rt = with_containers(runtime(targets((job, [container]))), "node", init=["preflight-check"])
    with pytest.raises(BuildRefused) as refused:
        render(rt)
    assert str(refused.value) == (
        f'envInjection target podSet "{job}" container "{container}" not found in runtime template'
    )
    verdict = check_runtime(rt, settings_from_mapping({}))
    reasons = [r for r in verdict.reasons if r.rule == ML_POLICY]
    assert any(container in r.message and "envInjection" in r.message for r in reasons)


def test_on_the_emulator_the_target_sees_the_master_address_and_a_bad_target_is_refused() -> None:
    """The emulator's Trainer renders the same: the pod's init container has PET_MASTER_ADDR;
    its webhook refuses a TrainJob whose runtime names a container it does not have."""
    from dispatch.testing.k8s.errors import ApiError
    from dispatch.testing.k8s.runtimes import torch_distributed
    from tests.emulator.scenario_helpers import cluster, wait_for
    from tests.emulator.scenario_helpers import trainjob as tj

    def runtime_with(name: str, target: str) -> dict[str, Any]:
        rt = torch_distributed()
        rt["metadata"]["name"] = name
        rt["spec"]["mlPolicy"]["torch"] = {
            "envInjection": {"targets": [{"jobName": "node", "containerNames": [target]}]}
        }
        pod = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        pod["spec"]["initContainers"] = [{"name": "preflight", "image": "busybox"}]
        return rt

    with cluster() as emu:
        emu.create(runtime_with("torch-inject", "preflight"))
        emu.create(runtime_with("torch-bad-inject", "nope"))
        emu.create(tj("injected", "torch-inject", trainer={"numNodes": 2}))
        rtype = emu.cluster.rtype("v1", "Pod")

        def pods() -> list[dict[str, Any]]:
            return [
                p
                for p in emu.call(lambda: emu.cluster.store.list(rtype, "default").items)
                if p["metadata"]["name"].startswith("injected-node-")
            ]

        found = wait_for("the pods", lambda: len(pods()) == 2 and pods())
        init = {e["name"]: e.get("value") for e in found[0]["spec"]["initContainers"][0]["env"]}
        assert init["PET_MASTER_ADDR"] == "injected-node-0-0.injected"
        with pytest.raises(ApiError) as refused:
            emu.create(tj("refused", "torch-bad-inject", trainer={"numNodes": 2}))
    assert 'container "nope" not found in runtime template' in str(refused.value.message)

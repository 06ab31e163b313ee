"""Workload fidelity (issue 27): what the API server and the Job, JobSet, PodGC, taint and
kubelet controllers of Kubernetes 1.33 / JobSet v0.12 do to Jobs, JobSets and Pods.

Each test names the real source it restates; each failed against the emulator before the fix.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dispatch.testing.k8s import ClusterConfig, Emulator
from dispatch.testing.k8s.controllers import Kubelet, NodeLifecycle, Scheduler
from dispatch.testing.k8s.errors import ApiError
from dispatch.testing.k8s.scenario import PodBehaviour, PodRule, Scenario

from .scenario_helpers import JOBSET, cluster, events, find, wait_for

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATIONS = [
    {"key": NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def _job(name: str, restart_policy: str | None = "Never", **spec: Any) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if restart_policy is not None:
        pod_spec["restartPolicy"] = restart_policy
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": {"spec": pod_spec}, **spec},
    }


def _jobset(name: str, **spec: Any) -> dict[str, Any]:
    job = {
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": 0,
        "template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
        },
    }
    return {
        "apiVersion": JOBSET,
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": job}}],
            **spec,
        },
    }


def _call(emu: Emulator, fn: Any) -> Any:
    """``fn(store)`` on the emulator's loop; an ApiError comes back as the value."""

    def run() -> Any:
        try:
            return fn(emu.cluster.store)
        except ApiError as exc:
            return exc

    return emu.call(run)


def _rtype(emu: Emulator, api_version: str, kind: str) -> Any:
    return emu.cluster.rtype(api_version, kind)


def _condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    found = [
        c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == ctype
    ]
    return found[0] if found else None


@pytest.fixture
def bare() -> Any:
    """An emulator with no controllers: only the API server's own behaviour."""
    with Emulator(ClusterConfig()) as emu:
        yield emu


# ------------------------------------------------------------------ item 2: RestartingJobSet


def test_restarting_jobset_turns_false_when_jobs_ready_then_suspended() -> None:
    """jobset v0.12 ``jobset_controller.go``: a restart sets RestartingJobSet True; once every
    Job of the new run is ready, ``setRestartingConditionFalse(JobsReady, "all jobs are
    ready")``; suspending then sets reason ``JobSetSuspended`` (status unchanged, so its time
    stays). Read from the JobSet's watch, which misses no state."""
    scenario = Scenario(
        pods=(PodRule(PodBehaviour(run_for=2, exit_code=1), attempt=1),),
        default=PodBehaviour(run_for=None),
    )
    with cluster(scenario) as emu:
        jobsets = _rtype(emu, JOBSET, "JobSet")

        async def follow() -> list[tuple[str, str, str, str]]:
            store = emu.cluster.store
            sub = store.subscribe([jobsets], namespace="default", since=store.resource_version)
            store.create(jobsets, "default", _jobset("rs", failurePolicy={"maxRestarts": 1}))
            seen: list[tuple[str, str, str, str]] = []
            try:
                async for _, change in sub:
                    c = _condition(change.obj, "RestartingJobSet")
                    if c is None or (seen and seen[-1][:2] == (c["status"], c["reason"])):
                        continue
                    seen.append((c["status"], c["reason"], c["message"], c["lastTransitionTime"]))
                    if c["reason"] == "JobsReady":
                        patch = {"spec": {"suspend": True}}
                        store.patch(jobsets, "default", "rs", "application/merge-patch+json", patch)
                    if c["reason"] == "JobSetSuspended":
                        return seen
            finally:
                sub.close()
            raise AssertionError("watch ended")

        seen = emu.run(asyncio.wait_for(follow(), timeout=30))
        assert [s[:3] for s in seen] == [
            (
                "True",
                "DefaultFailurePolicy",
                "applying RestartJobSet failure policy action (first failed job: rs-node-0)",
            ),
            ("False", "JobsReady", "all jobs are ready"),
            ("False", "JobSetSuspended", "jobset is suspended"),
        ]
        assert seen[2][3] == seen[1][3]  # same status: lastTransitionTime kept
        reasons = [(e["type"], e["reason"]) for e in events(emu, "rs")]
        assert ("Normal", "JobsReady") in reasons
        assert ("Normal", "JobSetSuspended") in reasons


def test_restarting_jobset_false_when_jobset_fails() -> None:
    """``setJobSetFailedCondition`` also sets RestartingJobSet False/JobSetFailed
    ("jobset failed"): every run fails, the second failure reaches maxRestarts."""
    scenario = Scenario(default=PodBehaviour(run_for=2, exit_code=1))
    with cluster(scenario) as emu:
        emu.create(_jobset("rf", failurePolicy={"maxRestarts": 1}))
        failed = wait_for("failed", lambda: _condition(find(emu, JOBSET, "JobSet", "rf"), "Failed"))
        assert failed["reason"] == "ReachedMaxRestarts"
        restarting = _condition(find(emu, JOBSET, "JobSet", "rf"), "RestartingJobSet")
        assert restarting is not None
        assert (restarting["status"], restarting["reason"], restarting["message"]) == (
            "False",
            "JobSetFailed",
            "jobset failed",
        )


# ------------------------------------------------------------------ headless Service


def test_jobset_creates_its_headless_service() -> None:
    """``createHeadlessSvcIfNecessary``: DNS hostnames on (the webhook's default), a Service
    named after the subdomain, clusterIP None, selecting the JobSet's pods, publishing
    not-ready addresses, owned by the JobSet; none when DNS hostnames are off."""
    with cluster(Scenario(default=PodBehaviour(run_for=None))) as emu:
        js = emu.create(_jobset("dns"))
        emu.create(_jobset("named", network={"subdomain": "workers"}))
        emu.create(_jobset("nodns", network={"enableDNSHostnames": False}))
        service = wait_for("service", lambda: find(emu, "v1", "Service", "dns"))
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == {"jobset.sigs.k8s.io/jobset-name": "dns"}
        assert service["spec"]["publishNotReadyAddresses"] is True
        (owner,) = service["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            "JobSet",
            js["metadata"]["uid"],
            True,
        )
        wait_for("named service", lambda: find(emu, "v1", "Service", "workers"))
        job = wait_for("job", lambda: find(emu, "batch/v1", "Job", "named-node-0"))
        assert job["spec"]["template"]["spec"]["subdomain"] == "workers"
        nodns = wait_for("job", lambda: find(emu, "batch/v1", "Job", "nodns-node-0"))
        assert "subdomain" not in nodns["spec"]["template"]["spec"]
        assert find(emu, "v1", "Service", "nodns") is None


# ------------------------------------------------------------------ item 3: FailJob counts


def test_fail_job_rule_counts_the_failed_pod() -> None:
    """``job_controller.go``: a pod matched by a FailJob rule is counted in ``status.failed``
    (``matchPodFailurePolicy`` returns countFailed=true for FailJob)."""
    scenario = Scenario(default=PodBehaviour(run_for=1, exit_code=3))
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}]}
    with cluster(scenario) as emu:
        emu.create(_job("fj", completions=1, completionMode="Indexed", podFailurePolicy=policy))
        job = wait_for(
            "job failed",
            lambda: [
                j
                for j in [find(emu, "batch/v1", "Job", "fj")]
                if (_condition(j, "Failed") or {}).get("status") == "True"
            ],
        )[0]
        failed = _condition(job, "Failed")
        assert failed is not None and failed["reason"] == "PodFailurePolicy"
        assert job["status"]["failed"] == 1


# ------------------------------------------------------------------ item 4: Job create


def test_job_create_generates_selector_and_labels(bare: Emulator) -> None:
    """``pkg/registry/batch/job/strategy.go`` ``generateSelector``."""
    job = bare.create(_job("gen"))
    uid = job["metadata"]["uid"]
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"] == {
        "job-name": "gen",
        "batch.kubernetes.io/job-name": "gen",
        "controller-uid": uid,
        "batch.kubernetes.io/controller-uid": uid,
    }
    manual = bare.create(
        {
            **_job("manual"),
            "spec": {
                "manualSelector": True,
                "selector": {"matchLabels": {"app": "x"}},
                "template": {
                    "metadata": {"labels": {"app": "x"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]},
                },
            },
        }
    )
    assert manual["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert manual["spec"]["template"]["metadata"]["labels"] == {"app": "x"}
    jobs = _rtype(bare, "batch/v1", "Job")
    err = _call(
        bare,
        lambda s: s.create(
            jobs,
            "default",
            {**_job("nosel"), "spec": {**_job("nosel")["spec"], "manualSelector": True}},
        ),
    )
    assert isinstance(err, ApiError) and err.code == 422
    assert "spec.selector: Required value" in err.message


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (
            _job("always", restart_policy="Always"),
            'Job.batch "always" is invalid: spec.template.spec.restartPolicy: Required value: '
            'valid values: "OnFailure", "Never"',
        ),
        (
            _job("unset", restart_policy=None),
            'Job.batch "unset" is invalid: spec.template.spec.restartPolicy: Required value: '
            'valid values: "OnFailure", "Never"',
        ),
        (
            _job(
                "pfp",
                restart_policy="OnFailure",
                podFailurePolicy={
                    "rules": [
                        {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}}
                    ]
                },
            ),
            'Job.batch "pfp" is invalid: spec.template.spec.restartPolicy: Invalid value: '
            '"OnFailure": only "Never" is supported when podFailurePolicy is specified',
        ),
    ],
)
def test_job_restart_policy_refused(bare: Emulator, job: dict[str, Any], message: str) -> None:
    """``pkg/apis/batch/validation`` ``validateJobSpec`` (1.33: an unset policy is defaulted
    to Always, and both are "Required value")."""
    err = _call(bare, lambda s: s.create(_rtype(bare, "batch/v1", "Job"), "default", job))
    assert isinstance(err, ApiError)
    assert (err.code, err.message) == (422, message)
    assert (
        _call(
            bare,
            lambda s: s.peek(_rtype(bare, "batch/v1", "Job"), "default", job["metadata"]["name"]),
        )
        is None
    )


# ------------------------------------------------------------------ item 5: PodGC timing


def test_pod_gc_waits_for_the_quarantine() -> None:
    """``pkg/controller/podgc/gc_controller.go``: passes every 20 s, a missing node is
    quarantined 40 s; then its pods get DisruptionTarget/DeletionByPodGC and phase Failed, and
    are force-deleted: 40 to 60 emulated seconds after the node went."""
    config = ClusterConfig(time_scale=50, controllers=[NodeLifecycle()])
    with Emulator(config) as emu:
        pods_type = _rtype(emu, "v1", "Pod")
        emu.create(_pod("orphan", nodeName="node-1"))
        seen: list[tuple[float, str, dict[str, Any]]] = []

        async def watch_until_deleted() -> float:
            store, clock = emu.cluster.store, emu.cluster.clock
            sub = store.subscribe([pods_type], namespace="default", since=store.resource_version)
            store.delete(_rtype(emu, "v1", "Node"), None, "node-1")
            gone_at = clock.now()
            try:
                async for event, change in sub:
                    seen.append((clock.now(), event, change.obj))
                    if event == "DELETED":
                        return gone_at
            finally:
                sub.close()
            raise AssertionError("watch ended")

        gone_at = emu.run(asyncio.wait_for(watch_until_deleted(), timeout=10))
        deleted_at = seen[-1][0]
        assert 40 <= deleted_at - gone_at <= 65
        marked = next(obj for _, event, obj in seen if event == "MODIFIED")
        target = _condition(marked, "DisruptionTarget")
        assert target is not None
        assert (target["reason"], target["message"]) == (
            "DeletionByPodGC",
            "PodGC: node no longer exists",
        )
        assert marked["status"]["phase"] == "Failed"


# ------------------------------------------------------------------ item 9: pod updates


def test_pod_update_may_change_only_the_updatable_fields(bare: Emulator) -> None:
    """``ValidatePodUpdate`` (``pkg/apis/core/validation``, 1.33)."""
    pods_type = _rtype(bare, "v1", "Pod")
    created = bare.create(_pod("p", tolerations=[{"key": "gpu", "operator": "Exists"}]))

    def update(change: Any) -> Any:
        def run(store: Any) -> Any:
            body = store.get(pods_type, "default", "p")
            change(body["spec"])
            return store.update(pods_type, "default", "p", body)

        return _call(bare, run)

    image = update(lambda spec: spec["containers"][0].__setitem__("image", "busybox:2"))
    assert (
        not isinstance(image, ApiError) and image["spec"]["containers"][0]["image"] == "busybox:2"
    )
    err = update(lambda spec: spec.__setitem__("restartPolicy", "Never"))
    assert isinstance(err, ApiError) and err.code == 422
    assert err.message.startswith(
        'Pod "p" is invalid: spec: Forbidden: pod updates may not change fields other than '
        "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
        "`spec.tolerations` (only additions to existing tolerations),"
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
        "negative)\n"
    )
    err = update(lambda spec: spec.__setitem__("tolerations", spec["tolerations"][1:]))
    assert isinstance(err, ApiError)
    assert err.message == (
        'Pod "p" is invalid: spec.tolerations: Forbidden: existing toleration can not be '
        "modified except its tolerationSeconds"
    )
    added = update(lambda spec: spec["tolerations"].append({"key": "spot", "operator": "Exists"}))
    assert not isinstance(added, ApiError) and len(added["spec"]["tolerations"]) == 4
    assert created["spec"]["tolerations"][0] == {"key": "gpu", "operator": "Exists"}


def test_strategic_merge_replaces_tolerations_then_defaults_return(bare: Emulator) -> None:
    """``tolerations`` has no patchMergeKey in core/v1 ``types.go``: a strategic merge patch
    replaces the list; DefaultTolerationSeconds (create and update) then appends its two
    again, so the patch's toleration comes first."""
    bare.create(_pod("sm"))
    patched = _call(
        bare,
        lambda s: s.patch(
            _rtype(bare, "v1", "Pod"),
            "default",
            "sm",
            "application/strategic-merge-patch+json",
            {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}},
        ),
    )
    assert not isinstance(patched, ApiError)
    assert patched["spec"]["tolerations"] == [
        {"key": "gpu", "operator": "Exists"},
        *DEFAULT_TOLERATIONS,
    ]


def test_scheduling_gates_may_only_be_removed(bare: Emulator) -> None:
    pods_type = _rtype(bare, "v1", "Pod")
    bare.create(_pod("g", schedulingGates=[{"name": "a"}]))
    patch = "application/merge-patch+json"
    added = _call(
        bare,
        lambda s: s.patch(
            pods_type,
            "default",
            "g",
            patch,
            {"spec": {"schedulingGates": [{"name": "a"}, {"name": "b"}]}},
        ),
    )
    assert isinstance(added, ApiError)
    assert added.message == (
        'Pod "g" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, '
        "but found new scheduling gate 'b'"
    )
    removed = _call(
        bare,
        lambda s: s.patch(pods_type, "default", "g", patch, {"spec": {"schedulingGates": None}}),
    )
    assert not isinstance(removed, ApiError) and "schedulingGates" not in removed["spec"]


# ------------------------------------------------------------------ item 14: podIPs, tolerations


@pytest.mark.parametrize(
    ("own", "added"),
    [
        ([], DEFAULT_TOLERATIONS),
        ([{"operator": "Exists"}], []),  # tolerates every taint already
        (
            [
                {
                    "key": NOT_READY,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 60,
                }
            ],
            DEFAULT_TOLERATIONS[1:],
        ),
    ],
)
def test_default_toleration_seconds(bare: Emulator, own: list[Any], added: list[Any]) -> None:
    """``plugin/pkg/admission/defaulttolerationseconds``: not-ready and unreachable NoExecute
    for 300 s, unless a toleration of that key (or of every key) with that effect (or every
    effect) is there."""
    pod = bare.create(_pod("t", **({"tolerations": own} if own else {})))
    assert pod["spec"]["tolerations"] == [*own, *added]


def test_running_pod_has_pod_ips() -> None:
    """The kubelet writes ``status.podIPs`` (and ``hostIPs``) beside ``podIP``."""
    config = ClusterConfig(
        time_scale=100,
        controllers=[Scheduler(), Kubelet(Scenario(default=PodBehaviour(run_for=None)))],
    )
    with Emulator(config) as emu:
        emu.create(_pod("ip"))
        pod = wait_for(
            "running",
            lambda: [
                p
                for p in [find(emu, "v1", "Pod", "ip")]
                if p and p["status"].get("phase") == "Running"
            ],
        )[0]
        assert pod["status"]["podIPs"] == [{"ip": pod["status"]["podIP"]}]
        assert pod["status"]["hostIPs"] == [{"ip": pod["status"]["hostIP"]}]


def test_taint_manager_respects_toleration_seconds() -> None:
    """``pkg/controller/tainteviction``: an untolerated NoExecute taint evicts at once; a
    toleration without ``tolerationSeconds`` keeps the pod for ever."""
    config = ClusterConfig(time_scale=50, controllers=[NodeLifecycle()])
    with Emulator(config) as emu:
        emu.create(_pod("stays", nodeName="node-1", tolerations=[{"operator": "Exists"}]))
        emu.create(_pod("goes", nodeName="node-1"))
        nodes = _rtype(emu, "v1", "Node")
        taint = {"key": "example.com/broken", "effect": "NoExecute"}
        _call(
            emu,
            lambda s: s.patch(
                nodes, None, "node-1", "application/merge-patch+json", {"spec": {"taints": [taint]}}
            ),
        )
        evicted = wait_for(
            "evicted",
            lambda: [
                p
                for p in [find(emu, "v1", "Pod", "goes")]
                if p is None or p["metadata"].get("deletionTimestamp")
            ],
            timeout=2,  # 100 emulated seconds: at once, not after the 300 s of a default
        )
        assert evicted
        stays = find(emu, "v1", "Pod", "stays")
        assert stays is not None and not stays["metadata"].get("deletionTimestamp")

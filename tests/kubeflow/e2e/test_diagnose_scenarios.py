"""The failures of public bug reports, produced by the emulator's controllers and read live by
`dispatch diagnose` (read-only): an init container backing off, a rank evicted and replaced by
its Job, pods deleted after the Job failed, a TrainJob that can never fit its Kueue quota,
and a PyTorchJob (served as stored objects: the emulator runs no training-operator)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dispatch.adapters.kubeflow.api.client import Connection
from dispatch.adapters.kubeflow.causes.decide import Diagnosis
from dispatch.adapters.kubeflow.live.follow import Following, diagnose_live
from dispatch.cli.main import cli
from dispatch.model import State
from dispatch.testing.k8s import ClusterConfig, Emulator
from dispatch.testing.k8s.controllers import ClusterQueue, KueueConfig, standard_controllers
from dispatch.testing.k8s.resources import TRAINING_OPERATOR_RESOURCES
from dispatch.testing.k8s.runtimes import torch_distributed
from dispatch.testing.k8s.scenario import ClusterEvent, PodBehaviour, PodRule, Scenario
from tests.emulator.scenario_helpers import delete_now, trainjob, wait_for
from tests.kubeflow.e2e.harness import diagnose_config, indexed_job

TIMEOUT = 60.0


@contextmanager
def emulator(
    scenario: Scenario, kueue: KueueConfig | None = None, time_scale: float = 100, **config: Any
) -> Iterator[Emulator]:
    cfg = ClusterConfig(
        time_scale=time_scale,
        nodes=("node-1", "node-2"),
        controllers=standard_controllers(scenario, kueue),
        compaction_window=1e9,
        **config,
    )
    with Emulator(cfg) as emu:
        emu.create(torch_distributed())
        yield emu
        assert emu.cluster.controller_errors == []


def config_for(emu: Emulator, tmp_path: Path) -> Path:
    return diagnose_config(emu.kubeconfig, tmp_path / "dispatch.yaml")


def diagnose(config: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["--config", str(config), "diagnose", *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def follow_until(
    emu: Emulator, following: Following, done: Callable[[Diagnosis], bool]
) -> Diagnosis:
    """Read the workload every 0.1 s (real) until ``done`` holds for the judgement."""

    async def run() -> Diagnosis:
        connection = Connection(emu.kubeconfig, None)
        try:
            async with connection.session() as session:
                deadline = time.monotonic() + TIMEOUT
                while True:
                    diagnosis = await diagnose_live(
                        session, following, patience=600.0, clock=emu.cluster.clock.now
                    )
                    if done(diagnosis) or time.monotonic() > deadline:
                        return diagnosis
                    await asyncio.sleep(0.1)
        finally:
            await connection.aclose()

    return asyncio.run(run())


def pods_of(emu: Emulator, prefix: str) -> list[dict[str, Any]]:
    rtype = emu.cluster.rtype("v1", "Pod")
    return emu.call(
        lambda: [
            p
            for p in emu.cluster.store.list(rtype, "default").items
            if p["metadata"]["name"].startswith(prefix)
        ]
    )


def test_an_init_container_backing_off_is_a_start_failure_of_its_rank(tmp_path: Path) -> None:
    """kubeflow/training-operator#2034: an init container keeps failing (BackOff on
    spec.initContainers{...}); the training container never ran."""
    behaviour = PodBehaviour(init_exit_code=1)
    scenario = Scenario(pods=(PodRule(behaviour, index=1),), default=PodBehaviour(run_for=None))
    with emulator(scenario) as emu:
        init = [{"name": "fetch-data", "image": "busybox"}]
        emu.create(indexed_job("init-job", restart="OnFailure", backoff=6, initContainers=init))
        rtype = emu.cluster.rtype("v1", "Event")
        wait_for(
            "a BackOff event about the init container",
            lambda: emu.call(
                lambda: [
                    e
                    for e in emu.cluster.store.list(rtype, "default").items
                    if e["reason"] == "BackOff"
                    and e["involvedObject"].get("fieldPath") == "spec.initContainers{fetch-data}"
                ]
            ),
        )
        data = diagnose(config_for(emu, tmp_path), "job/init-job", "--cluster", "kf")
    assert (data["state"], data["cause"]) == ("failed", "start_failure"), data["summary"]
    assert (data["firstFailure"]["rank"], data["firstFailure"]["exitCode"]) == (1, 1)
    assert "init container fetch-data" in data["summary"]


def test_a_rank_evicted_and_replaced_by_its_job_is_running(tmp_path: Path) -> None:
    """kubeflow/training-operator#301: a rank's pod is evicted while a replacement of that
    rank runs: the workload is running, the eviction is evidence, not a cause."""
    # slow time: the evicted pod is Terminating for 1 emulated second, which the reads
    # (every 0.1 s real) must see, as a watch would
    evict = ClusterEvent(
        at=6,
        action="evictPod",
        pod_selector={"job-name": "evict-job", "batch.kubernetes.io/job-completion-index": "1"},
    )
    scenario = Scenario(default=PodBehaviour(run_for=None), events=(evict,))
    with emulator(scenario, time_scale=2) as emu:
        emu.create(indexed_job("evict-job", backoff=2))
        following = Following("Job", "evict-job", "default")

        def replaced(diagnosis: Diagnosis) -> bool:
            """The last read saw rank 1 running again, after a read saw its eviction."""
            seen = following.present.items()
            running = [
                ref
                for ref, obj in seen
                if ref.kind == "Pod"
                and ref.name.startswith("evict-job-1-")
                and (obj.get("status") or {}).get("phase") == "Running"
                and not (obj.get("metadata") or {}).get("deletionTimestamp")
            ]
            keys = [e.key for e in diagnosis.outcome.evidence]
            return bool(running) and any("DisruptionTarget" in k for k in keys)

        diagnosis = follow_until(emu, following, replaced)
    outcome = diagnosis.outcome
    assert (outcome.state, outcome.cause) == (State.RUNNING, None), outcome.summary
    assert "Eviction API" in outcome.summary
    assert "spec.backoffLimit 2 of Job evict-job" in outcome.summary


def test_pods_deleted_after_the_job_failed(tmp_path: Path) -> None:
    """Pods gone are not pods never created: what was followed keeps the exit code; a first
    read after the deletion still knows, from the Job's counts, that pods ran."""
    scenario = Scenario(
        pods=(PodRule(PodBehaviour(run_for=2, exit_code=2), index=1),),
        default=PodBehaviour(run_for=None),
    )
    with emulator(scenario) as emu:
        emu.create(indexed_job("gone-job"))
        following = Following("Job", "gone-job", "default")
        ended = follow_until(emu, following, lambda d: d.outcome.is_terminal)
        assert ended.outcome.cause is not None and ended.outcome.cause.value == "app_error"
        rtype = emu.cluster.rtype("v1", "Pod")
        for pod in pods_of(emu, "gone-job-"):
            delete_now(emu, rtype, "default", pod["metadata"]["name"])
        wait_for("pods deleted", lambda: not pods_of(emu, "gone-job-"))
        again = follow_until(emu, following, lambda d: True)
        late = diagnose(config_for(emu, tmp_path), "job/gone-job", "--cluster", "kf")
    assert (again.outcome.state, again.outcome.cause.value if again.outcome.cause else None) == (
        State.FAILED,
        "app_error",
    )
    assert late["state"] == "failed"
    assert "never" not in late["summary"], late["summary"]


def test_a_trainjob_that_can_never_fit_its_quota_is_queued_with_no_capacity(
    tmp_path: Path,
) -> None:
    """kubernetes-sigs/kueue#2096: the Workload's QuotaReserved says the request is over the
    maximum capacity; nothing failed yet."""
    kueue = KueueConfig(cluster_queues=(ClusterQueue("cq", {"cpu": "4"}, local_queues=("q",)),))
    with emulator(Scenario(default=PodBehaviour(run_for=None)), kueue) as emu:
        cpu = {"requests": {"cpu": "2"}}
        labels = {"kueue.x-k8s.io/queue-name": "q"}
        emu.create(
            trainjob("huge", trainer={"numNodes": 3, "resourcesPerNode": cpu}, labels=labels)
        )
        rtype = emu.cluster.rtype("kueue.x-k8s.io/v1beta2", "Workload")
        wait_for(
            "over the maximum capacity",
            lambda: emu.call(
                lambda: [
                    c
                    for w in emu.cluster.store.list(rtype, "default").items
                    for c in (w.get("status") or {}).get("conditions") or []
                    if "> maximum capacity" in c.get("message", "")
                ]
            ),
        )
        data = diagnose(config_for(emu, tmp_path), "trainjob/huge", "--cluster", "kf")
    assert (data["state"], data["cause"]) == ("queued", "no_capacity"), data["summary"]
    assert "can never fit" in data["summary"]


def pytorchjob_pod(job: dict[str, Any], replica: str, scenario: str) -> dict[str, Any]:
    name = job["metadata"]["name"]
    owner = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": name,
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    labels = {
        "training.kubeflow.org/job-name": name,
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": replica,
        "training.kubeflow.org/replica-index": "0",
    }
    env = [{"name": "EMULATOR_SCENARIO", "value": scenario}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{replica}-0",
            "namespace": "default",
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "pytorch", "image": "pytorch/pytorch", "env": env}],
        },
    }


def test_a_pytorchjob_read_live(tmp_path: Path) -> None:
    """The emulator stores PyTorchJobs without an operator: the test creates the pods and
    writes the Failed condition as the operator would; diagnose reads them live."""
    with emulator(Scenario(), extra_resources=TRAINING_OPERATOR_RESOURCES) as emu:
        replica = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {}}}
        job = emu.create(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": "bert", "namespace": "default"},
                "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}},
            }
        )
        emu.create(pytorchjob_pod(job, "master", '{"default": {"runFor": null}}'))
        emu.create(pytorchjob_pod(job, "worker", '{"default": {"runFor": 2, "exitCode": 1}}'))
        wait_for(
            "the worker failed",
            lambda: any(p["status"].get("phase") == "Failed" for p in pods_of(emu, "bert-worker")),
        )
        rtype = emu.cluster.rtype("kubeflow.org/v1", "PyTorchJob")
        failed = {
            "type": "Failed",
            "status": "True",
            "reason": "PyTorchJobFailed",
            "message": "PyTorchJob bert is failed because 1 Worker replica(s) failed.",
            "lastTransitionTime": time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(emu.cluster.clock.now())
            ),
        }

        def write() -> None:
            current = emu.cluster.store.get(rtype, "default", "bert")
            current["status"] = {
                "conditions": [failed],
                "replicaStatuses": {"Worker": {"failed": 1}},
            }
            emu.cluster.store.update(rtype, "default", "bert", current, subresource="status")

        emu.call(write)
        data = diagnose(
            config_for(emu, tmp_path),
            "pytorchjob/bert",
            "--cluster",
            "kf",
            "--follow",
            "--interval",
            "1s",
        )
    assert data["workload"] == {"kind": "PyTorchJob", "namespace": "default", "name": "bert"}
    assert (data["state"], data["cause"]) == ("failed", "app_error"), data["summary"]
    # the worker comes after the master: rank 1
    assert (data["firstFailure"]["rank"], data["firstFailure"]["exitCode"]) == (1, 1)


def test_a_rank_evicted_by_the_kubelet_for_memory_pressure_and_replaced_is_running(
    tmp_path: Path,
) -> None:
    """kubeflow/training-operator#301: the kubelet evicts a running pod ("The node was low on
    resource: memory."); its Job replaces it. While the replacement runs, the Job is running
    and the eviction is evidence; one read after the replacement started says so, since the
    evicted pod stays (Failed) for its Job to count."""
    evict = ClusterEvent(
        at=300,
        action="pressureEvictPod",
        pod_selector={"job-name": "pressure-job", "batch.kubernetes.io/job-completion-index": "1"},
    )
    scenario = Scenario(default=PodBehaviour(run_for=None), events=(evict,))
    with emulator(scenario) as emu:
        emu.create(indexed_job("pressure-job", backoff=2))
        wait_for(
            "the replacement of rank 1 running",
            lambda: (
                len(
                    [
                        p
                        for p in pods_of(emu, "pressure-job-1-")
                        if p["status"].get("phase") == "Running"
                    ]
                )
                == 1
                and len(pods_of(emu, "pressure-job-1-")) == 2
            ),
        )
        data = diagnose(config_for(emu, tmp_path), "job/pressure-job", "--cluster", "kf")
    assert (data["state"], data["cause"]) == ("running", None), data["summary"]
    assert "low on resource: memory" in data["summary"]
    assert any("DisruptionTarget" in e["key"] for e in data["evidence"]), data["evidence"]


def test_a_kueue_recovery_timeout_after_pods_were_ready_is_not_an_unplanned_recovery(
    tmp_path: Path,
) -> None:
    """kubernetes-sigs/kueue#14811: all pods were ready, one failed and was not ready again
    within waitForPodsReady's recovery timeout: Kueue evicted the workload (PodsReadyTimeout,
    underlyingCause WaitForRecovery) and requeued it. The cause is that eviction (no capacity
    to recover in time), not the re-runs that Kueue's requeue brings."""
    kueue = KueueConfig(
        cluster_queues=(ClusterQueue("cq", {"cpu": "4"}, local_queues=("q",)),),
        recovery_timeout=5.0,
    )
    scenario = Scenario(
        pods=(PodRule(PodBehaviour(run_for=20, exit_code=1), index=1, attempt=1),),
        default=PodBehaviour(run_for=None),
    )
    with emulator(scenario, kueue) as emu:
        cpu = {"requests": {"cpu": "1"}}
        labels = {"kueue.x-k8s.io/queue-name": "q"}
        emu.create(
            trainjob("recover", trainer={"numNodes": 2, "resourcesPerNode": cpu}, labels=labels)
        )
        rtype = emu.cluster.rtype("kueue.x-k8s.io/v1beta2", "Workload")
        stats = wait_for(
            "the eviction counted",
            lambda: emu.call(
                lambda: [
                    e
                    for w in emu.cluster.store.list(rtype, "default").items
                    for e in ((w.get("status") or {}).get("schedulingStats") or {}).get("evictions")
                    or []
                ]
            ),
        )
        data = diagnose(config_for(emu, tmp_path), "trainjob/recover", "--cluster", "kf")

        def readmitted() -> bool:
            workloads = emu.call(lambda: emu.cluster.store.list(rtype, "default").items)
            return any(
                c["type"] == "Evicted" and c["status"] == "False"
                for w in workloads
                for c in (w.get("status") or {}).get("conditions") or []
            ) and any(p["status"].get("phase") == "Running" for p in pods_of(emu, "recover-"))

        wait_for("readmitted and running again", readmitted)
        later = diagnose(config_for(emu, tmp_path), "trainjob/recover", "--cluster", "kf")
    assert stats == [
        {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForRecovery", "count": 1}
    ]
    for seen in (data, later):  # read while evicted, and after Kueue readmitted it
        assert (seen["state"], seen["cause"]) == ("failed", "no_capacity"), seen["summary"]
        assert "PodsReady timeout" in seen["summary"]

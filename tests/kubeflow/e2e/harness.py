"""An emulated Kubeflow cluster with every controller, a records store, and supervisors.

``World`` starts the emulator (Trainer, JobSet, Job, scheduler, kubelets, node lifecycle and
Kueue with one ClusterQueue), makes Kubeflow adapters bound to it whose clock is the
cluster's (so patience and evidence times agree with the objects' timestamps), and runs the
real ``Supervisor`` over a SQLite records store until every job has ended.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from dispatch.adapters.base import Adapter, AdapterContext
from dispatch.adapters.kubeflow import KubeflowAdapter
from dispatch.adapters.kubeflow.api.permissions import rbac_objects
from dispatch.clock import CountingIds
from dispatch.config import ClusterConfig as DispatchCluster
from dispatch.model import Cause, State, parse_spec
from dispatch.records import SqliteRecords, database_path
from dispatch.supervise import Supervisor
from dispatch.testing.k8s import ClusterConfig, Emulator
from dispatch.testing.k8s.controllers import (
    ClusterQueue,
    KueueConfig,
    NodeLifecycle,
    standard_controllers,
)
from dispatch.testing.k8s.scenario import ClusterEvent, Scenario
from tests.conftest import EXAMPLES

NAMESPACE = "ml-team"
#: the settling fallback in emulated seconds: emulated time runs ~100x faster than the
#: streams can catch up on a loaded machine, so it is scaled up accordingly
SETTLE = 1200.0
QUEUE = "team-a"
TRAINER = "trainer.kubeflow.org/v1alpha1"
RUNTIME = EXAMPLES / "kubeflow" / "runtimes" / "torch.yaml"
RETRY_PREEMPTED = {
    "rules": [
        {"on": ["preempted", "node_lost"], "action": "retry", "limit": 2,
         "backoff": {"initial": "1s"}},
    ],
    "unmatched": "fail",
}  # fmt: skip


def kueue(cpu: str = "4") -> KueueConfig:
    return KueueConfig(
        # a higher priority preempts only where the ClusterQueue says so (Kueue's default: Never)
        cluster_queues=(
            ClusterQueue(
                "cq", {"cpu": cpu}, local_queues=(QUEUE,), within_cluster_queue="LowerPriority"
            ),
        ),
        priority_classes={"high": 1000},
    )


def high_priority(name: str, run_for: float = 20) -> dict[str, Any]:
    """A TrainJob in ``QUEUE`` at Kueue priority ``high`` needing the whole ClusterQueue (2
    nodes of 2 CPU): created, it preempts whatever runs there; its pods run ``run_for``
    emulated seconds."""
    scenario = json.dumps({"default": {"runFor": run_for}})
    return {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": QUEUE, "kueue.x-k8s.io/priority-class": "high"},
        },
        "spec": {
            "runtimeRef": {"name": "torch-dispatch", "kind": "ClusterTrainingRuntime"},
            "trainer": {
                "numNodes": 2,
                "resourcesPerNode": {"requests": {"cpu": "2"}},
                "env": [{"name": "EMULATOR_SCENARIO", "value": scenario}],
            },
        },
    }


#: set (to anything) to run every e2e test as deploy/'s supervisor: dispatch's clients use a
#: ServiceAccount token that the emulator's RBAC limits to the Role and ClusterRole generated
#: from the probe's permission list (as ``deploy/`` installs them)
AS_SERVICE_ACCOUNT = "DISPATCH_E2E_SERVICE_ACCOUNT"
SUPERVISOR = "dispatch-supervisor"


def as_supervisor_account(emulator: Emulator, path: Path) -> Path:
    """Install deploy/'s ServiceAccount, Role, ClusterRole and bindings in the test namespace;
    a kubeconfig authenticating with the ServiceAccount's token, written at ``path``."""
    emulator.create(
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": SUPERVISOR, "namespace": NAMESPACE}}
    )  # fmt: skip
    subject = {"kind": "ServiceAccount", "name": SUPERVISOR, "namespace": NAMESPACE}
    for role in rbac_objects(SUPERVISOR):
        if role["kind"] == "Role":
            role["metadata"]["namespace"] = NAMESPACE
        emulator.create(role)
        binding_kind = "RoleBinding" if role["kind"] == "Role" else "ClusterRoleBinding"
        binding: dict[str, Any] = {
            "apiVersion": role["apiVersion"],
            "kind": binding_kind,
            "metadata": {**role["metadata"]},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"],
                        "name": SUPERVISOR},
            "subjects": [subject],
        }  # fmt: skip
        emulator.create(binding)
    return emulator.service_account_kubeconfig(path, NAMESPACE, SUPERVISOR)


class World:
    """The emulator, the store and adapter settings; ``close()`` stops the emulator."""

    def __init__(
        self,
        tmp: Path,
        *,
        scenario: Scenario | None = None,
        kueue_config: KueueConfig | None = None,
        time_scale: float = 100.0,
        nodes: tuple[str, ...] = ("node-1", "node-2", "node-3", "node-4"),
        **settings: Any,
    ) -> None:
        self.controllers = standard_controllers(scenario, kueue_config)
        config = ClusterConfig(
            namespaces=("default", NAMESPACE, "kubeflow-system"),
            nodes=nodes,
            time_scale=time_scale,
            controllers=self.controllers,
            compaction_window=1e9,
            bookmark_interval=5.0,
        )
        self.tmp = tmp
        self.emulator = Emulator(config, kubeconfig=tmp / "kubeconfig").start()
        self.emulator.create(yaml.safe_load(RUNTIME.read_text()))
        self.emulator.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kubeflow-trainer-public", "namespace": "kubeflow-system"},
                "data": {"kubeflow_trainer_version": "v2.3.0"},
            }
        )
        self.clock = self.emulator.cluster.clock
        #: the state folder, as DISPATCH_STATE_DIR names it to the command line
        self.records_dir = tmp / "state"
        self.records_dir.mkdir(parents=True, exist_ok=True)
        self.records = SqliteRecords(
            database_path(self.records_dir), clock=self.clock, ids=CountingIds()
        )
        kubeconfig = self.emulator.kubeconfig
        if os.environ.get(AS_SERVICE_ACCOUNT):
            kubeconfig = as_supervisor_account(self.emulator, tmp / "supervisor-kubeconfig")
        self.settings = {
            "kubeconfig": str(kubeconfig),
            "namespace": NAMESPACE,
            **settings,
        }
        self.adapters_made: list[KubeflowAdapter] = []

    def adapter(self, cluster: str = "kf") -> Adapter:
        made = KubeflowAdapter(
            DispatchCluster(name=cluster, adapter="kubeflow", settings=self.settings),
            AdapterContext(state_dir=self.tmp / "state", clock=self.clock),
            settle=SETTLE,
        )
        self.adapters_made.append(made)
        return made

    def other_records(self) -> SqliteRecords:
        """The same records through a connection of their own, as another process (``dispatch
        cancel``) reaches them: for a helper thread, which must not share the supervisor's
        connection (one sqlite3 connection serves one statement at a time)."""
        return SqliteRecords(database_path(self.records_dir), clock=self.clock, ids=CountingIds())

    def supervisor(self, owner: str = "s1") -> Supervisor:
        cache: dict[str, Adapter] = {}

        def adapters(cluster: str) -> Adapter:
            if cluster not in cache:
                cache[cluster] = self.adapter(cluster)
            return cache[cluster]

        return Supervisor(
            self.records, adapters, self.clock, owner, lease_ttl=600.0, poll_interval=10.0
        )

    def submit(
        self,
        name: str,
        pods: Mapping[str, Any] | None = None,
        *,
        recovery: Mapping[str, Any] | None = None,
        **spec: Any,
    ) -> str:
        fields: dict[str, Any] = {
            "name": name,
            "cluster": "kf",
            "runtime": {"kind": "ClusterTrainingRuntime", "name": "torch-dispatch"},
            "nodes": 2,
            "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
            "command": ["torchrun", "train.py"],
            "resources": {"cpu": "1"},
            "env": {"EMULATOR_SCENARIO": json.dumps(pods or {})},
            "recovery": recovery or RETRY_PREEMPTED,
        }
        fields.update(spec)
        return self.records.create_job(parse_spec(fields)).id

    async def supervise(self, owner: str = "s1", timeout: float = 90.0) -> None:
        """Run a supervisor until no job is open (real-seconds ``timeout``)."""
        supervisor = self.supervisor(owner)
        await asyncio.wait_for(supervisor.run(asyncio.Event(), until_idle=True), timeout)

    def objects(self, kind: str, api_version: str = TRAINER) -> list[dict[str, Any]]:
        cluster = self.emulator.cluster
        rtype = cluster.rtype(api_version, kind)
        return self.emulator.call(lambda: [dict(o) for o in cluster.store.objects(rtype)])

    def pods(self, job: str) -> list[dict[str, Any]]:
        """The live pods of ``job`` (any attempt), by the label dispatch puts on them."""
        return [
            p
            for p in self.objects("Pod", "v1")
            if (p["metadata"].get("labels") or {}).get("dispatch.dev/job") == job
        ]

    def running(self, job: str, count: int = 2) -> list[dict[str, Any]] | None:
        """``job``'s pods when ``count`` of them are Running, else None."""
        pods = self.pods(job)
        up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return up if len(up) >= count else None

    def disrupt(self, action: str, **fields: Any) -> None:
        """Carry out a scenario cluster event now (``nodeNotReady``, ``drainNode``, ...)."""
        lifecycle = next(c for c in self.controllers if isinstance(c, NodeLifecycle))
        event = ClusterEvent(at=0.0, action=action, namespace=NAMESPACE, **fields)
        self.emulator.call(lambda: lifecycle.apply(event))

    def when(
        self, ready: Callable[[], Any], then: Callable[[Any], None], timeout: float = 60.0
    ) -> threading.Thread:
        """Call ``then(value)`` on a thread as soon as ``ready()`` returns a truthy value."""

        def wait() -> None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                value = ready()
                if value:
                    then(value)
                    return
                time.sleep(0.02)

        thread = threading.Thread(target=wait, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self.records.close()
        self.emulator.stop()


def attempt_outcome(world: World, job: str) -> tuple[State, Cause | None, int | None, int | None]:
    """The single attempt's state, cause, first failing rank and its exit code."""
    [attempt] = world.records.attempts(job)
    assert attempt.outcome is not None
    first = attempt.outcome.first_failure
    return (
        attempt.outcome.state,
        attempt.outcome.cause,
        first.rank if first else None,
        first.exit_code if first else None,
    )


def proof_keys(world: World, job: str) -> set[str]:
    """Keys of the proof excerpts recorded with the outcome (``Kind/name#field``)."""
    return {e.key for e in world.records.evidence(job, 1) if "#" in e.key and "@" not in e.key}


def indexed_job(
    name: str, *, restart: str = "Never", backoff: int = 0, **pod: Any
) -> dict[str, Any]:
    """A bare Indexed batch Job of two pods (as a team runs without Trainer or JobSet)."""
    spec = {"restartPolicy": restart, "containers": [{"name": "train", "image": "busybox"}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 2,
            "parallelism": 2,
            "backoffLimit": backoff,
            "template": {"spec": {**spec, **pod}},
        },
    }


def diagnose_config(kubeconfig: Path, path: Path) -> Path:
    """A dispatch configuration naming the emulator as Kubeflow cluster ``kf``."""
    entry = {"name": "kf", "adapter": "kubeflow", "kubeconfig": str(kubeconfig)}
    path.write_text(yaml.safe_dump({"clusters": [{**entry, "namespace": "default"}]}))
    return path

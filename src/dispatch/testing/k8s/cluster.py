"""A running emulated cluster on the current event loop: store, API server, controllers.

``Cluster`` assembles the pieces and is the extension point for controllers::

    async with Cluster(ClusterConfig(time_scale=60)) as cluster:
        cluster.url            # http://127.0.0.1:<port>
        cluster.store          # the object store (use on this loop only)

A controller is any object with ``name`` and ``async run(cluster)``; it is started as a task
after the server is up and cancelled on stop. It reacts to changes with
``cluster.store.subscribe(...)`` (an async stream of watch events that starts with the
current objects), acts with the store's ordinary operations (``create``, ``update``,
``patch``, ``delete`` — so its writes get resourceVersions and watch events like any
client's), and waits with ``cluster.clock.sleep`` (emulated, scalable time). A controller that
raises is recorded in ``cluster.controller_errors``; it does not stop the cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dispatch import aio
from dispatch.clock import Clock
from dispatch.testing.k8s.accounting import RequestAccounting
from dispatch.testing.k8s.authz import Authorizer
from dispatch.testing.k8s.clock import ScaledClock
from dispatch.testing.k8s.controllers.budgets import DisruptionController
from dispatch.testing.k8s.faults import FaultInjector
from dispatch.testing.k8s.flowcontrol import FlowControl
from dispatch.testing.k8s.logs import PodLogs
from dispatch.testing.k8s.meta import Identity, rfc3339
from dispatch.testing.k8s.rbac import RbacStrategy
from dispatch.testing.k8s.resources import DEFAULT_RESOURCES, ResourceCatalog, ResourceType
from dispatch.testing.k8s.server import ApiServer
from dispatch.testing.k8s.services import ServiceStrategy
from dispatch.testing.k8s.store import Store
from dispatch.testing.k8s.trainer_validation import TrainerValidation
from dispatch.testing.k8s.webhook_config import AdmissionRegistration, validating_policies
from dispatch.testing.k8s.webhooks import ValidatingWebhooks

JsonObj = dict[str, Any]
log = logging.getLogger(__name__)


class Controller(Protocol):
    name: str

    async def run(self, cluster: Cluster) -> None: ...


@dataclass
class ClusterConfig:
    namespaces: Sequence[str] = ("default",)
    nodes: Sequence[str] = ("node-1", "node-2")
    node_capacity: dict[str, str] = field(
        default_factory=lambda: {"cpu": "8", "memory": "32Gi", "pods": "110"}
    )
    time_scale: float = 1.0  # emulated seconds per real second
    base_clock: Clock | None = None  # real time by default
    seed: int | None = 0  # uids, generated names, fault probabilities
    compaction_window: float = 300.0  # emulated seconds of watch history kept
    history_limit: int = 200_000  # changes of watch history kept at most
    bookmark_interval: float = 60.0  # emulated seconds between watch bookmarks
    enforce_authz: bool = True  # deny rules also reject requests (403), not only reviews
    validate_trainer: bool = True  # TrainJob / runtime / JobSet schema and CEL rules
    controllers: Sequence[Controller] = ()
    git_version: str = "v1.33.0"
    #: resources served besides the default ones (e.g. ``TRAINING_OPERATOR_RESOURCES``)
    extra_resources: Sequence[ResourceType] = ()
    port: int = 0  # the API server's loopback port; 0: a free one the kernel picks
    #: API groups this cluster lacks (Kueue's where no Kueue runs): 404, as without their CRDs
    without_groups: Sequence[str] = ()
    #: API Priority and Fairness on HTTP requests: seats, queue, exempt users (None: no limit;
    #: the cluster's own controllers act on the store and are never limited)
    flow_control: FlowControl | None = None


class Cluster:
    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.config = config or ClusterConfig()
        cfg = self.config
        self.clock = ScaledClock(cfg.time_scale, cfg.base_clock)
        self.catalog = ResourceCatalog(
            [t for t in DEFAULT_RESOURCES if t.group not in cfg.without_groups]
        )
        for rtype in cfg.extra_resources:
            self.catalog.add(rtype)
        self.store = Store(
            self.catalog,
            self.clock,
            Identity(cfg.seed),
            history_window=cfg.compaction_window,
            history_limit=cfg.history_limit,
        )
        self.store.admission.add(ServiceStrategy())
        self.store.admission.add(RbacStrategy())
        if cfg.validate_trainer:
            self.store.admission.add(TrainerValidation())
        # validating admission as kube-apiserver runs it after everything else accepted:
        # ValidatingAdmissionPolicies, then validating webhooks (nothing stored: no cost)
        self.store.admission.add(AdmissionRegistration())
        self.store.validating.add(validating_policies(self.store))
        review_ids = Identity(None if cfg.seed is None else cfg.seed + 1)
        self.webhooks = ValidatingWebhooks(review_ids.uid)
        self.store.validating.add(self.webhooks)
        self.logs = PodLogs()
        self.store.on_change(self.logs.on_change)
        self.faults = FaultInjector(cfg.seed)
        self.accounting = RequestAccounting()
        self.authorizer = Authorizer(enforce=cfg.enforce_authz)
        self.server = ApiServer(
            self.store,
            self.logs,
            clock=self.clock,
            faults=self.faults,
            accounting=self.accounting,
            authorizer=self.authorizer,
            bookmark_interval=cfg.bookmark_interval,
            git_version=cfg.git_version,
            flow_control=cfg.flow_control,
        )
        self.controller_errors: list[tuple[str, BaseException]] = []
        #: kube-controller-manager's part every cluster has, whatever ``controllers`` holds
        self.builtin_controllers: list[Controller] = [DisruptionController()]
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def url(self) -> str:
        return self.server.url

    def rtype(self, api_version: str, kind: str) -> ResourceType:
        found = self.catalog.by_kind(api_version, kind)
        if found is None:
            raise KeyError(f"{api_version} {kind} is not served")
        return found

    async def start(self) -> Cluster:
        self._seed()
        for controller in self.config.controllers:
            install = getattr(controller, "install", None)
            if install is not None:  # webhooks and hooks are in place before any request
                install(self)
        await self.server.start(port=self.config.port)
        for controller in [*self.builtin_controllers, *self.config.controllers]:
            self._tasks.append(asyncio.create_task(self._run(controller), name=controller.name))
        return self

    async def stop(self) -> None:
        await aio.stop(*self._tasks)  # a controller's failure is already in controller_errors
        self._tasks.clear()
        await self.server.stop()

    async def __aenter__(self) -> Cluster:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _run(self, controller: Controller) -> None:
        try:
            await controller.run(self)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken controller is reported, the cluster stays up
            log.exception("controller %s failed", controller.name)
            self.controller_errors.append((controller.name, exc))

    def service_account_token(self, namespace: str, name: str) -> str:
        """A bearer token for an existing ServiceAccount (404 ApiError if there is none):
        requests made with it are authorized by RBAC. On the cluster's loop only."""
        sa = self.store.get(self.rtype("v1", "ServiceAccount"), namespace, name)
        return self.authorizer.mint(namespace, name, sa["metadata"]["uid"])

    def _seed(self) -> None:
        ns_type = self.rtype("v1", "Namespace")
        for name in self.config.namespaces:
            self.store.create(ns_type, None, {"metadata": {"name": name}})
        for name in self.config.nodes:
            self.add_node(name)

    def add_node(
        self,
        name: str,
        capacity: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
    ) -> JsonObj:
        """Create a Ready node with the given capacity (allocatable = capacity)."""
        node_type = self.rtype("v1", "Node")
        all_labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **(labels or {}),
        }
        self.store.create(
            node_type, None, {"metadata": {"name": name, "labels": all_labels}, "spec": {}}
        )
        now = rfc3339(self.clock.now())
        cap = dict(capacity or self.config.node_capacity)
        status = {
            "capacity": cap,
            "allocatable": dict(cap),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
            "addresses": [{"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"boot-{name}",
                "containerRuntimeVersion": "emulated://1.0",
                "kernelVersion": "6.1.0-emulated",
                "kubeProxyVersion": "",
                "kubeletVersion": self.config.git_version,
                "machineID": f"machine-{name}",
                "operatingSystem": "linux",
                "osImage": "Emulated Linux",
                "systemUUID": f"uuid-{name}",
            },
        }
        return self.store.patch(
            node_type,
            None,
            name,
            "application/merge-patch+json",
            {"status": status},
            subresource="status",
        )

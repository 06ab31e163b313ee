"""The emulator for synchronous code: a :class:`Cluster` on its own thread and event loop.

::

    with Emulator(ClusterConfig(time_scale=10)) as emu:
        kubernetes.config.load_kube_config(str(emu.kubeconfig))
        ...
        emu.append_log("default", "my-pod", "node", "hello")
        emu.faults.add(FaultRule(verb="list", resource="pods", status=500, times=1))
        emu.requests().count("watch")
        emu.route_service("webhooks", "guard", 443, ("127.0.0.1", 8443))  # a webhook's Service

Guarantees: ``start`` returns once the server accepts connections and ``kubeconfig`` is
written; ``stop`` closes every watch stream, stops the controllers and the server and joins the
thread. ``call``/``run`` execute code on the cluster's loop (the only place the store may be
touched) and return its result or raise its exception.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import tempfile
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from dispatch.testing.k8s.accounting import RequestCounts
from dispatch.testing.k8s.cluster import Cluster, ClusterConfig
from dispatch.testing.k8s.kubeconfig import write_kubeconfig
from dispatch.testing.k8s.server import ADMIN_USER

T = TypeVar("T")
JsonObj = dict[str, Any]


class Emulator:
    def __init__(
        self, config: ClusterConfig | None = None, *, kubeconfig: Path | None = None
    ) -> None:
        self.config = config or ClusterConfig()
        self._kubeconfig_path = kubeconfig
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._cluster: Cluster | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._stopping: asyncio.Event | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Emulator:
        self._thread = threading.Thread(target=self._main, name="k8s-emulator", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure
        if self._kubeconfig_path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="k8s-emulator-")
            self._kubeconfig_path = Path(self._tmp.name) / "kubeconfig"
        write_kubeconfig(self._kubeconfig_path, self.url)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        try:
            self._cluster = await Cluster(self.config).start()
        except BaseException as exc:
            self._failure = exc
            self._ready.set()
            return
        self._ready.set()
        await self._stopping.wait()
        await self._cluster.stop()

    # ------------------------------------------------------------------ access

    @property
    def cluster(self) -> Cluster:
        """The running cluster: touch its store only through :meth:`call` / :meth:`run`."""
        if self._cluster is None:
            raise RuntimeError("the emulator is not running")
        return self._cluster

    @property
    def url(self) -> str:
        return self.cluster.url

    @property
    def kubeconfig(self) -> Path:
        if self._kubeconfig_path is None:
            raise RuntimeError("the emulator is not running")
        return self._kubeconfig_path

    @property
    def faults(self) -> Any:
        return self.cluster.faults

    @property
    def authorizer(self) -> Any:
        return self.cluster.authorizer

    def requests(self) -> RequestCounts:
        return self.cluster.accounting.snapshot()

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn()`` on the cluster's loop and return its result."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def invoke() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

        if self._loop is None:
            raise RuntimeError("the emulator is not running")
        self._loop.call_soon_threadsafe(invoke)
        return future.result(timeout=60)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the cluster's loop and return its result."""
        if self._loop is None:
            raise RuntimeError("the emulator is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=60)

    # ------------------------------------------------------------------ conveniences

    def create(self, obj: JsonObj, namespace: str | None = None) -> JsonObj:
        cluster = self.cluster
        rtype = cluster.rtype(obj["apiVersion"], obj["kind"])
        ns = namespace or obj.get("metadata", {}).get("namespace") or "default"
        return self.call(lambda: cluster.store.create(rtype, ns, obj, user=ADMIN_USER))

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> JsonObj:
        cluster = self.cluster
        rtype = cluster.rtype(api_version, kind)
        return self.call(lambda: cluster.store.get(rtype, namespace, name))

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        cluster = self.cluster
        self.call(lambda: cluster.logs.append(namespace, pod, container, text, cluster.clock.now()))

    def finish_log(self, namespace: str, pod: str, container: str) -> None:
        cluster = self.cluster
        self.call(lambda: cluster.logs.finish(namespace, pod, container))

    def service_account_token(self, namespace: str, name: str) -> str:
        """A bearer token of ServiceAccount ``namespace/name`` (which must exist): a client
        using it is authorized by the RBAC objects, as on a cluster."""
        cluster = self.cluster
        return self.call(lambda: cluster.service_account_token(namespace, name))

    def service_account_kubeconfig(self, path: Path, namespace: str, name: str) -> Path:
        """A kubeconfig at ``path`` that authenticates as ServiceAccount ``namespace/name``
        (a new token), with ``namespace`` as its default namespace."""
        token = self.service_account_token(namespace, name)
        return write_kubeconfig(path, self.url, namespace, token)

    def route_service(self, namespace: str, name: str, port: int, address: tuple[str, int]) -> None:
        """Make Service ``namespace/name`` at ``port`` reach ``address`` (host, port): the
        emulator resolves no Service, and a webhook's ``clientConfig.service`` is called there
        (its certificate still verified for ``<name>.<namespace>.svc``). The webhook server must
        not run on the emulator's event loop (the emulator waits for it synchronously)."""
        routes = self.cluster.webhooks.routes
        self.call(lambda: routes.add(namespace, name, port, address))

    def compact(self) -> None:
        """Forget watch history: watches from older resourceVersions get 410 Gone."""
        cluster = self.cluster
        self.call(cluster.store.compact)

    def open_watches(self) -> int:
        return self.requests().open_watch_total

"""The adapter's only door to the Kubernetes API: raw JSON objects over ``kubernetes_asyncio``.

``Connection`` loads a cluster's credentials once (a kubeconfig and context, or a pod's service
account: ``api/credentials.py`` says which); ``session()``
gives the one ``ApiClient`` of the running event loop (made on first use, then reused: its
SSL context and pooled connections are built once, not per call; a client is never shared
across loops). That client is closed by ``Connection.aclose`` or, at the latest, when its loop
ends (``asyncio.run`` and ``asyncio.Runner`` cancel what is left on the loop). ``Session``
offers the few operations the adapter needs, on plain dicts (the runtime copy must stay
lossless, so typed models are not used for Trainer objects). Every failure leaves as a
``DispatchError`` (``errors.translate``); a 404 on a read is ``None``, not an error.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.config_exception import ConfigException

from dispatch.adapters.kubeflow.api.credentials import InCluster
from dispatch.adapters.kubeflow.api.credentials import context_namespace as context_namespace
from dispatch.adapters.kubeflow.api.credentials import kubeconfig_path as kubeconfig_path
from dispatch.adapters.kubeflow.api.errors import API_FAILURES, translate
from dispatch.adapters.kubeflow.api.throttle import MAX_IN_FLIGHT, Throttle, ThrottledApiClient
from dispatch.aio import stop
from dispatch.clock import Clock
from dispatch.model import ConfigError, NotFound, TransientError

JsonObj = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
#: seconds a single API request may take (watches use their own, longer, timeouts)
REQUEST_TIMEOUT = 30.0


class Gone(TransientError):
    """A watch's resourceVersion is too old (HTTP 410): list again and watch from there."""


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: where it lives in the API and how to name it in messages."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def describe(self, name: str, namespace: str | None) -> str:
        return f"{self.kind} {namespace}/{name}" if self.namespaced else f"{self.kind} {name}"


TRAINER_GROUP, TRAINER_VERSION = "trainer.kubeflow.org", "v1alpha1"
TRAINJOBS = Resource(TRAINER_GROUP, TRAINER_VERSION, "trainjobs", "TrainJob")
TRAINING_RUNTIMES = Resource(TRAINER_GROUP, TRAINER_VERSION, "trainingruntimes", "TrainingRuntime")
CLUSTER_TRAINING_RUNTIMES = Resource(
    TRAINER_GROUP,
    TRAINER_VERSION,
    "clustertrainingruntimes",
    "ClusterTrainingRuntime",
    namespaced=False,
)
RUNTIMES = {r.kind: r for r in (TRAINING_RUNTIMES, CLUSTER_TRAINING_RUNTIMES)}


def _shown(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 200 else f"{text[:120]}...{text[-40:]} ({len(text):,} characters)"


async def _load_kubeconfig(
    path: Path, context: str | None, configuration: client.Configuration
) -> None:
    try:
        path.stat()
    except OSError as exc:
        problem = (
            "does not exist"
            if isinstance(exc, FileNotFoundError)
            else f"cannot be read ({exc.strerror or exc})"
        )
        raise ConfigError(
            f"kubeconfig {_shown(path)} {problem}; set `kubeconfig:` for the cluster or $KUBECONFIG"
        ) from None
    try:
        await config.load_kube_config(
            config_file=str(path),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except ConfigException as exc:
        raise ConfigError(f"kubeconfig {path}: {exc}") from None


class Connection:
    """How to reach one cluster: a kubeconfig file and context, or a pod's service account
    (``InCluster``); loaded once. Every request made through it shares one ``Throttle``
    (``api/throttle.py``): at most ``max_in_flight`` at once, and a 429 (or a 5xx with
    ``Retry-After``) holds them all back for the time asked, then the request is sent again."""

    def __init__(
        self,
        source: Path | InCluster,
        context: str | None = None,
        *,
        request_timeout: float = REQUEST_TIMEOUT,
        max_in_flight: int = MAX_IN_FLIGHT,
        clock: Clock | None = None,
    ) -> None:
        """``clock``: what the throttle waits with (the system clock by default)."""
        self.source = source
        self.context = context
        self.request_timeout = request_timeout
        self.throttle = Throttle(max_in_flight, clock=clock)
        self._configuration: client.Configuration | None = None
        #: per event loop: its shared client, and the task that closes it when the loop ends
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[client.ApiClient, asyncio.Task[None]]
        ] = weakref.WeakKeyDictionary()

    @property
    def kubeconfig(self) -> Path | None:
        """The kubeconfig file read; None for a pod's service account."""
        return self.source if isinstance(self.source, Path) else None

    async def configuration(self) -> client.Configuration:
        if self._configuration is None:
            loaded = client.Configuration()
            if isinstance(self.source, InCluster):
                self.source.load(loaded)
            else:
                await _load_kubeconfig(self.source, self.context, loaded)
            self._configuration = loaded
        return self._configuration

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        """An API session over the running event loop's shared client."""
        yield Session(await self._client(), self.request_timeout)

    async def _client(self) -> client.ApiClient:
        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            api = ThrottledApiClient(await self.configuration(), self.throttle)
            self._clients[loop] = (api, loop.create_task(self._close_at_loop_end(loop, api)))
        return self._clients[loop][0]

    async def _close_at_loop_end(
        self, loop: asyncio.AbstractEventLoop, api: client.ApiClient
    ) -> None:
        """Wait until cancelled (``aclose``, or the end of the loop), then close ``api``."""
        try:
            await asyncio.Event().wait()
        finally:
            if self._clients.get(loop, (None,))[0] is api:
                del self._clients[loop]
            await api.close()

    async def aclose(self) -> None:
        """Close the running loop's client (the next ``session()`` makes a new one)."""
        found = self._clients.get(asyncio.get_running_loop())
        if found is not None:
            await stop(found[1])


class Session:
    """Raw-object operations on one ``ApiClient``. Reads answer ``None`` for 404."""

    def __init__(self, api: client.ApiClient, timeout: float) -> None:
        self.api = api
        self.timeout = timeout
        self.custom = client.CustomObjectsApi(api)

    # --- custom resources ------------------------------------------------------------------

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> JsonObj | None:
        what = f"read {res.describe(name, namespace)}"
        try:
            if res.namespaced:
                found = await self.custom.get_namespaced_custom_object(
                    res.group,
                    res.version,
                    namespace or "",
                    res.plural,
                    name,
                    _request_timeout=self.timeout,
                )
            else:
                found = await self.custom.get_cluster_custom_object(
                    res.group, res.version, res.plural, name, _request_timeout=self.timeout
                )
        except API_FAILURES as exc:
            error = translate(exc, what)
            if isinstance(error, NotFound):
                return None
            raise error from None
        return dict(found)

    async def create(self, res: Resource, body: Mapping[str, Any], namespace: str) -> JsonObj:
        """Create a namespaced object; ``AlreadyExists`` when the name is taken."""
        name = str(body.get("metadata", {}).get("name", ""))
        try:
            created = await self.custom.create_namespaced_custom_object(
                res.group,
                res.version,
                namespace,
                res.plural,
                dict(body),
                _request_timeout=self.timeout,
            )
        except API_FAILURES as exc:
            raise translate(exc, f"create {res.describe(name, namespace)}", write=True) from None
        return dict(created)

    async def merge_patch(
        self,
        res: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str,
        *,
        uid: str | None = None,
    ) -> JsonObj:
        """A JSON merge patch; with ``uid``, the patch names it (``metadata.uid``), so the API
        server refuses it (422, uid is immutable) when the name now holds another object."""
        if uid:
            patch = {**patch, "metadata": {**(patch.get("metadata") or {}), "uid": uid}}
        try:
            patched = await self.custom.patch_namespaced_custom_object(
                res.group,
                res.version,
                namespace,
                res.plural,
                name,
                dict(patch),
                _content_type=MERGE_PATCH,  # type: ignore[call-arg]  # accepted, not typed
                _request_timeout=self.timeout,
            )
        except API_FAILURES as exc:
            raise translate(exc, f"patch {res.describe(name, namespace)}", write=True) from None
        return dict(patched)

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str,
        *,
        propagation: str = "Foreground",
        uid: str | None = None,
    ) -> bool:
        """Delete an object; False when it did not exist. With ``uid``, only the object of
        that uid: the API server answers 409 (``Conflict``) when the name holds another."""
        options = client.V1DeleteOptions(
            propagation_policy=propagation,
            preconditions=client.V1Preconditions(uid=uid) if uid else None,
        )
        try:
            await self.custom.delete_namespaced_custom_object(
                res.group,
                res.version,
                namespace,
                res.plural,
                name,
                body=options,
                _request_timeout=self.timeout,
            )
        except API_FAILURES as exc:
            error = translate(exc, f"delete {res.describe(name, namespace)}", write=True)
            if isinstance(error, NotFound):
                return False
            raise error from None
        return True

    # --- the Secret of an attempt's secretEnv ----------------------------------------------

    async def create_secret(self, body: Mapping[str, Any], namespace: str) -> JsonObj:
        """Create a core/v1 Secret; ``AlreadyExists`` when the name is taken. Errors name the
        Secret, never its data."""
        name = str(body.get("metadata", {}).get("name", ""))
        core = client.CoreV1Api(self.api)
        try:
            raw: Any = dict(body)  # the client sends a plain manifest as it is
            created = await core.create_namespaced_secret(
                namespace, raw, _request_timeout=self.timeout
            )
        except API_FAILURES as exc:
            raise translate(exc, f"create Secret {namespace}/{name}", write=True) from None
        return dict(self.api.sanitize_for_serialization(created))

    async def read_secret_metadata(self, name: str, namespace: str) -> JsonObj | None:
        """A Secret's ``metadata`` only (its data is never kept), or None when absent."""
        core = client.CoreV1Api(self.api)
        try:
            found = await core.read_namespaced_secret(
                name, namespace, _request_timeout=self.timeout
            )
        except API_FAILURES as exc:
            error = translate(exc, f"read Secret {namespace}/{name}")
            if isinstance(error, NotFound):
                return None
            raise error from None
        return {"metadata": dict(self.api.sanitize_for_serialization(found.metadata))}

    async def patch_secret_metadata(
        self, name: str, metadata: Mapping[str, Any], namespace: str
    ) -> None:
        core = client.CoreV1Api(self.api)
        try:
            await core.patch_namespaced_secret(
                name, namespace, {"metadata": dict(metadata)}, _request_timeout=self.timeout
            )
        except API_FAILURES as exc:
            raise translate(exc, f"patch Secret {namespace}/{name}", write=True) from None

    async def delete_secret(self, name: str, namespace: str) -> bool:
        core = client.CoreV1Api(self.api)
        try:
            await core.delete_namespaced_secret(name, namespace, _request_timeout=self.timeout)
        except API_FAILURES as exc:
            error = translate(exc, f"delete Secret {namespace}/{name}", write=True)
            if isinstance(error, NotFound):
                return False
            raise error from None
        return True

    # --- discovery, core objects, access reviews -------------------------------------------

    async def api_groups(self) -> dict[str, list[str]]:
        """Served API groups and their versions (``/apis``)."""
        try:
            groups = await client.ApisApi(self.api).get_api_versions(_request_timeout=self.timeout)
        except API_FAILURES as exc:
            raise translate(exc, "list the API groups") from None
        return {g.name: [v.version for v in g.versions or []] for g in groups.groups or []}

    async def api_resources(self, group: str, version: str) -> set[str]:
        """Plural names served at ``group/version`` (empty when the version is not served)."""
        try:
            listed = await self.custom.get_api_resources(
                group, version, _request_timeout=self.timeout
            )
        except API_FAILURES as exc:
            error = translate(exc, f"list the resources of {group}/{version}")
            if isinstance(error, NotFound):
                return set()
            raise error from None
        return {r.name for r in listed.resources or [] if "/" not in r.name}

    async def read_core(self, kind: str, name: str, namespace: str = "") -> JsonObj | None:
        """A core/v1 ``Namespace``, ``ConfigMap`` or ``Node`` as a dict, or None when absent."""
        core = client.CoreV1Api(self.api)
        found: Any
        try:
            if kind == "Namespace":
                found = await core.read_namespace(name, _request_timeout=self.timeout)
            elif kind == "Node":
                found = await core.read_node(name, _request_timeout=self.timeout)
            elif kind == "ConfigMap":
                found = await core.read_namespaced_config_map(
                    name, namespace, _request_timeout=self.timeout
                )
            else:
                raise ValueError(f"read_core does not read {kind}")
        except API_FAILURES as exc:
            error = translate(exc, f"read {kind} {name}")
            if isinstance(error, NotFound):
                return None
            raise error from None
        return dict(self.api.sanitize_for_serialization(found))

    async def read_crd(self, name: str) -> JsonObj | None:
        """A CustomResourceDefinition as raw JSON, or None when absent or not readable."""
        extensions = client.ApiextensionsV1Api(self.api)
        response: Any
        try:
            response = await extensions.read_custom_resource_definition(
                name, _preload_content=False, _request_timeout=self.timeout
            )
            try:
                if response.status != 200:
                    return None
                data = await response.json()
            finally:
                response.release()
        except API_FAILURES as exc:
            raise translate(exc, f"read CustomResourceDefinition {name}") from None
        return data if isinstance(data, dict) else None

    async def can(
        self,
        verb: str,
        group: str,
        resource: str,
        namespace: str | None,
        subresource: str = "",
    ) -> tuple[bool, str]:
        """A SelfSubjectAccessReview: may these credentials ``verb`` ``resource``? And why."""
        attributes = client.V1ResourceAttributes(
            verb=verb,
            group=group,
            resource=resource,
            subresource=subresource or None,
            namespace=namespace or None,
        )
        body = client.V1SelfSubjectAccessReview(
            api_version="authorization.k8s.io/v1",
            kind="SelfSubjectAccessReview",
            spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attributes),
        )
        try:
            review = await client.AuthorizationV1Api(self.api).create_self_subject_access_review(
                body, _request_timeout=self.timeout
            )
        except API_FAILURES as exc:
            raise translate(exc, f"review access to {verb} {resource}") from None
        status = review.status
        allowed = bool(status and status.allowed)
        reason = (status.reason or status.evaluation_error or "") if status else ""
        return allowed, reason

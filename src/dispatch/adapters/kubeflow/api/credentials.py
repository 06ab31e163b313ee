"""Where a Kubeflow cluster's credentials come from: a kubeconfig, or the pod's service account.

``locate`` follows kubectl (client-go's loading rules); the first that applies wins:

1. the cluster's ``kubeconfig:`` (with its ``context:``);
2. the first existing file named by ``$KUBECONFIG``;
3. ``~/.kube/config``, when it exists;
4. inside a pod (``$KUBERNETES_SERVICE_HOST`` and ``$KUBERNETES_SERVICE_PORT`` set), when the
   cluster names no ``context:`` (a context is a kubeconfig's): the pod's service account,
   ``InCluster``: its token, the cluster's CA and its namespace, mounted at
   ``/var/run/secrets/kubernetes.io/serviceaccount``;
5. otherwise the kubeconfig of 2 or 3 that does not exist, which the first request reports.

The default namespace (when the cluster sets no ``namespace:``) is the kubeconfig context's,
or in a pod the service account's (its ``namespace`` file); else ``default``.

In a pod the credentials are loaded by kubernetes_asyncio's ``InClusterConfigLoader``: before a
request, it reads the token file again when its last read is a minute old. Kubelet rotates a
projected token long before it expires (at 80 % of its lifetime, which is at least ten minutes)
and the old one stays valid until then, so a rotated token is taken up in time. A token file
that cannot be read again (being replaced, say) leaves the last token in use, with a warning.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader

from dispatch.log import logger
from dispatch.model import ConfigError

#: where Kubernetes mounts a pod's service account credentials
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
HOST_ENV = "KUBERNETES_SERVICE_HOST"
PORT_ENV = "KUBERNETES_SERVICE_PORT"

log = logger(__name__)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long, a loop of links: not a file that can be read
        return False


def kubeconfig_path(configured: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The kubeconfig file to read, as kubectl finds it: the configured path, else the first
    existing file of ``$KUBECONFIG``, else ``~/.kube/config``. (kubectl merges every file of
    ``$KUBECONFIG``; dispatch reads one.)"""
    env = os.environ if environ is None else environ
    if configured:
        return Path(configured).expanduser()
    listed = [Path(p).expanduser() for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    existing = [p for p in listed if _is_file(p)]
    if existing:
        return existing[0]
    if listed:
        return listed[0]
    return Path("~/.kube/config").expanduser()


def context_namespace(path: Path, context: str | None) -> str | None:
    """The namespace the kubeconfig's context (the named one, else the current one) sets.

    Raises ``ConfigError`` when the file cannot be read or has no such context."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"kubeconfig {path} is not valid YAML: {exc}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"kubeconfig {path} is not a kubeconfig (no mapping at the top)")
    name = context or data.get("current-context")
    contexts = data.get("contexts") or []
    for entry in contexts if isinstance(contexts, list) else []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get("context")
            namespace = body.get("namespace") if isinstance(body, Mapping) else None
            return str(namespace) if namespace else None
    known = [e.get("name") for e in contexts if isinstance(e, Mapping)] if contexts else []
    raise ConfigError(
        f"kubeconfig {path} has no context {name!r}; known contexts: {known or 'none'}"
    )


@dataclass(frozen=True, slots=True)
class InCluster:
    """A pod's service account: the API server's address from the environment, the token, CA
    and namespace files under ``directory``."""

    host: str
    port: str
    directory: Path = SERVICE_ACCOUNT

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str] | None = None, directory: Path = SERVICE_ACCOUNT
    ) -> InCluster | None:
        """The pod's credentials, or None outside a pod (host or port unset or empty)."""
        env = os.environ if environ is None else environ
        host, port = env.get(HOST_ENV, ""), env.get(PORT_ENV, "")
        return cls(host, port, directory) if host and port else None

    @property
    def token(self) -> Path:
        return self.directory / "token"

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def namespace_file(self) -> Path:
        return self.directory / "namespace"

    @property
    def server(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    def describe(self) -> str:
        return f"the service account at {self.directory} (API server {self.server})"

    def namespace(self) -> str | None:
        """The service account's namespace, or None when the file is absent or empty."""
        try:
            text = self.namespace_file.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ConfigError(f"cannot read {self.namespace_file}: {exc.strerror or exc}") from None
        return text or None

    def load(self, configuration: client.Configuration) -> None:
        """Set ``configuration`` to reach the API server with the token (read again as it
        rotates) and to trust the CA. Raises ``ConfigError`` when a file is missing or empty."""
        loader = InClusterConfigLoader(
            token_filename=str(self.token),
            cert_filename=str(self.ca),
            environ={HOST_ENV: self.host, PORT_ENV: self.port},
        )
        try:
            loader.load_and_set(configuration)
        except (ConfigException, OSError) as exc:
            raise ConfigError(f"in-cluster credentials, {self.describe()}: {exc}") from None
        configuration.refresh_api_key_hook = _KeepLastToken(
            configuration.refresh_api_key_hook, self.token
        )


class _KeepLastToken:
    """The loader's token refresh, except that a token file that cannot be read (replaced
    while read, briefly empty) keeps the last token instead of failing the request: that
    token is valid until it expires, long after a rotation. Warns once per distinct problem."""

    def __init__(self, refresh: Any, path: Path) -> None:
        self.refresh = refresh
        self.path = path
        self.reported = ""

    def __call__(self, configuration: client.Configuration, *args: Any) -> None:
        try:
            self.refresh(configuration, *args)
        except (ConfigException, OSError) as exc:
            problem = str(exc)
            if problem != self.reported:
                log.warning(
                    "cannot read the token %s again (%s); the last one is kept", self.path, problem
                )
                self.reported = problem
        else:
            self.reported = ""


def locate(
    configured: str | None,
    context: str | None,
    environ: Mapping[str, str] | None = None,
    service_account: Path = SERVICE_ACCOUNT,
) -> Path | InCluster:
    """A cluster's credentials: a kubeconfig file, or the pod's service account (module
    docstring, in order)."""
    path = kubeconfig_path(configured, environ)
    if configured or context or _is_file(path):
        return path
    in_cluster = InCluster.from_environ(environ, service_account)
    return path if in_cluster is None else in_cluster


def default_namespace(source: Path | InCluster, context: str | None) -> str | None:
    """The namespace the credentials name: the kubeconfig context's (None when the file does
    not exist) or the service account's."""
    if isinstance(source, InCluster):
        return source.namespace()
    return context_namespace(source, context) if _is_file(source) else None

"""A Kubeflow cluster's settings, read from its entry in the dispatch configuration.

``parse_settings`` is the one entry point: it returns ``KubeflowSettings`` or raises
``ConfigError`` naming every problem in the entry (never another exception). The format is a
public contract (DESIGN.md, "Configuration"):

```yaml
- name: prod
  adapter: kubeflow
  kubeconfig: ~/.kube/config      # optional; default as kubectl
  context: prod-admin             # optional
  namespace: ml-team              # optional; default: the context's namespace, else "default"
  runtimes: [torch-distributed]   # optional allow-list (names, or Kind/name)
  allowRankRestart: false         # default false
  publish: {via: env}             # or {via: initContainer, initContainer: register}
  queue: team-a                   # optional default Kueue LocalQueue
  patience: 10m                   # optional; how long an attempt may wait for placement
  maxInFlight: 32                 # optional; API requests in flight at once (watches excepted)
```
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dispatch.config import ClusterConfig
from dispatch.model import ConfigError
from dispatch.model.shown import listed, show
from dispatch.model.units import parse_duration

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
#: containers whose env only Trainer sets (its webhook rejects runtime patches giving them env)
_TRAINER_OWNED_CONTAINERS = ("node", "dataset-initializer", "model-initializer")
KNOWN_KEYS = (
    "kubeconfig",
    "context",
    "namespace",
    "runtimes",
    "allowRankRestart",
    "publish",
    "queue",
    "patience",
    "maxInFlight",
)
#: seconds an attempt may wait for placement (or, admitted, for pods) by default
DEFAULT_PATIENCE = 600.0
#: API requests of one cluster in flight at once by default (``api/throttle.py``)
DEFAULT_MAX_IN_FLIGHT = 32


class PublishVia(StrEnum):
    """How the identity variables reach a rank."""

    #: through the trainer container's environment (always done)
    ENV = "env"
    #: also into a named init container of the trainer pod, through dispatch's runtime patch
    INIT_CONTAINER = "initContainer"


@dataclass(frozen=True, slots=True)
class KubeflowSettings:
    """The settings of one Kubeflow cluster. The defaults are those of an empty entry."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    #: the allow-list of runtimes; None means every runtime is allowed
    runtimes: tuple[str, ...] | None = None
    allow_rank_restart: bool = False
    publish_via: PublishVia = PublishVia.ENV
    #: the init container named by ``publish.initContainer`` (set iff publishing through one)
    init_container: str | None = None
    queue: str | None = None
    #: seconds an attempt may wait for placement before it is ``no_capacity``
    patience: float = DEFAULT_PATIENCE
    #: API requests in flight at once (a watch counts until its answer's headers arrive)
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT

    @property
    def effective_namespace(self) -> str:
        """The namespace objects are created in when the context names none."""
        return self.namespace or "default"

    def allows(self, kind: str, name: str) -> bool:
        """True when the allow-list is unset or names this runtime (``name`` or ``Kind/name``)."""
        if self.runtimes is None:
            return True
        return name in self.runtimes or f"{kind}/{name}" in self.runtimes


def _optional_text(data: Mapping[str, Any], key: str, problems: list[str]) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        problems.append(f"`{key}` must be a non-empty string (got {show(value)})")
        return None
    return value


def _runtimes(value: Any, problems: list[str]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.append(
            "`runtimes` must be a list of runtime names (or Kind/name), "
            f"e.g. [torch-distributed] (got {show(value)})"
        )
        return None
    for entry in value:
        kind, slash, _ = entry.rpartition("/")
        if slash and kind not in _RUNTIME_KINDS:
            problems.append(
                f"`runtimes` entry {show(entry)}: the kind before '/' must be one of "
                f"{', '.join(_RUNTIME_KINDS)}"
            )
    return tuple(value)


def _publish(value: Any, problems: list[str]) -> tuple[PublishVia, str | None]:
    if value is None:
        return PublishVia.ENV, None
    if not isinstance(value, Mapping):
        problems.append(
            "`publish` must be a mapping, e.g. {via: env} or "
            f"{{via: initContainer, initContainer: register}} (got {show(value)})"
        )
        return PublishVia.ENV, None
    unknown = sorted(
        k[:60] if isinstance(k, str) else show(k)
        for k in value
        if k not in ("via", "initContainer")
    )
    if unknown:
        more = f" and {len(unknown) - 5:,} more" if unknown[5:] else ""
        problems.append(
            f"`publish` has unknown key(s) {unknown[:5]}{more}; known: via, initContainer"
        )
    via_text = value.get("via", PublishVia.ENV.value)
    try:
        via = PublishVia(via_text)
    except ValueError:
        problems.append(f"`publish.via` must be env or initContainer (got {show(via_text)})")
        return PublishVia.ENV, None
    container = value.get("initContainer")
    if via is PublishVia.INIT_CONTAINER:
        if not isinstance(container, str) or not _DNS_LABEL.match(container):
            problems.append(
                "`publish.initContainer` must name the trainer pod's init container "
                f"(a DNS label, e.g. register) when publish.via is initContainer (got {show(container)})"
            )
            return via, None
        if container in _TRAINER_OWNED_CONTAINERS:
            problems.append(
                f"`publish.initContainer` may not be {show(container)}: Trainer rejects a runtime "
                "patch that sets env on its own containers"
            )
            return via, None
        return via, container
    if container is not None:
        problems.append("`publish.initContainer` is only read with publish.via: initContainer")
    return via, None


def parse_settings(cluster: ClusterConfig) -> KubeflowSettings:
    """The settings of a configured Kubeflow cluster; ``ConfigError`` names every problem."""
    return settings_from_mapping(cluster.settings, cluster=cluster.name)


def settings_from_mapping(data: Any, *, cluster: str = "?") -> KubeflowSettings:
    """Parse a cluster entry's adapter settings (the entry without ``name`` and ``adapter``)."""
    where = f"cluster {cluster!r}"
    if data is None:
        return KubeflowSettings()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: the settings must be a mapping")
    problems: list[str] = []
    for key in data:
        if key not in KNOWN_KEYS:
            written = key if isinstance(key, str) else show(key)
            guess = difflib.get_close_matches(written[:100], KNOWN_KEYS, n=1, cutoff=0.6)
            hint = f"; did you mean {guess[0]!r}?" if guess else f"; known: {', '.join(KNOWN_KEYS)}"
            problems.append(f"unknown setting {show(key)} for a kubeflow cluster{hint}")
    kubeconfig = _optional_text(data, "kubeconfig", problems)
    context = _optional_text(data, "context", problems)
    namespace = _optional_text(data, "namespace", problems)
    if namespace is not None and not _DNS_LABEL.match(namespace):
        problems.append(f"`namespace` must be a DNS label (got {show(namespace)})")
    queue = _optional_text(data, "queue", problems)
    allow = data.get("allowRankRestart", False)
    if not isinstance(allow, bool):
        problems.append(f"`allowRankRestart` must be true or false (got {show(allow)})")
        allow = False
    runtimes = _runtimes(data.get("runtimes"), problems)
    patience = _patience(data.get("patience"), problems)
    via, container = _publish(data.get("publish"), problems)
    max_in_flight = _max_in_flight(data.get("maxInFlight"), problems)
    if problems:
        raise ConfigError(f"{where}: " + listed(problems))
    return KubeflowSettings(
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        runtimes=runtimes,
        allow_rank_restart=allow,
        publish_via=via,
        init_container=container,
        queue=queue,
        patience=patience,
        max_in_flight=max_in_flight,
    )


def _patience(value: Any, problems: list[str]) -> float:
    if value is None:
        return DEFAULT_PATIENCE
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        problems.append(f"`patience` must be a duration such as 10m or 600 ({exc})")
        return DEFAULT_PATIENCE
    if seconds <= 0:
        problems.append(f"`patience` must be positive (got {show(value)})")
        return DEFAULT_PATIENCE
    return seconds


def _max_in_flight(value: Any, problems: list[str]) -> int:
    if value is None:
        return DEFAULT_MAX_IN_FLIGHT
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problems.append(f"`maxInFlight` must be a positive whole number (got {show(value)})")
        return DEFAULT_MAX_IN_FLIGHT
    return value

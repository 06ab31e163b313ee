"""Configuration: the clusters dispatch knows, read from YAML; ``local`` always exists.

Lookup order: an explicit path (``--config``), else ``$DISPATCH_CONFIG``, else
``<user config dir>/dispatch/config.yaml``; a missing default file means "only ``local``".
State (the records database, logs) lives under ``$DISPATCH_STATE_DIR``, else the user's
state directory; the records may instead be a team's PostgreSQL database (``records:`` in the
configuration, or ``$DISPATCH_RECORDS``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dispatch.model import ConfigError, yaml12
from dispatch.model.shown import clip, listed, show

LOCAL = "local"
SUPERVISION = ("local", "remote")
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def finite_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (not a bool, NaN, infinity or an
    integer past float's range), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """One configured cluster: its name, the adapter that drives it, and that adapter's settings."""

    name: str
    adapter: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: who drives this cluster's jobs: ``local`` (a background supervisor that ``submit``
    #: starts on the submitting machine) or ``remote`` (supervisors that run elsewhere, e.g. in
    #: the cluster, over the team's shared records; ``submit`` starts none)
    supervision: str = "local"

    def setting(self, key: str, default: Any = None) -> Any:
        return self.settings.get(key, default)

    @property
    def supervised_here(self) -> bool:
        """Whether the submitting machine supervises this cluster's jobs."""
        return self.supervision == "local"

    def number(self, key: str, default: float, *, minimum: float = 0.0) -> float:
        """A numeric setting (seconds, counts): ``ConfigError`` naming the cluster and the key
        when it is not a number of at least ``minimum``."""
        value = self.settings.get(key, default)
        number = finite_number(value)
        if number is None:
            raise ConfigError(
                f"cluster {self.name!r}: {key} is {show(value)}, not a number; "
                f"write it as e.g. {key}: {default:g}"
            )
        if number < minimum:
            raise ConfigError(f"cluster {self.name!r}: {key} is {number:g}; at least {minimum:g}")
        return number

    def whole_number(self, key: str, default: int, *, minimum: int = 1) -> int:
        """A whole-number setting; ``ConfigError`` as ``number`` says."""
        value = self.number(key, default, minimum=minimum)
        if value != int(value):
            raise ConfigError(f"cluster {self.name!r}: {key} is {value:g}, not a whole number")
        return int(value)


@dataclass(frozen=True, slots=True)
class Config:
    clusters: Mapping[str, ClusterConfig]
    source: Path | None = None
    #: where the records are (``records:``): a ``postgresql://`` URL shared by a team, or a
    #: SQLite file; None for the default file in the state directory
    records: str | None = None

    def cluster(self, name: str) -> ClusterConfig:
        try:
            return self.clusters[name]
        except KeyError:
            known = ", ".join(sorted(self.clusters))
            where = f" in {self.source}" if self.source else ""
            raise ConfigError(
                f"no cluster named {name!r}{where}; known clusters: {known}. "
                "Add it under `clusters:` in the configuration file, or set `cluster:` in the "
                "job spec to one of these."
            ) from None


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("DISPATCH_CONFIG"):
        return Path(env["DISPATCH_CONFIG"]).expanduser()
    from platformdirs import user_config_dir  # only when needed: slow to import

    return Path(user_config_dir("dispatch")) / "config.yaml"


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the records database and per-rank logs live (created on first use by callers)."""
    env = os.environ if environ is None else environ
    if env.get("DISPATCH_STATE_DIR"):
        return Path(env["DISPATCH_STATE_DIR"]).expanduser()
    from platformdirs import user_state_dir  # only when needed: slow to import

    return Path(user_state_dir("dispatch"))


def records_location(config: Config, state: Path, environ: Mapping[str, str] | None = None) -> str:
    """Where the records are: ``$DISPATCH_RECORDS``, else the configuration's ``records:``,
    else the SQLite file in the state directory ``state``."""
    env = os.environ if environ is None else environ
    chosen = env.get("DISPATCH_RECORDS") or config.records
    if chosen:
        return chosen if "://" in chosen else str(Path(chosen).expanduser())
    return str(state / "records.sqlite3")


def parse_config(data: Any, *, source: Path | None = None) -> Config:
    where = f"{source}: " if source else ""
    clusters: dict[str, ClusterConfig] = {LOCAL: ClusterConfig(name=LOCAL, adapter=LOCAL)}
    if data is None:
        return Config(clusters=clusters, source=source)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}the configuration must be a mapping with a `clusters:` list")
    unknown = sorted(show(k) for k in data if k not in ("clusters", "records"))
    if unknown:
        names = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5:,} more" if unknown[5:] else "")
        raise ConfigError(
            f"{where}unknown top-level key(s) {names}; only `clusters` and `records` are read"
        )
    records = data.get("records")
    if records is not None and (not isinstance(records, str) or not records.strip()):
        raise ConfigError(
            f"{where}`records` must be a postgresql:// URL or a file path (got {show(records)})"
        )
    entries = data.get("clusters") or []
    if not isinstance(entries, list):
        raise ConfigError(f"{where}`clusters` must be a list of clusters")
    problems: list[str] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            problems.append(f"clusters[{index}] must be a mapping with name and adapter")
            continue
        name, adapter = entry.get("name"), entry.get("adapter")
        if not isinstance(name, str) or not _NAME.match(name):
            problems.append(
                f"clusters[{index}].name must be lowercase letters, digits and '-', at most "
                f"63 characters (got {show(name)})"
            )
            continue
        if not isinstance(adapter, str) or not adapter:
            problems.append(f"clusters[{index}] ({name}) needs `adapter:` (kubeflow, slurm, local)")
            continue
        if name in clusters and name != LOCAL:
            problems.append(f"clusters[{index}]: the name {name!r} is used twice")
            continue
        supervision = entry.get("supervision", "local")
        if supervision not in SUPERVISION:
            problems.append(
                f"clusters[{index}] ({name}): supervision is {show(supervision)}; "
                "write local (a supervisor on the submitting machine) or remote (supervisors "
                "running elsewhere over shared records)"
            )
            continue
        if supervision == "remote" and adapter == LOCAL:
            problems.append(
                f"clusters[{index}] ({name}): a local cluster runs processes on the submitting "
                "machine, so its supervision is local"
            )
            continue
        settings = {k: v for k, v in entry.items() if k not in ("name", "adapter", "supervision")}
        clusters[name] = ClusterConfig(
            name=name, adapter=adapter, settings=settings, supervision=supervision
        )
    if problems:
        raise ConfigError(where + listed(problems))
    return Config(clusters=clusters, source=source, records=records)


def load_config(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read the configuration. An explicitly named file must exist; the default one may not."""
    explicit = path is not None or bool(
        (os.environ if environ is None else environ).get("DISPATCH_CONFIG")
    )
    file = Path(path).expanduser() if path is not None else default_config_path(environ)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"configuration file {file} does not exist") from None
        return parse_config(None)
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {file}: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{file} is not UTF-8 text: save it as UTF-8") from None
    try:
        data = yaml12.load(text)
    except yaml12.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML: {clip(str(exc))}") from None
    return parse_config(data, source=file)

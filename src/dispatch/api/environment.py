"""Where dispatch keeps things and how it reaches schedulers, resolved once per process.

Both the CLI and the Python API use this, so a job submitted from a script is visible to
``dispatch status`` and driven by the same supervisors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dispatch.adapters.base import Adapter, AdapterContext
from dispatch.adapters.registry import open_adapter
from dispatch.adapters.secrets import SecretStore
from dispatch.clock import Clock, IdGenerator, RandomIds, SystemClock
from dispatch.config import Config, load_config, records_location, state_dir
from dispatch.records import Records, open_records


@dataclass
class Environment:
    """The configuration, the state directory, the clock and the id generator in use."""

    config: Config
    state_dir: Path
    clock: Clock = field(default_factory=SystemClock)
    ids: IdGenerator = field(default_factory=RandomIds)
    _adapters: dict[str, Adapter] = field(default_factory=dict, repr=False)

    @classmethod
    def load(
        cls,
        *,
        config_path: str | Path | None = None,
        state: str | Path | None = None,
        clock: Clock | None = None,
        ids: IdGenerator | None = None,
    ) -> Environment:
        """From explicit values, else ``$DISPATCH_CONFIG`` / ``$DISPATCH_STATE_DIR`` / defaults."""
        return cls(
            config=load_config(config_path),
            state_dir=Path(state) if state is not None else state_dir(),
            clock=clock or SystemClock(),
            ids=ids or RandomIds(),
        )

    @property
    def records_location(self) -> str:
        """``$DISPATCH_RECORDS``, the configuration's ``records:``, or the state directory's
        SQLite file."""
        return records_location(self.config, self.state_dir)

    def open_records(self) -> Records:
        return open_records(self.records_location, clock=self.clock, ids=self.ids)

    def adapter_context(self, cluster: str) -> AdapterContext:
        return AdapterContext(
            state_dir=self.state_dir / "clusters" / cluster, clock=self.clock, secrets=self.secrets
        )

    @property
    def secrets(self) -> SecretStore:
        """Where the ``fromEnv`` values of jobs' ``secretEnv`` are kept (0600, not records)."""
        return SecretStore(self.state_dir / "secrets")

    def adapter(self, cluster: str) -> Adapter:
        """The adapter bound to the configured cluster ``cluster`` (opened once, then cached).

        Raises ``ConfigError`` for an unknown cluster or an adapter whose client is missing.
        """
        if cluster not in self._adapters:
            self._adapters[cluster] = open_adapter(
                self.config.cluster(cluster), self.adapter_context(cluster)
            )
        return self._adapters[cluster]

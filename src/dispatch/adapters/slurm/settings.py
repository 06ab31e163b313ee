"""A Slurm cluster's settings, read from its entry in the dispatch configuration.

```yaml
clusters:
  - name: hpc
    adapter: slurm
    transport: local          # or ssh (then host is required, user/port/sshOptions optional)
    host: login1.example.org
    partition: gpu            # default partition when a spec has no queue
    outputDir: /shared/dispatch   # where attempts write their output (shared with the nodes)
    slurmConf: /etc/slurm/slurm.conf   # optional SLURM_CONF for every command
    accounting: auto          # auto | sacct | none
    pollInterval: 10          # seconds between status queries while watching
    masterPort: 29500         # optional; default derived from the Slurm job id
    commandTimeout: 60        # seconds
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dispatch.adapters.slurm.transport import LocalTransport, SshTransport, Transport
from dispatch.config import ClusterConfig, finite_number
from dispatch.model import ConfigError
from dispatch.model.shown import listed, show

KNOWN = frozenset(
    {
        "transport",
        "host",
        "user",
        "port",
        "sshOptions",
        "partition",
        "outputDir",
        "slurmConf",
        "accounting",
        "pollInterval",
        "masterPort",
        "commandTimeout",
    }
)
ACCOUNTING_MODES = ("auto", "sacct", "none")


@dataclass(frozen=True, slots=True)
class SlurmSettings:
    transport: str = "local"
    host: str | None = None
    user: str | None = None
    port: int | None = None
    ssh_options: tuple[str, ...] = ()
    partition: str | None = None
    output_dir: str = ""
    slurm_conf: str | None = None
    accounting: str = "auto"
    poll_interval: float = 10.0
    master_port: int | None = None
    command_timeout: float = 60.0

    @classmethod
    def from_cluster(cls, cluster: ClusterConfig, state_dir: Path) -> SlurmSettings:
        """Validated settings; raises ``ConfigError`` naming every problem at once."""
        raw: Mapping[str, Any] = cluster.settings
        problems = [f"unknown setting {show(k)}" for k in sorted(map(str, set(raw) - KNOWN))]
        transport = raw.get("transport", "local")
        if transport not in ("local", "ssh"):
            problems.append(f"transport must be 'local' or 'ssh' (got {show(transport)})")
        host = raw.get("host")
        if transport == "ssh" and not (isinstance(host, str) and host):
            problems.append("transport ssh needs `host:` (the login node)")
        output_dir = raw.get("outputDir")
        if output_dir is None:
            if transport == "ssh":
                problems.append(
                    "transport ssh needs `outputDir:`, an absolute folder on the cluster's "
                    "shared file system"
                )
            output_dir = str(state_dir / "slurm" / cluster.name)
        elif not (isinstance(output_dir, str) and output_dir.startswith("/")):
            problems.append(f"outputDir must be an absolute path (got {show(output_dir)})")
        accounting = raw.get("accounting", "auto")
        if accounting not in ACCOUNTING_MODES:
            problems.append(f"accounting must be one of {', '.join(ACCOUNTING_MODES)}")
        numbers = {}
        for key, default in (("pollInterval", 10.0), ("commandTimeout", 60.0)):
            number = finite_number(raw.get(key, default))
            if number is None or number <= 0:
                shown = show(raw.get(key))
                problems.append(f"{key} must be a positive number of seconds (got {shown})")
                number = default
            numbers[key] = number
        ints = {}
        for key in ("port", "masterPort"):
            value = raw.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536
            ):
                problems.append(f"{key} must be a port number (got {show(value)})")
                value = None
            ints[key] = value
        options = raw.get("sshOptions", [])
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            problems.append("sshOptions must be a list of strings")
            options = []
        for key in ("partition", "slurmConf", "user"):
            if raw.get(key) is not None and not isinstance(raw.get(key), str):
                problems.append(f"{key} must be a string")
        if problems:
            raise ConfigError(f"cluster {cluster.name!r} (slurm): " + listed(problems))
        return cls(
            transport=transport,
            host=host,
            user=raw.get("user"),
            port=ints["port"],
            ssh_options=tuple(options),
            partition=raw.get("partition"),
            output_dir=str(output_dir).rstrip("/"),
            slurm_conf=raw.get("slurmConf"),
            accounting=accounting,
            poll_interval=numbers["pollInterval"],
            master_port=ints["masterPort"],
            command_timeout=numbers["commandTimeout"],
        )

    def make_transport(self) -> Transport:
        if self.transport == "ssh" and self.host:
            return SshTransport(
                host=self.host, user=self.user, port=self.port, options=self.ssh_options
            )
        return LocalTransport()

    @property
    def command_env(self) -> dict[str, str]:
        """Variables every Slurm command gets (``SLURM_CONF`` when configured)."""
        return {"SLURM_CONF": self.slurm_conf} if self.slurm_conf else {}

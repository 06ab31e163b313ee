"""A real two-node Slurm on this host, for the tests: munged, slurmctld and two slurmd.

Everything lives under one scratch folder (config, state, spool, logs, the munge socket and
key); daemons listen on free loopback ports chosen at start, and the node names carry a
per-run tag so that two runs on one machine do not share cgroups or job ids. Needs root (the
daemons run as root, munged as the ``munge`` user) and the Debian packages ``slurm-wlm`` and
``munge`` (``scripts/install-slurm.sh``).

``DISPATCH_SLURM_PREFIX`` names a Slurm built from source instead
(``scripts/build-slurm-from-source.sh``, e.g. ``/opt/slurm-24.11``): its ``bin`` and ``sbin``
then come first on ``PATH`` for the daemons, the tests' commands and the jobs (the session
fixture sets it). munged is the system's either way.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")
#: names the install folder of a Slurm built from source; unset: the Slurm on PATH
PREFIX_VARIABLE = "DISPATCH_SLURM_PREFIX"


def prefix() -> Path | None:
    """The Slurm build ``DISPATCH_SLURM_PREFIX`` names, or None (the Slurm on ``PATH``)."""
    value = os.environ.get(PREFIX_VARIABLE, "").strip()
    return Path(value) if value else None


def search_path() -> str:
    """``PATH`` with the prefix's ``bin`` and ``sbin`` first (``PATH`` itself without one)."""
    path = os.environ.get("PATH", os.defpath)
    chosen = prefix()
    if chosen is None:
        return path
    first = [str(chosen / "bin"), str(chosen / "sbin")]
    return os.pathsep.join([*first, *(p for p in path.split(os.pathsep) if p not in first)])


def missing_binaries() -> list[str]:
    """Programs the real-Slurm tests need that are not installed."""
    found = [b for b in BINARIES if shutil.which(b, path=search_path()) is None]
    try:
        pwd.getpwnam("munge")
    except KeyError:
        found.append("the 'munge' user")
    return found


def why_unavailable() -> str | None:
    """Why a real Slurm cannot be started here, or None when it can."""
    chosen = prefix()
    if chosen is not None and not (chosen / "sbin" / "slurmctld").is_file():
        return (
            f"{PREFIX_VARIABLE}={chosen} holds no Slurm build (no sbin/slurmctld); build one "
            "with scripts/build-slurm-from-source.sh, or unset it to use the installed Slurm"
        )
    missing = missing_binaries()
    if missing:
        return (
            f"Slurm is not installed here (missing: {', '.join(missing)}); "
            "run scripts/install-slurm.sh"
        )
    if os.geteuid() != 0:
        return "the real-Slurm tests start slurmd and must run as root"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cgroup_plugin() -> str:
    return "v1" if Path("/sys/fs/cgroup/memory").is_dir() else "v2"


@dataclass
class RealSlurm:
    """A running test cluster. ``env`` is what a Slurm client needs to talk to it."""

    scratch: Path
    nodes: tuple[str, str]
    conf: Path
    jobcomp: Path

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf), "PATH": search_path()}

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=60,
            check=check,
        )

    def node_states(self) -> dict[str, str]:
        """Each node's state as ``sinfo`` shows it (``idle``, ``down*``, ``idle+drain`` …).

        A node is listed once per partition it is in; the states are the same there."""
        shown = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        return dict(line.split(" ", 1) for line in shown.stdout.splitlines() if " " in line)

    def wait_until_idle(self, *nodes: str, timeout: float) -> None:
        """Return once every node in ``nodes`` is ``idle``; ``RuntimeError`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        states = self.node_states()
        while not all(states.get(node) == "idle" for node in nodes):
            if time.monotonic() > deadline:
                raise RuntimeError(f"nodes not idle after {timeout:.0f} s: {states}")
            time.sleep(0.1)
            states = self.node_states()

    def log(self, name: str) -> str:
        path = self.scratch / "log" / name
        return path.read_text(errors="replace") if path.exists() else ""


def start(tag: str) -> RealSlurm:
    """Start munged, slurmctld and two slurmd; return once both nodes are idle.

    Raises ``RuntimeError`` with the daemons' logs when the cluster does not come up.
    """
    scratch = Path(tempfile.mkdtemp(prefix="dslurm-"))
    scratch.chmod(0o755)  # munged runs as 'munge' and must reach its folder
    for sub in ("state", "spool", "run", "log", "out"):
        (scratch / sub).mkdir()
    (scratch / "out").chmod(0o777)
    munge = pwd.getpwnam("munge")
    munge_dir = scratch / "munge"
    munge_dir.mkdir(mode=0o711)
    os.chown(munge_dir, munge.pw_uid, munge.pw_gid)
    munge_dir.chmod(0o711)  # munged refuses 700: "execute permissions for all required"
    key = munge_dir / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chown(key, munge.pw_uid, munge.pw_gid)
    key.chmod(0o400)

    host = socket.gethostname().split(".")[0]
    nodes = (f"{tag}n1", f"{tag}n2")
    values = {
        "scratch": str(scratch),
        "host": host,
        "ctld_port": str(_free_port()),
        "node1": nodes[0],
        "node2": nodes[1],
        "node1_port": str(_free_port()),
        "node2_port": str(_free_port()),
        "first_job_id": str(1000 + (os.getpid() % 50) * 1000),
        "cgroup_plugin": _cgroup_plugin(),
    }
    conf = scratch / "slurm.conf"
    conf.write_text(string.Template((DATA / "slurm.conf.in").read_text()).substitute(values))
    (scratch / "cgroup.conf").write_text(
        string.Template((DATA / "cgroup.conf.in").read_text()).substitute(values)
    )
    cluster = RealSlurm(scratch=scratch, nodes=nodes, conf=conf, jobcomp=scratch / "jobcomp.txt")
    env = {**os.environ, **cluster.env}
    sock = munge_dir / "munge.sock"
    try:
        subprocess.run(
            [
                "runuser",
                "-u",
                "munge",
                "--",
                "munged",
                f"--socket={sock}",
                f"--key-file={key}",
                f"--log-file={munge_dir / 'munged.log'}",
                f"--pid-file={munge_dir / 'munged.pid'}",
                f"--seed-file={munge_dir / 'munged.seed'}",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        subprocess.run(["slurmctld", "-f", str(conf), "-i"], env=env, check=True, timeout=30)
        for node in nodes:
            subprocess.run(["slurmd", "-f", str(conf), "-N", node], env=env, check=True, timeout=30)
        cluster.wait_until_idle(*nodes, timeout=60)
        return cluster
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, RuntimeError) as exc:
        logs = "\n".join(
            f"--- {name}\n{cluster.log(name)[-2000:]}"
            for name in ("slurmctld.log", f"slurmd-{nodes[0]}.log", f"slurmd-{nodes[1]}.log")
        )
        stop(cluster)
        raise RuntimeError(f"the test Slurm did not start: {exc}\n{logs}") from exc


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop(cluster: RealSlurm) -> None:
    """Stop the daemons started by ``start`` (by their pid files) and remove the scratch."""
    cluster.run("scontrol", "shutdown", check=False)
    pids = [
        p
        for p in (
            _pid(cluster.scratch / "run" / "slurmctld.pid"),
            *(_pid(cluster.scratch / "run" / f"slurmd-{n}.pid") for n in cluster.nodes),
        )
        if p
    ]
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    munged = _pid(cluster.scratch / "munge" / "munged.pid")
    if munged and _alive(munged):
        os.kill(munged, signal.SIGTERM)
    for controller in ("memory", "freezer", "cpuset", "devices", "cpuacct", "cpu"):
        for node in cluster.nodes:
            leftover = Path("/sys/fs/cgroup") / controller / f"slurm_{node}"
            for folder in sorted(leftover.glob("**/"), key=lambda p: -len(p.parts)):
                with contextlib.suppress(OSError):
                    folder.rmdir()
    shutil.rmtree(cluster.scratch, ignore_errors=True)

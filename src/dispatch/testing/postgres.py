"""A throwaway PostgreSQL server for tests and benchmarks: Debian's ``postgresql`` binaries,
a temporary data directory, loopback only.

::

    with PostgresServer() as server:
        url = server.create_database("records_1")
        ...
        server.restart()  # pg_ctl restart -m fast, as an operator would

The server runs as an unprivileged user (PostgreSQL refuses to run as root: when the caller is
root, the server runs as ``nobody``, which owns the data directory). It listens on 127.0.0.1
only, with no Unix socket, trust authentication for its one superuser, and ``fsync`` off (the
data is thrown away). ``find_bin_dir`` says whether the binaries are installed at all; tests
skip with its reason when they are not.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

SUPERUSER = "dispatch"
_SEARCH = Path("/usr/lib/postgresql")


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries are not installed."""


def find_bin_dir() -> Path:
    """The newest installed PostgreSQL's ``bin`` folder (Debian puts each major version under
    ``/usr/lib/postgresql/<major>/bin``), else the folder of ``initdb`` on the PATH."""
    versions = sorted(
        (p for p in _SEARCH.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1]
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise PostgresUnavailable(
        "PostgreSQL's server is not installed (no initdb): install Debian's `postgresql` "
        "package (`apt-get install postgresql`; `make test` does it when run as root)"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One PostgreSQL server in a temporary directory; see the module docstring."""

    def __init__(self, *, bin_dir: Path | None = None, port: int | None = None) -> None:
        self.bin_dir = bin_dir or find_bin_dir()
        self.port = port or _free_port()
        self._tmp: str | None = None
        self.data_dir = Path()
        self._user: pwd.struct_passwd | None = pwd.getpwnam("nobody") if os.geteuid() == 0 else None
        self._databases = 0

    @property
    def url(self) -> str:
        """The URL of the server's ``postgres`` database (for administration)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def _run(self, *args: str, timeout: float = 60) -> None:
        def drop_privileges() -> None:
            if self._user is not None:
                os.setgroups([])
                os.setgid(self._user.pw_gid)
                os.setuid(self._user.pw_uid)

        done = subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            preexec_fn=drop_privileges if self._user is not None else None,
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"},
            cwd="/",
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{args[0]} failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-2000:]}"
            )

    def start(self) -> PostgresServer:
        self._tmp = tempfile.mkdtemp(prefix="dispatch-pg-")
        root = Path(self._tmp)
        if self._user is not None:
            os.chown(root, self._user.pw_uid, self._user.pw_gid)
        root.chmod(0o700)
        self.data_dir = root / "data"
        self._run(
            "initdb", "-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
            "--locale=C", "--no-sync",
        )  # fmt: skip
        self._pg_ctl("start")
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories='' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        self._run(
            "pg_ctl", action, "-D", str(self.data_dir), "-l", str(self.data_dir / "server.log"),
            "-w", "-t", "60", "-o", options, *extra,
        )  # fmt: skip

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection is dropped, then the server is back."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        if self._tmp is None:
            return
        try:
            if (self.data_dir / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its URL."""
        import psycopg  # the postgres extra; only needed once a server runs

        self._databases += 1
        name = name or f"records_{self._databases}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return self.database_url(name)

    def log(self) -> str:
        path = self.data_dir / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

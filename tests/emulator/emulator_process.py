"""``dispatch emulator`` as a user runs it: a subprocess, ready once it printed its JSON."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

KUBECTL = shutil.which("kubectl")
READY_TIMEOUT = 30.0


def client_env(kubeconfig: Path, home: Path) -> dict[str, str]:
    """An environment for a client process: ``kubeconfig``, an empty home."""
    return {
        "KUBECONFIG": str(kubeconfig),
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    }


def run_kubectl(kubeconfig: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """kubectl ``args`` against ``kubeconfig``, its output kept (never raises on failure)."""
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, *args],
        env=client_env(kubeconfig, home),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def dispatch_command() -> list[str]:
    """The installed ``dispatch`` script next to this interpreter, else the module."""
    script = Path(sys.executable).with_name("dispatch")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from dispatch.cli.main import main; main()"]


class EmulatorProcess:
    def __init__(self, proc: subprocess.Popen[str], info: dict[str, Any]) -> None:
        self.proc = proc
        self.info = info

    @property
    def kubeconfig(self) -> Path:
        return Path(self.info["kubeconfig"])

    @property
    def url(self) -> str:
        return str(self.info["server"])

    def env(self, home: Path) -> dict[str, str]:
        """An environment for a client process: this kubeconfig, an empty home."""
        return client_env(self.kubeconfig, home)

    def kubectl(self, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return run_kubectl(self.kubeconfig, home, *args)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def _read_json(proc: subprocess.Popen[str], deadline: float) -> dict[str, Any]:
    """The one JSON object ``-o json`` prints (indented over several lines)."""
    assert proc.stdout is not None
    text = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        text += line
        if line.rstrip() == "}":
            found: dict[str, Any] = json.loads(text)
            return found
    raise AssertionError(f"dispatch emulator printed no JSON: {text!r}")


@contextmanager
def emulator_process(tmp: Path, *args: str) -> Iterator[EmulatorProcess]:
    """Run ``dispatch emulator -o json --kubeconfig <tmp>/kubeconfig ARGS``; stop it with
    SIGINT at the end (the test may have stopped it already)."""
    env = {**os.environ, "DISPATCH_STATE_DIR": str(tmp / "state")}
    proc = subprocess.Popen(
        [
            *dispatch_command(),
            "emulator",
            "-o",
            "json",
            "--kubeconfig",
            str(tmp / "kubeconfig"),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        info = _read_json(proc, time.monotonic() + READY_TIMEOUT)
        yield EmulatorProcess(proc, info)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

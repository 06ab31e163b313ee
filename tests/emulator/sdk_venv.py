"""Build (once) the virtual environment the Kubeflow SDK test runs in.

The SDK (``kubeflow`` 0.5.0 on PyPI) pins an older ``kubernetes`` client than dispatch, so it
gets its own environment: ``<cache>/.venv-sdk-<hash of constraints-sdk.txt>``, where
``<cache>`` is ``$DISPATCH_SDK_VENV_CACHE`` or ``~/.cache/dispatch``. Run as a script to build
it ahead of time (CI does); the test calls :func:`ensure_sdk_venv` and skips with the reason
when it cannot be built (e.g. offline without a warm cache).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints-sdk.txt"


def venv_dir() -> Path:
    cache = Path(os.environ.get("DISPATCH_SDK_VENV_CACHE", Path.home() / ".cache" / "dispatch"))
    digest = hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest()[:12]
    return cache / f".venv-sdk-{digest}"


def python_of(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_sdk_venv(timeout: float = 600) -> tuple[Path | None, str]:
    """The SDK environment's python, or None and the reason it could not be built."""
    env = venv_dir()
    python = python_of(env)
    marker = env / ".complete"
    if marker.exists():
        return python, ""
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(env)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
             "-c", str(CONSTRAINTS), "kubeflow"],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"cannot build the SDK venv: {exc}"
    if done.returncode != 0:
        return None, f"cannot install the Kubeflow SDK (offline?): {done.stderr.strip()[-400:]}"
    marker.write_text("ok\n")
    return python, ""


if __name__ == "__main__":
    found, why = ensure_sdk_venv()
    print(found or why)
    sys.exit(0 if found else 1)

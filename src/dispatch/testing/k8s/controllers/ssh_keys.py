"""The SSH key pair Trainer's MPI plugin puts in a TrainJob's ``<trainjob>-mpi-ssh-auth`` Secret.

The renderer (``planning.plugins.mpi``) is pure, so the Secret it builds holds a placeholder;
the emulated Trainer controller calls :func:`with_generated_keys` as it creates the Secret,
as Trainer generates a new pair in ``MPI.Build`` (``buildSSHAuthSecret``): ECDSA P-521, the
private key PEM-encoded as ``EC PRIVATE KEY``, the public key in ``authorized_keys`` form.

No key library is a dependency: the pair comes from ``ssh-keygen`` when it is installed; when
it is not, the placeholder stays (nothing in the emulator reads the keys).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from dispatch.adapters.kubeflow.planning.plugins.mpi import (
    SSH_PRIVATE_KEY,
    SSH_PUBLIC_KEY,
    has_placeholder_keys,
)

JsonObj = dict[str, Any]
KEYGEN_TIMEOUT = 30.0


def generate_pair() -> tuple[bytes, bytes] | None:
    """A new ECDSA P-521 pair (private PEM, public ``authorized_keys`` line), or None when
    ``ssh-keygen`` is not installed or fails."""
    keygen = shutil.which("ssh-keygen")
    if keygen is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "id"
        argv = [keygen, "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-C", ""]
        try:
            subprocess.run(
                [*argv, "-f", str(path)], check=True, capture_output=True, timeout=KEYGEN_TIMEOUT
            )
        except (OSError, subprocess.SubprocessError):
            return None
        private = path.read_bytes()
        public = path.with_suffix(".pub").read_bytes().strip() + b"\n"
    return private, public


def with_generated_keys(obj: JsonObj) -> JsonObj:
    """``obj`` with a real key pair in place of the renderer's placeholder (unchanged when it
    is not such a Secret, or no pair can be made)."""
    if not has_placeholder_keys(obj):
        return obj
    pair = generate_pair()
    if pair is None:
        return obj
    private, public = pair
    data = {
        **(obj.get("data") or {}),
        SSH_PRIVATE_KEY: base64.b64encode(private).decode(),
        SSH_PUBLIC_KEY: base64.b64encode(public).decode(),
    }
    return {**obj, "data": data}

"""A kubeconfig file pointing at the emulator (plain HTTP on loopback, no credentials).

The file is written as kubectl writes its own: readable by its owner only (0600), and
replaced whole (a reader never sees half a file).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

CONTEXT = "emulator"


def kubeconfig(url: str, namespace: str = "default", token: str | None = None) -> dict[str, Any]:
    """``token``: a ServiceAccount's bearer token (RBAC applies); none for the administrator."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT, "user": {"token": token} if token else {}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(
    path: Path, url: str, namespace: str = "default", token: str | None = None
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(kubeconfig(url, namespace, token), sort_keys=False)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(partial, path)
    return path


def is_emulator_kubeconfig(path: Path) -> bool:
    """Whether ``path`` is a kubeconfig this module wrote (its only context is the
    emulator's): such a file may be replaced; any other kubeconfig is the user's."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    if not isinstance(data, dict):
        return False
    contexts = [c.get("name") for c in data.get("contexts") or [] if isinstance(c, dict)]
    return data.get("current-context") == CONTEXT and contexts == [CONTEXT]

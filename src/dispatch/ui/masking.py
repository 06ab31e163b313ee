"""Secret values never leave the server: what the pages show of plans, specs and evidence.

A value is masked when its variable is one of the job's ``secretEnv`` names, or when its name
looks like a secret (``TOKEN``, ``SECRET``, ``PASSWORD``, ``KEY`` …, as a word of the name).
Masked wherever it appears: an ``env`` mapping (local and Slurm plans), a Kubernetes
``env`` list of ``{name, value}``, the ``data`` and ``stringData`` of a Kubernetes Secret.
Pure; the input is not changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "•••••• (masked)"
#: a variable name that reads like a secret: one of these words, delimited by _ or the ends
SECRET_NAME = re.compile(
    r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|PASS|KEY|APIKEY|CREDENTIALS?|AUTH|PRIVATE)(_|$)",
    re.IGNORECASE,
)


def is_secret(name: str, secret_names: frozenset[str]) -> bool:
    return name in secret_names or bool(SECRET_NAME.search(name))


def _env_mapping(env: Mapping[str, Any], secret_names: frozenset[str]) -> dict[str, Any]:
    return {k: MASK if is_secret(str(k), secret_names) else v for k, v in env.items()}


def _env_list(env: list[Any], secret_names: frozenset[str]) -> list[Any]:
    masked = []
    for item in env:
        secret = isinstance(item, Mapping) and is_secret(str(item.get("name", "")), secret_names)
        if secret and "value" in item:
            item = {**item, "value": MASK}
        masked.append(mask_data(item, secret_names))
    return masked


def mask_data(value: Any, secret_names: frozenset[str] = frozenset()) -> Any:
    """``value`` (JSON-like) with every secret value replaced by ``MASK``."""
    if isinstance(value, Mapping):
        secret_object = value.get("kind") == "Secret"
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "env" and isinstance(item, Mapping):
                out[key] = _env_mapping(item, secret_names)
            elif key == "env" and isinstance(item, list):
                out[key] = _env_list(item, secret_names)
            elif secret_object and key in ("data", "stringData") and isinstance(item, Mapping):
                out[key] = dict.fromkeys(item, MASK)
            else:
                out[key] = mask_data(item, secret_names)
        return out
    if isinstance(value, list | tuple):
        return [mask_data(item, secret_names) for item in value]
    return value

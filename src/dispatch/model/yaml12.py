"""YAML loading with YAML 1.2 booleans: only ``true``/``false`` are booleans.

PyYAML follows YAML 1.1, where ``on``, ``off``, ``yes`` and ``no`` are booleans too; the job
spec's recovery rules are written ``on: [preempted]``, which 1.1 would read as ``True:``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml


class Yaml12Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with YAML 1.2 core-schema booleans."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def load(text: str) -> Any:
    """One YAML document (``None`` for an empty one). Raises ``yaml.YAMLError``."""
    return yaml.load(text, Loader=Yaml12Loader)  # a SafeLoader subclass


def load_all(text: str) -> Iterator[Any]:
    """Every document of a multi-document YAML stream."""
    return yaml.load_all(text, Loader=Yaml12Loader)  # a SafeLoader subclass

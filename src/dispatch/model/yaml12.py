"""YAML loading with YAML 1.2 booleans: only ``true``/``false`` are booleans.

PyYAML follows YAML 1.1, where ``on``, ``off``, ``yes`` and ``no`` are booleans too; the job
spec's recovery rules are written ``on: [preempted]``, which 1.1 would read as ``True:``.

PyYAML is imported on the first load, not with this module: a spec given as a mapping and a
process that reads no configuration file never pay for it. ``YAMLError`` (what ``load``
raises) is ``yaml.YAMLError``, resolved on first use too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml
    from yaml import YAMLError as YAMLError


@functools.cache
def loader() -> type[yaml.SafeLoader]:
    """``yaml.SafeLoader`` with YAML 1.2 core-schema booleans (built once)."""
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
    return Yaml12Loader


def load(text: str) -> Any:
    """One YAML document (``None`` for an empty one). Raises ``YAMLError``."""
    import yaml

    return yaml.load(text, Loader=loader())  # a SafeLoader subclass


def load_all(text: str) -> Iterator[Any]:
    """Every document of a multi-document YAML stream."""
    import yaml

    return yaml.load_all(text, Loader=loader())  # a SafeLoader subclass


def __getattr__(name: str) -> Any:
    if name == "YAMLError":
        import yaml

        return yaml.YAMLError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

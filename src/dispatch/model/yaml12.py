"""YAML loading for input nobody vetted: YAML 1.2 scalars, bounded work, one error type.

* **YAML 1.2 core schema scalars**: only ``true``/``false`` are booleans (PyYAML follows
  YAML 1.1, where ``on``, ``off``, ``yes`` and ``no`` are booleans too, and the job spec's
  recovery rules are written ``on: [preempted]``), and no implicit timestamps (``2026-01-01``
  stays the text written; an impossible date is not a crash).
* **Bounded**: a document whose aliases expand to more than ``MAX_ALIAS_EXPANSION`` values
  (a "billion laughs" bomb is a few hundred bytes), a recursive alias, or nesting deeper than
  ``MAX_DEPTH`` is refused before anything walks it; a text longer than ``MAX_TEXT`` before
  it is parsed (dumps, which may be tens of megabytes, pass ``max_chars=None``).
* **One error type**: whatever the input, ``load`` raises ``YAMLError`` (bad ``!!int`` or
  ``!!timestamp`` values, unknown tags, nesting the parser cannot hold included), never a
  ``ValueError`` or ``RecursionError`` traceback.
* **Fast**: libyaml's parser (``CSafeLoader``) where PyYAML was built with it.

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

#: values aliases may add to one document, all aliases together
MAX_ALIAS_EXPANSION = 10_000
#: how deeply collections may nest (Kubernetes objects nest about 20 deep)
MAX_DEPTH = 200
#: characters a text may have (job specs, configuration files and runtimes are a few KB):
#: reading takes some 10 µs a value, so a text of this size is read in well under a second
MAX_TEXT = 256 * 1024

_DROPPED = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")


def _check_node(node: Any) -> None:
    """Refuse a composed document whose aliases expand too far, that refers to itself, or that
    nests too deeply. Iterative, and linear in the distinct nodes (aliases share nodes);
    scalars, most of the nodes, are counted without a visit of their own."""
    import yaml

    if node is None or isinstance(node, yaml.ScalarNode):
        return
    size: dict[int, int] = {}  # expanded values under each collection, itself included
    height: dict[int, int] = {}
    scalars: set[int] = set()
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(node, False)]
    while stack:
        current, done = stack.pop()
        key = id(current)
        children = _children(current)
        if done:
            on_path.discard(key)
            total, tallest = 1, 0
            for child in children:
                if id(child) in size:
                    total += size[id(child)]
                    tallest = max(tallest, height[id(child)])
                else:  # a scalar
                    total += 1
                    tallest = max(tallest, 1)
            size[key], height[key] = total, tallest + 1
            if tallest + 1 > MAX_DEPTH:
                raise yaml.YAMLError(f"nested more than {MAX_DEPTH} levels deep")
            continue
        if key in size:
            continue
        on_path.add(key)
        stack.append((current, True))
        for child in children:
            if isinstance(child, yaml.ScalarNode):
                scalars.add(id(child))
            elif id(child) in on_path:
                raise yaml.YAMLError("an alias refers to a value that contains it")
            elif id(child) not in size:
                stack.append((child, False))
    added = size[id(node)] - len(size) - len(scalars)
    if added > MAX_ALIAS_EXPANSION:
        raise yaml.YAMLError(
            f"aliases would expand this document by {added:,} values (at most "
            f"{MAX_ALIAS_EXPANSION:,}): write the values out instead of repeating anchors"
        )


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


@functools.cache
def loader() -> type[yaml.SafeLoader]:
    """A safe loader with YAML 1.2 core-schema scalars and the bounds above (built once)."""
    import yaml

    base: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Yaml12Loader(base):  # type: ignore[misc]
        """``SafeLoader`` (libyaml's where available) with YAML 1.2 scalars, bounded."""

        def get_single_node(self) -> Any:
            node = super().get_single_node()
            _check_node(node)
            return node

        def get_node(self) -> Any:
            node = super().get_node()
            _check_node(node)
            return node

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            try:
                return super().construct_object(node, deep=deep)
            except (ValueError, TypeError, OverflowError, AttributeError, LookupError):
                shown = repr(node.value)[:60] if isinstance(node, yaml.ScalarNode) else "value"
                raise yaml.constructor.ConstructorError(
                    None, None, f"{shown} is not a valid {node.tag}", node.start_mark
                ) from None

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[str] = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if key.value in seen:
                        raise yaml.constructor.ConstructorError(
                            "while reading a mapping",
                            node.start_mark,
                            f"the key {key.value[:60]!r} is given twice: keep one",
                            key.start_mark,
                        )
                    seen.add(key.value)
            return super().construct_mapping(node, deep=deep)

    Yaml12Loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Yaml12Loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    )
    return Yaml12Loader  # a SafeLoader in behaviour: only plain data is constructed


def _guarded(load: Any) -> Any:
    """Run ``load``; every failure of the input becomes ``YAMLError``."""
    import yaml

    try:
        return load()
    except yaml.YAMLError:
        raise
    except RecursionError:
        raise yaml.YAMLError(f"nested more than {MAX_DEPTH} levels deep") from None
    except (ValueError, TypeError, OverflowError, AttributeError, LookupError) as exc:
        # a tagged value that is not one (PyYAML constructors fail in all these ways)
        raise yaml.YAMLError(f"a value cannot be read: {exc}") from None


def _check_size(text: str, max_chars: int | None) -> None:
    import yaml

    if max_chars is not None and len(text) > max_chars:
        raise yaml.YAMLError(
            f"the text is {len(text):,} characters long, more than the {max_chars:,} read "
            "(job specs, configuration files and runtimes are a few kilobytes)"
        )


def load(text: str, *, max_chars: int | None = MAX_TEXT) -> Any:
    """One YAML document (``None`` for an empty one). Raises ``YAMLError``, also for a text
    longer than ``max_chars`` (``None``: any length)."""
    import yaml

    _check_size(text, max_chars)
    return _guarded(lambda: yaml.load(text, Loader=loader()))  # a SafeLoader subclass


def load_all(text: str, *, max_chars: int | None = MAX_TEXT) -> Iterator[Any]:
    """Every document of a multi-document YAML stream (read at once). Raises ``YAMLError``
    as ``load`` does."""
    import yaml

    _check_size(text, max_chars)
    documents = _guarded(lambda: list(yaml.load_all(text, Loader=loader())))
    return iter(documents)


def __getattr__(name: str) -> Any:
    if name == "YAMLError":
        import yaml

        return yaml.YAMLError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Reading a dump of Kubernetes objects, as ``kubectl get ... -o yaml`` (or ``-o json``) writes it.

Accepted: one ``kind: List`` (or any ``*List`` with ``items``), several of them, single
objects, as a multi-document YAML stream or a stream of JSON documents. Pure: text in,
objects out; ``ValueError`` says why a text is unusable.

Dumps of a whole namespace run to tens of megabytes, so: JSON is read with ``json``; YAML with
``yaml_rs`` (libyaml-class speed from Rust, YAML 1.2, alias expansion bounded, duplicate keys
refused), else with the bounded PyYAML loader of ``yaml12``. A 50 MB dump is read in seconds
(``python bench/run.py --only dumps``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

import yaml

from dispatch.model import yaml12
from dispatch.model.shown import clip


def parse_dump(text: str) -> list[dict[str, Any]]:
    """Every object of the dump, lists flattened, in the order written.

    Timestamps a YAML loader turned into datetimes are given back as RFC 3339 strings, so
    the objects are JSON-compatible (as the API would give them).
    """
    documents = _documents(text)
    objects: list[dict[str, Any]] = []
    for document in documents:
        for item in _flatten(document):
            objects.append(_plain(item))
    return objects


_DOCUMENT_MARK = re.compile(r"^---", re.MULTILINE)
#: a line that starts with this much indentation and block indicators (``- - - x``) may nest
#: deeper than ``yaml_rs`` reads without overflowing its stack (a crash past ~10,000 levels):
#: such a text goes to the PyYAML loader, whose depth is bounded
_DEEP_LINE = re.compile(r"^[ \t?:-]{1000}", re.MULTILINE)
#: events aliases may replay in a dump read by ``yaml_rs`` (about two a value)
MAX_REPLAYED_EVENTS = 20 * yaml12.MAX_ALIAS_EXPANSION


def _documents(text: str) -> list[Any]:
    if text.lstrip()[:1] in ("{", "["):
        try:
            return _json_stream(text)
        except ValueError:
            pass  # YAML in flow style, perhaps
    fast = None if _DEEP_LINE.search(text) else _fast_yaml(text)
    if fast is not None:
        return fast
    try:
        return [doc for doc in yaml12.load_all(text, max_chars=None) if doc is not None]
    except yaml.YAMLError as yaml_error:
        try:
            return _json_stream(text)
        except ValueError:
            raise ValueError(f"not valid YAML or JSON: {clip(str(yaml_error))}") from None
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def _fast_yaml(text: str) -> list[Any] | None:
    """The YAML stream's documents read by ``yaml_rs``; None when it is not installed."""
    try:
        import yaml_rs
    except ImportError:
        return None
    try:
        # kubectl writes no aliases: replaying 1,000,000 events (yaml_rs's own bound) takes
        # seconds; this bound refuses a bomb at once and is far above any hand-written dump
        limits = yaml_rs.AliasLimits(max_total_replayed_events=MAX_REPLAYED_EVENTS)
        loaded: Any = yaml_rs.loads(text, parse_datetime=False, alias_limits=limits)
    except yaml_rs.YAMLDecodeError as exc:
        raise ValueError(f"not valid YAML or JSON: {clip(str(exc))}") from None
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
    # it gives a stream of several documents as a list of them
    several = isinstance(loaded, list) and len(_DOCUMENT_MARK.findall(text)) >= 1
    documents = loaded if several else [loaded]
    return [doc for doc in documents if doc is not None]


def _json_stream(text: str) -> list[Any]:
    """Concatenated JSON documents (``{...}{...}`` or one per line)."""
    decoder = json.JSONDecoder()
    documents: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return documents
        try:
            document, position = decoder.raw_decode(text, position)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(str(exc)) from None
        documents.append(document)


def _flatten(document: Any, depth: int = 0) -> list[Mapping[str, Any]]:
    if not isinstance(document, Mapping) or depth > 4:
        return []
    kind = document.get("kind")
    items = document.get("items")
    if isinstance(items, list) and (not isinstance(kind, str) or kind.endswith("List")):
        found: list[Mapping[str, Any]] = []
        for item in items:
            found.extend(_flatten(item, depth + 1))
        return found
    return [document]


def _plain(value: Any, depth: int = 0) -> Any:
    if depth > 100:
        return None
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, datetime):
        text = value.isoformat()
        return text.replace("+00:00", "Z") if value.tzinfo else text + "Z"
    if isinstance(value, date):
        return value.isoformat()
    return value

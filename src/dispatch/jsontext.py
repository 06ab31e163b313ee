"""JSON text read and written in bulk (the watch streams, list responses, the records' rows)
through orjson, with the results of the standard library's ``json``.

* ``loads`` returns what ``json.loads`` returns. Text orjson refuses but ``json`` reads
  (``NaN``, ``Infinity``, an escaped lone surrogate) is read by ``json``, and so is text
  with a run of ``LONG_DIGITS`` digits anywhere: orjson reads an integer past 64 bits as a
  float, ``json`` as the integer (a run inside a string only costs the slower read). Text
  neither reads raises what ``json.loads`` raises (a ``ValueError``).
* ``dumps`` writes compact JSON with sorted keys, so equal values give equal text, as the
  records store writes every column of JSON. Non-ASCII characters are written as UTF-8, not
  escaped. A value orjson cannot write but ``json`` can (an integer past 64 bits, a key that
  is not a string, a lone surrogate) is written by ``json`` with the same options.
* ``same(a, b)``: whether two values write the same JSON text, keys in their order (a value
  orjson cannot write is never the same).
* ``plain(value)``: whether ``value`` is JSON data alone (dicts with string keys, lists and
  tuples, strings, integers of 64 bits, floats, booleans, None, enums (written as their
  values); no other subclass of these, no date, no dataclass): what a client sends as it is.
* ``encode`` writes compact JSON as UTF-8 bytes with the keys in their order, as an API server
  writes an object (Go's ``encoding/json`` writes non-ASCII as UTF-8 too); a value orjson
  cannot write is written by ``json`` (compact, non-ASCII escaped).

orjson decodes a Kubernetes object about one and a half times as fast as ``json`` and encodes
it about ten times as fast (``python -m bench.hot_paths``; design note 0001).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

#: digits in a row from which text may hold an integer orjson would read as a float (its
#: integers are 64-bit: -9223372036854775809 has 19 digits)
LONG_DIGITS = 19
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")  # a run of digits: a run of "0"
_LONG_RUN = b"0" * LONG_DIGITS


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, faster (see the module docstring)."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if _LONG_RUN not in raw.translate(_ZERO_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def dumps(value: Any) -> str:
    """Compact JSON with sorted keys (see the module docstring)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError, as json's own errors are
        return json.dumps(value, separators=(",", ":"), sort_keys=True)


def encode(value: Any) -> bytes:
    """Compact JSON, keys in their order, UTF-8 (see the module docstring)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` write the same JSON text (see the module docstring)."""
    try:
        return orjson.dumps(a) == orjson.dumps(b)
    except TypeError:
        return False


#: what orjson refuses to write for ``plain`` instead of converting it
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def plain(value: Any) -> bool:
    """Whether ``value`` is JSON data alone (see the module docstring)."""
    try:
        orjson.dumps(value, option=_PASSTHROUGH)
    except TypeError:
        return False
    return True

"""The functions Kubernetes adds to CEL, written for cel-python (:mod:`dispatch.testing.k8s.cel`).

cel-python implements the CEL standard definitions; kube-apiserver's environment adds cel-go's
extension libraries and its own (``k8s.io/apiserver/pkg/cel/library``). This module holds the
ones the emulator supports, each a plain function over cel-python values, keyed by the name CEL
calls it by (a receiver-style call ``x.f(y)`` reaches ``f(x, y)``). It also replaces four
standard operators whose cel-python behaviour differs from Kubernetes': equality is
heterogeneous (``1 == 1.0`` is true, ``1 == "a"`` is false, never an error) and ordering
compares int, uint and double with each other (``cel.CrossTypeNumericComparisons``).

A function signals a CEL runtime error by returning a ``CELEvalError`` (cel-python's convention:
an error is a value that propagates); the message is the one cel-go gives where it matters.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import parse_qs, urlsplit

import re2
from celpy import celtypes
from celpy.evaluation import CELEvalError, base_functions

Value = Any
CelFunction = Callable[..., Value]


def _error(message: str, kind: type[Exception] = TypeError) -> CELEvalError:
    return CELEvalError(message, kind, (message,))


def _no_overload(name: str, *args: Value) -> CELEvalError:
    kinds = ", ".join(type_name(a) for a in args)
    return _error(f"no matching overload for '{name}' applied to '({kinds})'")


def type_name(value: Value) -> str:
    """The CEL type name of a cel-python value (``int``, ``string``, ``map``, ...)."""
    if value is None:
        return "null_type"
    if isinstance(value, Quantity):
        return "kubernetes.Quantity"
    if isinstance(value, URL):
        return "kubernetes.URL"
    for cls, name in _TYPE_NAMES:
        if isinstance(value, cls):
            return name
    return type(value).__name__


_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (celtypes.BoolType, "bool"),
    (bool, "bool"),
    (celtypes.UintType, "uint"),
    (celtypes.IntType, "int"),
    (int, "int"),
    (celtypes.DoubleType, "double"),
    (float, "double"),
    (str, "string"),
    (bytes, "bytes"),
    (list, "list"),
    (dict, "map"),
)


def _is_number(value: Value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool | celtypes.BoolType)


# --- equality and ordering ---------------------------------------------------------------------


def equals(a: Value, b: Value) -> bool:
    """CEL heterogeneous equality: numbers by value across int/uint/double, lists element-wise,
    maps by key set and values, values of different types unequal."""
    if _is_number(a) and _is_number(b):
        if isinstance(a, float) or isinstance(b, float):
            return float(a) == float(b)
        return int(a) == int(b)
    if type_name(a) != type_name(b):
        return False
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.amount == b.amount
    if isinstance(a, list):
        return len(a) == len(b) and all(equals(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            any(equals(k, k2) and equals(v, b[k2]) for k2 in b) for k, v in a.items()
        )
    return bool(a == b)


def _eq(a: Value, b: Value) -> Value:
    for v in (a, b):
        if isinstance(v, CELEvalError):
            return v
    return celtypes.BoolType(equals(a, b))


def _ne(a: Value, b: Value) -> Value:
    result = _eq(a, b)
    return result if isinstance(result, CELEvalError) else celtypes.BoolType(not result)


def _ordering(name: str, standard: CelFunction) -> CelFunction:
    def compare(a: Value, b: Value) -> Value:
        if _is_number(a) and _is_number(b) and type_name(a) != type_name(b):
            return standard(celtypes.DoubleType(float(a)), celtypes.DoubleType(float(b)))
        return standard(a, b)

    compare.__name__ = name
    return compare


def _in(item: Value, container: Value) -> Value:
    if isinstance(container, list):
        return celtypes.BoolType(any(equals(item, x) for x in container))
    if isinstance(container, dict):
        return celtypes.BoolType(any(equals(item, k) for k in container))
    return _no_overload("@in", item, container)


# --- strings (cel-go ext.Strings, version 2) --------------------------------------------------


def _char_at(s: Value, i: Value) -> Value:
    if not isinstance(s, str) or not _is_number(i):
        return _no_overload("charAt", s, i)
    if i < 0 or i > len(s):
        return _error(f"index out of range: {i}", IndexError)
    return celtypes.StringType(s[i : i + 1])


def _index_of(target: Value, item: Value, offset: Value = 0) -> Value:
    if isinstance(target, str) and isinstance(item, str):
        if offset < 0 or offset > len(target):
            return _error(f"index out of range: {offset}", IndexError)
        return celtypes.IntType(target.find(item, offset))
    if isinstance(target, list):
        return celtypes.IntType(next((i for i, x in enumerate(target) if equals(x, item)), -1))
    return _no_overload("indexOf", target, item)


def _last_index_of(target: Value, item: Value, offset: Value = None) -> Value:
    if isinstance(target, str) and isinstance(item, str):
        end = len(target) if offset is None else offset + len(item)
        return celtypes.IntType(target.rfind(item, 0, end))
    if isinstance(target, list):
        found = [i for i, x in enumerate(target) if equals(x, item)]
        return celtypes.IntType(found[-1] if found else -1)
    return _no_overload("lastIndexOf", target, item)


def _string_method(name: str, method: Callable[..., Any]) -> CelFunction:
    def call(s: Value, *args: Value) -> Value:
        if not isinstance(s, str) or not all(isinstance(a, str | int) for a in args):
            return _no_overload(name, s, *args)
        return _to_cel(method(str(s), *args))

    call.__name__ = name
    return call


def _lower_ascii(s: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in s)


def _upper_ascii(s: str) -> str:
    return "".join(c.upper() if c.isascii() else c for c in s)


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    return s.replace(old, new, n)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        return parts if n < 0 or n >= len(parts) else [*parts[: n - 1], s[n - 1 :]]
    return s.split(sep, n - 1 if n > 0 else -1)


def _substring(s: str, start: int, end: int | None = None) -> Value:
    stop = len(s) if end is None else end
    if start < 0 or stop > len(s) or start > stop:
        return _error(f"index out of range: {start}", IndexError)
    return s[start:stop]


_UNICODE_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _trim(s: str) -> str:
    return s.strip(_UNICODE_SPACE)


def _join(items: Value, sep: Value = "") -> Value:
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return _no_overload("join", items, sep)
    return celtypes.StringType(str(sep).join(items))


# --- lists (k8s library.Lists) ----------------------------------------------------------------


def _comparable(items: Value, name: str) -> Value | None:
    if not isinstance(items, list):
        return _no_overload(name, items)
    return None


def _is_sorted(items: Value) -> Value:
    bad = _comparable(items, "isSorted")
    if bad is not None:
        return bad
    lt = _ordering("_<_", base_functions["_<_"])
    for a, b in itertools.pairwise(items):
        less = lt(b, a)
        if isinstance(less, CELEvalError):
            return less
        if less:
            return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _sum(items: Value) -> Value:
    bad = _comparable(items, "sum")
    if bad is not None:
        return bad
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for x in items[1:]:
        total = base_functions["_+_"](total, x)
    return total


def _extreme(name: str, op: str) -> CelFunction:
    """``min``/``max`` of a list (kube's library.Lists); an empty list is an error."""
    better = _ordering(op, base_functions[op])

    def call(items: Value) -> Value:
        if isinstance(items, CELEvalError):
            return items
        bad = _comparable(items, name)
        if bad is not None:
            return bad
        if not items:
            return _error(f"{name}(list) called on empty list", ValueError)
        best = items[0]
        for x in items[1:]:
            found = better(x, best)
            if isinstance(found, CELEvalError):
                return found
            if found:
                best = x
        return best

    call.__name__ = name
    return call


# --- regex (k8s library.Regex) ----------------------------------------------------------------


def _find(s: Value, pattern: Value) -> Value:
    if not isinstance(s, str) or not isinstance(pattern, str):
        return _no_overload("find", s, pattern)
    try:
        match = re2.search(pattern, s)
    except re2.error as ex:
        return _error(f"invalid regex: {ex}", ValueError)
    return celtypes.StringType(match.group(0) if match else "")


def _find_all(s: Value, pattern: Value, limit: Value = -1) -> Value:
    if not isinstance(s, str) or not isinstance(pattern, str):
        return _no_overload("findAll", s, pattern)
    try:
        found = [m.group(0) for m in re2.finditer(pattern, s)]
    except re2.error as ex:
        return _error(f"invalid regex: {ex}", ValueError)
    if limit >= 0:
        found = found[:limit]
    return _to_cel(found)


# --- URLs (k8s library.URLs) -------------------------------------------------------------------


class URL(celtypes.StringType):
    """A parsed URL (``url("https://example.com:80/p?q=1")``); kept as its text."""


def _parse_url(text: str) -> URL | None:
    if not text.startswith("/") and "://" not in text:
        return None
    try:
        parts = urlsplit(text)
        _ = parts.port
    except ValueError:
        return None
    if "://" in text and not parts.scheme:
        return None
    return URL(text)


def _url(s: Value) -> Value:
    if not isinstance(s, str):
        return _no_overload("url", s)
    parsed = _parse_url(str(s))
    if parsed is None:
        return _error(f"URL parse error during conversion from string: {s}", ValueError)
    return parsed


def _is_url(s: Value) -> Value:
    if not isinstance(s, str):
        return _no_overload("isURL", s)
    return celtypes.BoolType(_parse_url(str(s)) is not None)


def _url_part(name: str, part: Callable[[str], Any]) -> CelFunction:
    def call(u: Value) -> Value:
        if not isinstance(u, URL):
            return _no_overload(name, u)
        return _to_cel(part(str(u)))

    call.__name__ = name
    return call


def _host(text: str) -> str:
    return urlsplit(text).netloc.rpartition("@")[2]


def _hostname(text: str) -> str:
    host = _host(text)
    if host.startswith("["):
        return host[1 : host.index("]")]
    return host.rpartition(":")[0] if ":" in host else host


def _port(text: str) -> str:
    host = _host(text)
    tail = host.rpartition("]")[2] if host.startswith("[") else host
    return tail.rpartition(":")[2] if ":" in tail else ""


def _query(text: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(text).query, keep_blank_values=True)


# --- quantities (k8s library.Quantity) --------------------------------------------------------

_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_SUFFIX = {
    None: Decimal(1),
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_INT64 = 2**63


class Quantity(celtypes.StringType):
    """A ``resource.Quantity`` (``quantity("1.5Gi")``): its text, and its exact value."""

    amount: Decimal

    @classmethod
    def parse(cls, text: str) -> Quantity | None:
        match = _QUANTITY.match(text)
        if match is None:
            return None
        number, suffix = match.groups()
        try:
            scale = _SUFFIX[suffix] if suffix is None or suffix[0] not in "eE" else None
            amount = Decimal(number) * (
                scale if scale is not None else Decimal(10) ** int(suffix[1:])
            )
        except (InvalidOperation, KeyError, ValueError):
            return None
        made = cls(text)
        made.amount = amount
        return made

    @classmethod
    def of(cls, amount: Decimal) -> Quantity:
        made = cls(format(amount.normalize(), "f"))
        made.amount = amount
        return made


def _quantity(s: Value) -> Value:
    if not isinstance(s, str):
        return _no_overload("quantity", s)
    parsed = Quantity.parse(str(s))
    if parsed is None:
        return _error(
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ValueError,
        )
    return parsed


def _is_quantity(s: Value) -> Value:
    if not isinstance(s, str):
        return _no_overload("isQuantity", s)
    return celtypes.BoolType(Quantity.parse(str(s)) is not None)


def _operand(q: Value) -> Decimal | None:
    if isinstance(q, Quantity):
        return q.amount
    if _is_number(q) and not isinstance(q, float):
        return Decimal(int(q))
    return None


def _quantity_op(name: str, op: Callable[[Decimal, Decimal], Value]) -> CelFunction:
    def call(q: Value, other: Value) -> Value:
        a, b = _operand(q), _operand(other)
        if not isinstance(q, Quantity) or a is None or b is None:
            return _no_overload(name, q, other)
        return op(a, b)

    call.__name__ = name
    return call


def _quantity_unary(name: str, op: Callable[[Decimal], Value]) -> CelFunction:
    def call(q: Value) -> Value:
        if not isinstance(q, Quantity):
            return _no_overload(name, q)
        return op(q.amount)

    call.__name__ = name
    return call


def _as_integer(amount: Decimal) -> Value:
    if amount != amount.to_integral_value() or not -_INT64 <= amount < _INT64:
        return _error("cannot convert value to integer", ValueError)
    return celtypes.IntType(int(amount))


def _sign(amount: Decimal) -> Value:
    return celtypes.IntType((amount > 0) - (amount < 0))


# --- sets (cel-go ext.Sets) ----------------------------------------------------------------------


def _sets_contains(a: Value, b: Value) -> Value:
    if not isinstance(a, list) or not isinstance(b, list):
        return _no_overload("sets.contains", a, b)
    return celtypes.BoolType(all(any(equals(x, y) for y in a) for x in b))


def _sets_equivalent(a: Value, b: Value) -> Value:
    left, right = _sets_contains(a, b), _sets_contains(b, a)
    if isinstance(left, CELEvalError):
        return left
    return celtypes.BoolType(bool(left) and bool(right))


def _sets_intersects(a: Value, b: Value) -> Value:
    if not isinstance(a, list) or not isinstance(b, list):
        return _no_overload("sets.intersects", a, b)
    return celtypes.BoolType(any(equals(x, y) for x in a for y in b))


# --- conversions ---------------------------------------------------------------------------------


def _to_cel(value: Any) -> Value:
    """A Python result (str, int, bool, list, dict) as a cel-python value."""
    if isinstance(value, CELEvalError) or value is None:
        return value
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, Mapping):
        return celtypes.MapType({_to_cel(k): _to_cel(v) for k, v in value.items()})
    if isinstance(value, Sequence):
        return celtypes.ListType([_to_cel(v) for v in value])
    return value


#: Every function this module adds or replaces, by the name CEL calls it.
FUNCTIONS: dict[str, CelFunction] = {
    "_==_": _eq,
    "_!=_": _ne,
    "_<_": _ordering("_<_", base_functions["_<_"]),
    "_<=_": _ordering("_<=_", base_functions["_<=_"]),
    "_>_": _ordering("_>_", base_functions["_>_"]),
    "_>=_": _ordering("_>=_", base_functions["_>=_"]),
    "_in_": _in,
    # strings
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _string_method("lowerAscii", _lower_ascii),
    "upperAscii": _string_method("upperAscii", _upper_ascii),
    "replace": _string_method("replace", _replace),
    "split": _string_method("split", _split),
    "substring": _string_method("substring", _substring),
    "trim": _string_method("trim", _trim),
    "join": _join,
    # lists
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _extreme("min", "_<_"),
    "max": _extreme("max", "_>_"),
    # regex
    "find": _find,
    "findAll": _find_all,
    # URLs
    "url": _url,
    "isURL": _is_url,
    "getScheme": _url_part("getScheme", lambda t: urlsplit(t).scheme),
    "getHost": _url_part("getHost", _host),
    "getHostname": _url_part("getHostname", _hostname),
    "getPort": _url_part("getPort", _port),
    "getEscapedPath": _url_part("getEscapedPath", lambda t: urlsplit(t).path),
    "getQuery": _url_part("getQuery", _query),
    # quantities
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "sign": _quantity_unary("sign", _sign),
    "isInteger": _quantity_unary(
        "isInteger", lambda a: celtypes.BoolType(not isinstance(_as_integer(a), CELEvalError))
    ),
    "asInteger": _quantity_unary("asInteger", _as_integer),
    "asApproximateFloat": _quantity_unary(
        "asApproximateFloat", lambda a: celtypes.DoubleType(float(a))
    ),
    "add": _quantity_op("add", lambda a, b: Quantity.of(a + b)),
    "sub": _quantity_op("sub", lambda a, b: Quantity.of(a - b)),
    "compareTo": _quantity_op("compareTo", lambda a, b: celtypes.IntType((a > b) - (a < b))),
    "isGreaterThan": _quantity_op("isGreaterThan", lambda a, b: celtypes.BoolType(a > b)),
    "isLessThan": _quantity_op("isLessThan", lambda a, b: celtypes.BoolType(a < b)),
    # sets (namespaced: ``sets.contains(a, b)``)
    "sets.contains": _sets_contains,
    "sets.equivalent": _sets_equivalent,
    "sets.intersects": _sets_intersects,
}

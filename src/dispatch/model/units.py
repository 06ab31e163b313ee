"""Parsing of durations (``30m``, ``1h30m``, ``45s``) and Kubernetes quantities (``4Gi``)."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from dispatch.model.shown import show

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_UNIT_SECONDS = (86400, 3600, 60, 1)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([A-Za-z]{0,2})$")
_CPU = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(m?)$")


def parse_duration(text: str | int | float) -> float:
    """Seconds in a duration such as ``90s``, ``30m``, ``1h30m``, ``2d`` or a bare number of seconds.

    Raises ``ValueError`` naming the accepted forms.
    """
    if isinstance(text, bool):
        raise ValueError("a duration is a string such as '30m' or a number of seconds")
    if isinstance(text, int | float):
        seconds = _float(text)
        if not math.isfinite(seconds) or seconds <= 0:
            raise ValueError("a duration must be a positive, finite number of seconds")
        return seconds
    if not isinstance(text, str):
        raise ValueError("a duration is a string such as '30m' or a number of seconds")
    value = text.strip()
    if value.isdecimal():
        seconds = float(value)  # any number of digits: past float's range, inf (refused below)
    else:
        match = _DURATION.match(value)
        if not value or not match or not any(match.groups()):
            raise ValueError(
                f"{show(text)} is not a duration; write it as e.g. '45s', '30m', '1h30m' or '2d'"
            )
        seconds = sum(
            float(g) * unit for g, unit in zip(match.groups(), _UNIT_SECONDS, strict=True) if g
        )
    if not math.isfinite(seconds):
        raise ValueError(f"{show(text)} is longer than any duration dispatch can wait")
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    return seconds


def _float(number: int | float) -> float:
    """``float(number)``; infinity for an integer past float's range (``float`` raises)."""
    try:
        return float(number)
    except OverflowError:
        return math.inf if number > 0 else -math.inf


def format_duration(seconds: float) -> str:
    """The shortest duration text that parses back to ``seconds`` (whole seconds)."""
    remaining = int(seconds)
    parts = []
    for suffix, unit in zip("dhms", _UNIT_SECONDS, strict=True):
        count, remaining = divmod(remaining, unit)
        if count:
            parts.append(f"{count}{suffix}")
    return "".join(parts) or "0s"


#: the largest memory quantity a cgroup limit or a Kubernetes quantity holds (int64 bytes)
MAX_MEMORY = 2**63 - 1


def parse_memory(text: str | int) -> int:
    """Bytes in a Kubernetes memory quantity: ``4Gi``, ``512Mi``, ``1G``, ``1000``."""
    if isinstance(text, bool):
        raise ValueError("memory is a quantity such as '4Gi' or '512Mi'")
    if isinstance(text, int):
        if text <= 0:
            raise ValueError("memory must be positive")
        if text > MAX_MEMORY:
            raise ValueError(
                "that many bytes is more than a 64-bit byte count holds; at most 8Ei - 1"
            )
        return text
    if not isinstance(text, str):
        raise ValueError("memory is a quantity such as '4Gi' or '512Mi'")
    match = _QUANTITY.match(text.strip())
    if not match:
        raise ValueError(
            f"{show(text)} is not a memory quantity; write it as e.g. '4Gi' or '512Mi'"
        )
    number, suffix = match.groups()
    if suffix and suffix not in _BINARY and suffix not in _DECIMAL:
        raise ValueError(
            f"{show(text)} has an unknown unit {suffix!r}; use Ki, Mi, Gi, Ti or k, M, G, T"
        )
    try:
        amount = Decimal(number) * (_BINARY.get(suffix) or _DECIMAL.get(suffix) or 1)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ValueError(f"{show(text)} is not a memory quantity") from exc
    if amount <= 0:
        raise ValueError("memory must be positive")
    if amount > MAX_MEMORY:
        raise ValueError(
            f"{show(text)} is more memory than a 64-bit byte count holds (cgroups and Kubernetes "
            "would wrap it); at most 8Ei - 1"
        )
    return int(amount)


def parse_cpu(text: str | int | float) -> float:
    """CPUs in a Kubernetes CPU quantity: ``2``, ``0.5``, ``500m``."""
    if isinstance(text, bool):
        raise ValueError("cpu is a number such as 2, '0.5' or '500m'")
    if isinstance(text, int | float):
        value = _float(text)
    elif not isinstance(text, str):
        raise ValueError("cpu is a number such as 2, '0.5' or '500m'")
    else:
        match = _CPU.match(text.strip())
        if not match:
            raise ValueError(
                f"{show(text)} is not a CPU quantity; write it as e.g. '2', '0.5' or '500m'"
            )
        value = float(match.group(1)) / (1000 if match.group(2) else 1)
    if not math.isfinite(value) or value <= 0:
        raise ValueError("cpu must be a positive, finite number")
    return value


def quantity_value(text: object) -> int:
    """A Kubernetes quantity rounded up to a whole number, as Go's ``Quantity.Value()``
    (``500m`` -> 1, ``1Gi`` -> 1073741824, ``2`` -> 2); 0 for what is not a quantity."""
    try:
        s = str(text).strip()
    except ValueError:  # an integer past the 4,300 digits Python prints
        return 0
    scales: dict[str, Decimal | int] = {"m": Decimal("0.001"), **_BINARY, **_DECIMAL}
    number: str = s
    scale: Decimal | int = 1
    for suffix in sorted(scales, key=len, reverse=True):
        if s.endswith(suffix):
            number, scale = s[: -len(suffix)], scales[suffix]
            break
    try:
        return math.ceil(Decimal(number) * scale)
    except (InvalidOperation, ValueError, OverflowError):
        return 0


def format_bytes(count: Any) -> str:
    """A byte count as people read it: ``4Gi``, ``512Mi`` when exact, else ``3.7 GiB``;
    anything that is not a whole number is shown as given."""
    if isinstance(count, bool) or not isinstance(count, int):
        return str(count)
    units = (
        ("Ei", 2**60),
        ("Pi", 2**50),
        ("Ti", 2**40),
        ("Gi", 2**30),
        ("Mi", 2**20),
        ("Ki", 2**10),
    )
    for suffix, size in units:
        if count >= size and count % size == 0:
            return f"{count // size}{suffix}"
    for suffix, size in units:
        if count >= size:
            return f"{count / size:.1f} {suffix}B"
    return f"{count} bytes"

"""Kubernetes resource quantities as Trainer's PodGroup plugins add and print them.

Follows apimachinery's ``resource.Quantity`` (``ParseQuantity``, ``Add``, ``Mul`` and the
canonical ``String``) and component-helpers' ``resource.PodRequests``: a value keeps the
format of the text it was parsed from (binary ``Ki``..``Ei``, decimal ``n``..``E``, or an
exponent ``e3``), a sum takes the format of its first addend, and the canonical text is the
shortest exact integer mantissa with a suffix (``1250m``, ``2560Mi``, ``3Gi``, ``32``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

_TEXT = re.compile(r"^([+-]?[0-9]*\.?[0-9]*)([eE][+-]?[0-9]+|[a-zA-Z]*)$")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX = {"": 0, **_BINARY}
_BINARY_BY_EXP = {exp: suffix for suffix, exp in _BINARY_SUFFIX.items()}
#: resources a pod-level ``spec.resources.requests`` may set (``IsSupportedPodLevelResource``)
POD_LEVEL = ("cpu", "memory")


class Format(StrEnum):
    """How a quantity prints (apimachinery ``resource.Format``)."""

    BINARY_SI = "BinarySI"  # 1Ki, 2Gi
    DECIMAL_SI = "DecimalSI"  # 500m, 2k
    DECIMAL_EXPONENT = "DecimalExponent"  # 1e3


@dataclass(frozen=True)
class Quantity:
    """An exact amount and the format it prints in."""

    value: Fraction
    format: Format = Format.DECIMAL_SI

    @classmethod
    def parse(cls, text: object) -> Quantity:
        """``resource.ParseQuantity``; a bare number is DecimalSI."""
        raw = str(text).strip()
        found = _TEXT.match(raw)
        if not found or found.group(1) in ("", "+", "-", "."):
            raise ValueError(f"quantities must match the regular expression: {raw!r}")
        number, suffix = Fraction(found.group(1)), found.group(2)
        if suffix in _BINARY:
            return cls(number * 2 ** _BINARY[suffix], Format.BINARY_SI)
        if suffix in _DECIMAL:
            return cls(number * Fraction(10) ** _DECIMAL[suffix], Format.DECIMAL_SI)
        if suffix[:1] in ("e", "E"):
            return cls(number * Fraction(10) ** int(suffix[1:]), Format.DECIMAL_EXPONENT)
        raise ValueError(f"unable to parse quantity's suffix: {raw!r}")

    def add(self, other: Quantity) -> Quantity:
        """``Quantity.Add``: a zero amount takes the other's format."""
        fmt = other.format if self.value == 0 else self.format
        return Quantity(self.value + other.value, fmt)

    def mul(self, times: int) -> Quantity:
        return Quantity(self.value * times, self.format)

    def __str__(self) -> str:
        """The canonical text (``Quantity.String``)."""
        if self.value == 0:
            return "0"
        fmt = self.format
        if fmt is Format.BINARY_SI and (abs(self.value) < 1024 or self.value.denominator != 1):
            fmt = Format.DECIMAL_SI
        if fmt is Format.BINARY_SI:
            return _binary_text(int(self.value))
        return _decimal_text(self.value, fmt)


def _binary_text(amount: int) -> str:
    exponent = 0
    while amount % 1024 == 0 and exponent < 60:
        amount //= 1024
        exponent += 10
    return f"{amount}{_BINARY_BY_EXP[exponent]}"


def _decimal_text(value: Fraction, fmt: Format) -> str:
    """Integer mantissa, exponent a multiple of 3 (nano is the finest, rounding up)."""
    exponent = -9
    scaled = value * 10**9
    mantissa = -((-scaled.numerator) // scaled.denominator)  # ceil, as Go rounds up
    while mantissa != 0 and mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt is Format.DECIMAL_SI and exponent in _DECIMAL_SUFFIX:
        return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"
    return f"{mantissa}e{exponent}" if exponent else str(mantissa)


ResourceList = dict[str, Quantity]


def parse_list(found: object) -> ResourceList:
    """A ``ResourceList`` read from an object (names to quantity text)."""
    if not isinstance(found, Mapping):
        return {}
    return {str(name): Quantity.parse(text) for name, text in found.items()}


def add_into(total: ResourceList, more: Mapping[str, Quantity]) -> None:
    """``addResourceList``: each amount added to the total's."""
    for name, quantity in more.items():
        total[name] = total[name].add(quantity) if name in total else quantity


def max_into(total: ResourceList, more: Mapping[str, Quantity]) -> None:
    """``maxResourceList``: each amount raised to ``more``'s where that is larger."""
    for name, quantity in more.items():
        if name not in total or quantity.value > total[name].value:
            total[name] = quantity


def _requests(container: Mapping[str, Any]) -> ResourceList:
    resources = container.get("resources")
    return parse_list(resources.get("requests") if isinstance(resources, Mapping) else None)


def pod_requests(pod_spec: Mapping[str, Any]) -> ResourceList:
    """What one pod of ``pod_spec`` requests (``resource.PodRequests``, default options):
    the containers' requests summed; each init container's (plus the sidecars started before
    it) taken where larger; sidecars (``restartPolicy: Always``) added; pod-level requests of
    cpu and memory replace the sum; the RuntimeClass overhead added."""
    total: ResourceList = {}
    for container in pod_spec.get("containers") or []:
        add_into(total, _requests(container))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in pod_spec.get("initContainers") or []:
        wants = _requests(container)
        if container.get("restartPolicy") == "Always":
            add_into(total, wants)
            add_into(sidecars, wants)
            wants = dict(sidecars)
        else:
            step = dict(wants)
            add_into(step, sidecars)
            wants = step
        max_into(init_peak, wants)
    max_into(total, init_peak)
    pod_level = _requests(pod_spec)
    for name in POD_LEVEL:
        if name in pod_level:
            total[name] = pod_level[name]
    add_into(total, parse_list(pod_spec.get("overhead")))
    return total


def as_text(resources: Mapping[str, Quantity]) -> dict[str, str]:
    """A ``ResourceList`` as an object stores it, names sorted."""
    return {name: str(resources[name]) for name in sorted(resources)}

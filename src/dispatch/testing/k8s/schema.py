"""Structural-schema validation of custom resources with the ``kubeflow-trainer-api`` models.

The generated pydantic models describe the CRD OpenAPI schemas of Trainer (v2.3) and JobSet.
Their errors are translated into the field errors a CRD's structural schema produces
(``spec.suspend: Invalid value: "string": spec.suspend in body must be of type boolean:
"string"``; ``spec.runtimeRef.name: Required value``). Scalar wire types the generator turned
into model classes (``resource.Quantity``, ``IntOrString``) are checked here instead.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError

from dispatch.testing.k8s.errors import FieldError, FieldErrorType

_TYPE_NAMES = {
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "float_parsing": "number",
    "string_type": "string",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
}
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[munkMGTPE])?$")
_SCALAR_MODELS = (
    "IoK8sApimachineryPkgApiResourceQuantity",
    "IoK8sApimachineryPkgUtilIntstrIntOrString",
)
_QUANTITY_MAPS = ("limits", "requests", "minResources", "capacity", "allocatable")


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


def path_of(prefix: str, loc: tuple[int | str, ...]) -> str:
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def model_errors(model: type[BaseModel], value: Any, prefix: str) -> list[FieldError]:
    """Schema problems of ``value`` (the JSON at ``prefix``) against ``model``."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        return [e for e in (_translate(err, prefix) for err in exc.errors()) if e is not None]
    return []


def _translate(err: Any, prefix: str) -> FieldError | None:
    path = path_of(prefix, tuple(err["loc"]))
    kind = err["type"]
    given = err.get("input")
    if any(name in err.get("msg", "") for name in _SCALAR_MODELS):
        return _scalar_error(path, given)
    if kind == "missing":
        return FieldError.required(path)
    expected = _TYPE_NAMES.get(kind)
    if expected:
        actual = json_type(given)
        return FieldError.invalid(
            path, actual, f'{path} in body must be of type {expected}: "{actual}"'
        )
    return FieldError.invalid(
        path, given if isinstance(given, str | int | float | bool) else json_type(given), err["msg"]
    )


def _scalar_error(path: str, given: Any) -> FieldError | None:
    if isinstance(given, bool) or not isinstance(given, str | int | float):
        actual = json_type(given)
        return FieldError.invalid(
            path, actual, f'{path} in body must be of type string: "{actual}"'
        )
    last = path.rsplit(".", 2)
    in_quantity_map = len(last) >= 2 and last[-2] in _QUANTITY_MAPS
    if in_quantity_map and isinstance(given, str) and not _QUANTITY.match(given):
        return FieldError.invalid(
            path,
            given,
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )
    return None


def max_items(path: str, value: Any, limit: int) -> list[FieldError]:
    if isinstance(value, list) and len(value) > limit:
        return [FieldError.too_many(path, len(value), limit)]
    return []


def minimum(path: str, value: Any, low: int) -> list[FieldError]:
    if isinstance(value, int) and not isinstance(value, bool) and value < low:
        return [
            FieldError.invalid(
                path, value, f"{path} in body should be greater than or equal to {low}"
            )
        ]
    return []


def max_length(path: str, value: Any, limit: int) -> list[FieldError]:
    if isinstance(value, str) and len(value) > limit:
        return [FieldError.too_long(path, limit)]
    return []


def pattern(path: str, value: Any, regex: str) -> list[FieldError]:
    if isinstance(value, str) and not re.match(regex, value):
        return [FieldError.invalid(path, value, f"{path} in body should match '{regex}'")]
    return []


def unique_keys(path: str, items: Any, key: str) -> list[FieldError]:
    """list-map duplicates, as ``+listType=map`` reports them."""
    seen: set[Any] = set()
    out = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        k = item.get(key) if isinstance(item, dict) else None
        if k in seen:
            out.append(FieldError(FieldErrorType.DUPLICATE, f"{path}[{i}]", "", {key: k}))
        seen.add(k)
    return out

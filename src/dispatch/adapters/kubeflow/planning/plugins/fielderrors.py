"""Trainer's webhook messages: apimachinery ``field.Error`` and ``ErrorList.ToAggregate``.

Follows k8s.io/apimachinery v0.36 ``pkg/util/validation/field/errors.go`` (``Error.Error``:
``<path>: <type>: <detail>`` for a type shown without its value) and ``pkg/util/errors``
(one error alone, several as ``[a, b]``, repeats dropped).
"""

from __future__ import annotations


def forbidden(path: str, detail: str) -> str:
    """``field.Forbidden(path, detail)``."""
    return f"{path}: Forbidden: {detail}"


def aggregate(errors: list[str]) -> str:
    """The message of ``ErrorList.ToAggregate()`` ("" for no errors)."""
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        return unique[0]
    return f"[{', '.join(unique)}]" if unique else ""

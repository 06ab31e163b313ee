"""API errors as the Kubernetes API server writes them: ``Status`` objects with causes.

Every failure of a store or server operation is an :class:`ApiError`; ``status()`` renders the
exact ``Status`` body (kind ``Status``, apiVersion ``v1``, status ``Failure``, message, reason,
details, code). Field problems are :class:`FieldError` values whose ``message`` follows
``k8s.io/apimachinery/pkg/util/validation/field`` ("Invalid value: ...", "Required value", ...).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

JsonObj = dict[str, Any]


class FieldErrorType(Enum):
    """The cause reasons of ``field.ErrorType`` and the text each message starts with."""

    REQUIRED = ("FieldValueRequired", "Required value")
    INVALID = ("FieldValueInvalid", "Invalid value")
    NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
    FORBIDDEN = ("FieldValueForbidden", "Forbidden")
    TOO_LONG = ("FieldValueTooLong", "Too long")
    TOO_MANY = ("FieldValueTooMany", "Too many")
    DUPLICATE = ("FieldValueDuplicate", "Duplicate value")

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def text(self) -> str:
        return self.value[1]


_VALUE_SHOWN = {FieldErrorType.INVALID, FieldErrorType.NOT_SUPPORTED, FieldErrorType.DUPLICATE}
_NO_VALUE = object()


@dataclass(frozen=True)
class FieldError:
    """One problem with one field. ``path`` is dotted (``spec.trainer.numNodes``); ``"<nil>"``
    stands for the object root, as Kubernetes prints it for object-level CEL rules."""

    type: FieldErrorType
    path: str
    detail: str = ""
    value: Any = _NO_VALUE

    @classmethod
    def invalid(cls, path: str, value: Any, detail: str) -> FieldError:
        return cls(FieldErrorType.INVALID, path, detail, value)

    @classmethod
    def required(cls, path: str, detail: str = "") -> FieldError:
        return cls(FieldErrorType.REQUIRED, path, detail)

    @classmethod
    def forbidden(cls, path: str, detail: str) -> FieldError:
        return cls(FieldErrorType.FORBIDDEN, path, detail)

    @classmethod
    def not_supported(cls, path: str, value: Any, allowed: Sequence[str]) -> FieldError:
        listed = ", ".join(json.dumps(a) for a in allowed)
        return cls(FieldErrorType.NOT_SUPPORTED, path, f"supported values: {listed}", value)

    @classmethod
    def too_many(cls, path: str, actual: int, limit: int) -> FieldError:
        return cls(FieldErrorType.TOO_MANY, path, f"{actual}: must have at most {limit} items")

    @classmethod
    def too_long(cls, path: str, limit: int) -> FieldError:
        return cls(FieldErrorType.TOO_LONG, path, f"may not be more than {limit} bytes")

    @property
    def body(self) -> str:
        """The message without the field, as in ``StatusCause.message``."""
        text = self.type.text
        if self.type in _VALUE_SHOWN and self.value is not _NO_VALUE:
            text += f": {_render_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.path}: {self.body}"


def _render_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))  # Go's json.Marshal


@dataclass
class ApiError(Exception):
    """A failed API call. ``status()`` is the body the server sends."""

    code: int
    reason: str
    message: str
    details: JsonObj | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def status(self) -> JsonObj:
        """The ``metav1.Status`` body in the order Go's encoder writes the struct's fields
        (``kind``, ``apiVersion``, ``metadata``, ``status``, ``message``, ``reason``,
        ``details``, ``code``), empty ones left out as their ``omitempty`` tags say: clients
        that compare the text (the official Python client's tests do) see the same bytes."""
        body: JsonObj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
        if self.message:
            body["message"] = self.message
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = _in_struct_order(self.details)
        if self.code:
            body["code"] = self.code
        return body


_DETAILS_ORDER = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")


def _in_struct_order(details: JsonObj) -> JsonObj:
    """``details`` with its known fields in ``StatusDetails`` order and empty ones dropped."""
    known = status_details(**{k: details[k] for k in _DETAILS_ORDER if k in details})
    return known | {k: v for k, v in details.items() if k not in _DETAILS_ORDER}


def status_details(
    name: str = "",
    group: str = "",
    kind: str = "",
    uid: str = "",
    causes: Sequence[JsonObj] = (),
    retryAfterSeconds: int = 0,
) -> JsonObj:
    """``metav1.StatusDetails`` in its struct order (name, group, kind, uid, causes,
    retryAfterSeconds), empty fields omitted; each cause keeps ``reason, message, field``."""
    out: JsonObj = {}
    for key, value in (("name", name), ("group", group), ("kind", kind), ("uid", uid)):
        if value:
            out[key] = value
    if causes:
        out["causes"] = [
            {k: cause[k] for k in ("reason", "message", "field") if cause.get(k)}
            for cause in causes
        ]
    if retryAfterSeconds:
        out["retryAfterSeconds"] = retryAfterSeconds
    return out


def qualified(group: str, plural: str) -> str:
    """``trainjobs.trainer.kubeflow.org``, or ``pods`` for the core group."""
    return f"{plural}.{group}" if group else plural


def _details(name: str, group: str, kind: str) -> JsonObj:
    return status_details(name, group, kind)


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{qualified(group, plural)} "{name}" not found',
        _details(name, group, plural),
    )


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(group, plural)} "{name}" already exists',
        _details(name, group, plural),
    )


def conflict(group: str, plural: str, name: str, detail: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(group, plural)} "{name}": {detail}',
        _details(name, group, plural),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid(group: str, kind: str, name: str, errors: Sequence[FieldError]) -> ApiError:
    """422 Invalid, message and causes exactly as ``apierrors.NewInvalid`` builds them."""
    qualified_kind = f"{kind}.{group}" if group else kind
    summary = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    causes = [{"reason": e.type.reason, "message": e.body, "field": e.path} for e in errors]
    details = status_details(name, group, kind, causes=causes)
    return ApiError(422, "Invalid", f'{qualified_kind} "{name}" is invalid: {summary}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(
    message: str = "the server does not allow this method on the requested resource",
) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(content_type: str, accepted: Sequence[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}",
    )


def forbidden(group: str, plural: str, name: str, detail: str) -> ApiError:
    subject = f'{qualified(group, plural)} "{name}"' if name else qualified(group, plural)
    return ApiError(
        403, "Forbidden", f"{subject} is forbidden: {detail}", _details(name, group, plural)
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_old(requested: int, oldest: int) -> ApiError:
    return gone(f"too old resource version: {requested} ({oldest})")


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", message)


def too_many_requests(retry_after: int) -> ApiError:
    return ApiError(
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
        {"retryAfterSeconds": retry_after},
        {"Retry-After": str(retry_after)},
    )

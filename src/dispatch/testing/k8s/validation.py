"""Object-metadata validation the API server applies to every resource (names, labels).

Messages are those of ``k8s.io/apimachinery/pkg/util/validation``.
"""

from __future__ import annotations

import re
from typing import Any

from dispatch.testing.k8s.errors import FieldError
from dispatch.testing.k8s.resources import ResourceType

JsonObj = dict[str, Any]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(rf"^{_LABEL}$")
DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
QUALIFIED_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)

# How names of each resource are validated (default: DNS-1123 subdomain).
_NAME_RULES = {
    ("", "namespaces"): "label",
    ("", "services"): "dns1035",
    ("", "events"): "path",
}


def name_errors(
    name: str, rule: str = "subdomain", path: str = "metadata.name"
) -> list[FieldError]:
    """Problems with a resource name under ``rule`` (subdomain, label, dns1035, path)."""
    if rule == "path":
        if name in (".", "..") or "/" in name or "%" in name:
            return [FieldError.invalid(path, name, "may not contain '/' or '%'")]
        return []
    limit, pattern, message = {
        "subdomain": (253, DNS1123_SUBDOMAIN, SUBDOMAIN_MSG),
        "label": (63, DNS1123_LABEL, LABEL_MSG),
        "dns1035": (63, DNS1035_LABEL, DNS1035_MSG),
    }[rule]
    errors = []
    if len(name) > limit:
        errors.append(FieldError.invalid(path, name, f"must be no more than {limit} characters"))
    if not pattern.match(name):
        errors.append(FieldError.invalid(path, name, message))
    return errors


def _label_key_errors(key: str, path: str) -> list[FieldError]:
    prefix, _, name = key.rpartition("/")
    errors = []
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        errors.append(FieldError.invalid(path, key, "prefix part " + SUBDOMAIN_MSG))
    if len(name) > 63:
        errors.append(FieldError.invalid(path, key, "name part must be no more than 63 characters"))
    if not _QUALIFIED_NAME.match(name):
        errors.append(FieldError.invalid(path, key, QUALIFIED_NAME_MSG))
    return errors


def metadata_errors(rtype: ResourceType, obj: JsonObj) -> list[FieldError]:
    """Name, label and annotation problems of ``obj`` (already named)."""
    meta = obj.get("metadata") or {}
    errors = name_errors(str(meta.get("name", "")), _NAME_RULES.get(rtype.storage, "subdomain"))
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        return [*errors, FieldError.invalid("metadata.labels", labels, "must be an object")]
    for key, value in labels.items():
        errors += _label_key_errors(str(key), "metadata.labels")
        if not isinstance(value, str):
            errors.append(FieldError.invalid(f"metadata.labels.{key}", value, "must be a string"))
        elif len(value) > 63:
            errors.append(
                FieldError.invalid("metadata.labels", value, "must be no more than 63 characters")
            )
        elif not _LABEL_VALUE.match(value):
            errors.append(FieldError.invalid("metadata.labels", value, LABEL_VALUE_MSG))
    annotations = meta.get("annotations") or {}
    for key, value in annotations.items() if isinstance(annotations, dict) else []:
        errors += _label_key_errors(str(key), "metadata.annotations")
        if not isinstance(value, str):
            errors.append(
                FieldError.invalid(f"metadata.annotations.{key}", value, "must be a string")
            )
    return errors

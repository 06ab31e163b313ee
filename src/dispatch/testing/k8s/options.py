"""Request options as the API server checks them before it touches storage.

Each ``*Options`` type of ``k8s.io/apimachinery/pkg/apis/meta/v1`` is validated by the
handler (``k8s.io/apiserver/pkg/endpoints/handlers``) with the functions of
``apimachinery/pkg/apis/meta/v1/validation`` and ``.../meta/internalversion/validation``; a
failure is a 422 ``Invalid`` on the options kind in group ``meta.k8s.io`` (``CreateOptions
.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["foo"]: supported values: "All"``).
The texts here are theirs. The ``WatchList`` feature gate is taken as enabled (it is in 1.32
and from 1.34 on; a 1.33 server has it off by default).
"""

from __future__ import annotations

from collections.abc import Sequence

from dispatch.testing.k8s import errors
from dispatch.testing.k8s.errors import FieldError

DRY_RUN_ALL = "All"
FIELD_MANAGER_MAX_LENGTH = 128
NOT_OLDER_THAN = "NotOlderThan"
EXACT = "Exact"
_FIELD_VALIDATION = ("", "Ignore", "Strict", "Warn")


def _raise(kind: str, found: Sequence[FieldError]) -> None:
    if found:
        raise errors.invalid("meta.k8s.io", kind, "", found)


def _dry_run(values: Sequence[str]) -> list[FieldError]:
    if all(v == DRY_RUN_ALL for v in values):
        return []
    return [FieldError.not_supported("dryRun", list(values), [DRY_RUN_ALL])]


def _field_manager(manager: str) -> list[FieldError]:
    found = []
    if len(manager) > FIELD_MANAGER_MAX_LENGTH:
        found.append(FieldError.too_long("fieldManager", FIELD_MANAGER_MAX_LENGTH))
    for at, char in enumerate(manager):
        if not char.isprintable():
            found.append(
                FieldError.invalid(
                    "fieldManager",
                    manager,
                    f"invalid character U+{ord(char):04X} (at position {at})",
                )
            )
    return found


def _field_validation(value: str) -> list[FieldError]:
    if value in _FIELD_VALIDATION:
        return []
    return [FieldError.not_supported("fieldValidation", value, sorted(_FIELD_VALIDATION))]


def is_dry_run(values: Sequence[str]) -> bool:
    """``dryRun`` was given (validated values are all ``All``)."""
    return bool(values)


def check_write(kind: str, dry_run: Sequence[str], manager: str, validation: str) -> None:
    """``ValidateCreateOptions`` / ``ValidateUpdateOptions`` (``kind`` names which)."""
    _raise(kind, _field_manager(manager) + _dry_run(dry_run) + _field_validation(validation))


def check_patch(
    dry_run: Sequence[str], manager: str, validation: str, *, apply: bool, force: str | None
) -> None:
    """``ValidatePatchOptions``: apply needs a field manager, ``force`` is for apply only."""
    found: list[FieldError] = []
    if apply and not manager:
        found.append(FieldError.required("fieldManager", "is required for apply patch"))
    if not apply and force is not None:
        found.append(FieldError.forbidden("force", "may not be specified for non-apply patch"))
    found += _field_manager(manager) + _dry_run(dry_run) + _field_validation(validation)
    _raise("PatchOptions", found)


def check_delete(dry_run: Sequence[str]) -> None:
    """``ValidateDeleteOptions`` for its ``dryRun`` part (propagation is checked apart)."""
    _raise("DeleteOptions", _dry_run(dry_run))


def manager_or_user_agent(manager: str, user_agent: str) -> str:
    """The field manager of a write: ``fieldManager``, else the user agent up to its first
    ``/`` without unprintable characters and cut at 128 bytes (``managerOrUserAgent`` in the
    handlers: ``kubectl/v1.33.0 (linux/amd64)`` -> ``kubectl``), else ``unknown`` (what
    ``buildManagerInfo`` records for an empty one)."""
    if manager:
        return manager
    out = ""
    for char in user_agent.split("/")[0]:
        if not char.isprintable():
            continue
        if len((out + char).encode()) > FIELD_MANAGER_MAX_LENGTH:
            break
        out += char
    return out or "unknown"


def check_list(
    *,
    watch: bool,
    resource_version: str,
    match: str,
    send_initial_events: str | None,
    continue_token: str,
) -> None:
    """``ValidateListOptions`` of a list or a watch (with the ``WatchList`` gate on)."""
    found: list[FieldError] = []
    if watch:
        if send_initial_events is not None and match != NOT_OLDER_THAN:
            found.append(
                FieldError.forbidden(
                    "resourceVersionMatch",
                    f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}",
                )
            )
        if match:
            if send_initial_events is None:
                found.append(
                    FieldError.forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                        "is provided",
                    )
                )
            if match != NOT_OLDER_THAN:
                found.append(
                    FieldError.not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN])
                )
            if continue_token:
                found.append(
                    FieldError.forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    )
                )
        _raise("ListOptions", found)
        return
    if match:
        if not resource_version:
            found.append(
                FieldError.forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                )
            )
        if continue_token:
            found.append(
                FieldError.forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                )
            )
        if match not in (EXACT, NOT_OLDER_THAN):
            found.append(
                FieldError.not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""])
            )
        if match == EXACT and resource_version == "0":
            found.append(
                FieldError.forbidden(
                    "resourceVersionMatch",
                    'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                )
            )
    if send_initial_events is not None:
        found.append(
            FieldError.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list")
        )
    _raise("ListOptions", found)

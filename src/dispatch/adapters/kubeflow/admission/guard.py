"""The guard's decisions: one AdmissionReview request in, one ``Decision`` out (pure, no I/O).

``review`` judges the ``request`` of an AdmissionReview v1 (admission.k8s.io/v1) under a
``GuardConfig``. In order of precedence, the first rule broken refuses:

1. ``resume-after-end`` (403): an UPDATE of a TrainJob from ``spec.suspend`` true to false
   while the old or new object carries ``dispatch.dev/ended`` (dispatch saw the attempt end)
   or ``dispatch.dev/started`` (its ranks ran, so the suspension being undone ended it,
   whether or not dispatch has seen it yet), whoever asks (Kueue, dispatch, an
   administrator). ``Decision.refused_resume`` is set: the server records an Event.
2. ``dispatch-labels`` (403): on an object carrying ``dispatch.dev/job`` (old or new), a
   ``dispatch.dev/*`` label or annotation added (a CREATE counts as adding every one),
   changed or removed by anyone but dispatch's identities; that would lift the guard.
3. ``spec-changed`` (403): an UPDATE of such an object's ``spec`` by anyone but dispatch's
   identities, except what Kueue's TrainJob integration writes (``kueue.sigs.k8s.io``,
   ``pkg/controller/jobs/trainjob``): ``spec.suspend`` either way (rule 1 already refused a
   resume after the end), and in the ``spec.runtimePatches`` entry whose ``manager`` is
   ``kueue.x-k8s.io/manager``: the entry itself (Kueue's webhook adds it on create), its
   ``time`` (Trainer stamps it), and its replicated jobs' ``name`` and pod template
   ``metadata`` (labels, annotations; Go may also write ``creationTimestamp: null``) and
   ``spec.nodeSelector``/``tolerations``/``schedulingGates`` (``RunWithPodSetsInfo`` fills
   them, ``RestorePodSetsInfo`` empties them).
4. ``runtime-rules`` (422, the object is invalid whoever asks): a CREATE or UPDATE of a
   ClusterTrainingRuntime or TrainingRuntime whose labels match ``runtime_selector``, refused
   by ``check_runtime`` (the rules of ``dispatch check-runtime``), with every reason. A
   runtime copy (``dispatch.dev/job``) keeps the labels of the runtime it copies but is not
   judged again: it is dispatch's (rules 2 and 3), checked when its job was planned.

Everything else is allowed: DELETE and CONNECT, subresources (``status``), other resources,
objects without ``dispatch.dev/job`` (rules 2 and 3), unlabelled runtimes (rule 4), and a
request too malformed to read (the API server never sends one; the guard never blocks what
it cannot judge). ``review`` never raises: every field is read defensively, every value
quoted in a message is bounded, and the diff's work is bounded by the input's size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from itertools import islice
from typing import Any

from dispatch.adapters.kubeflow.admission.contract import (
    ANNOTATION_ENDED,
    ANNOTATION_STARTED,
    KUEUE_MANAGER,
    LABEL_ATTEMPT,
    LABEL_JOB,
    GuardConfig,
)
from dispatch.adapters.kubeflow.admission.diff import (
    ABSENT,
    Change,
    Keyed,
    changes,
    render_path,
    same,
)
from dispatch.adapters.kubeflow.planning.rules import check_runtime
from dispatch.model.shown import show

__all__ = ["Decision", "Rule", "response", "review"]

TRAINER_GROUP = "trainer.kubeflow.org"
#: the resources the guard judges, by plural: their kind
GUARDED = {
    "trainjobs": "TrainJob",
    "trainingruntimes": "TrainingRuntime",
    "clustertrainingruntimes": "ClusterTrainingRuntime",
}
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")
#: the prefix of the labels and annotations only dispatch may write on its objects
DISPATCH_PREFIX = "dispatch.dev/"
#: changed paths a denial names (the rest are counted)
MAX_PATHS_SHOWN = 8
#: characters of a denial message (the API server shows it whole)
MAX_MESSAGE = 3000

FORBIDDEN, INVALID = 403, 422
REASONS = {FORBIDDEN: "Forbidden", INVALID: "Invalid"}


class Rule(StrEnum):
    """Why a request was allowed or refused (the ``rule`` of a decision and its log line)."""

    #: allowed: the guard does not judge this request (resource, operation, subresource)
    NOT_GUARDED = "not-guarded"
    #: allowed: judged, no rule broken
    PASSED = "passed"
    RESUME_AFTER_END = "resume-after-end"
    DISPATCH_LABELS = "dispatch-labels"
    SPEC_CHANGED = "spec-changed"
    RUNTIME_RULES = "runtime-rules"


@dataclass(frozen=True, slots=True)
class Decision:
    """The guard's answer to one request."""

    allowed: bool
    rule: Rule
    #: the HTTP status code of a denial (``response.status.code``); 200 when allowed
    code: int = 200
    #: one line: the object, the dispatch job and attempt, what changed, who asked, why
    message: str = ""
    #: shown to the client (kubectl prints them) even when allowed
    warnings: tuple[str, ...] = ()
    #: a resume of an ended TrainJob was refused (the server records an Event)
    refused_resume: bool = False


NOT_GUARDED = Decision(True, Rule.NOT_GUARDED)


@dataclass(frozen=True, slots=True)
class _Target:
    """What the guard reads of a request, each field checked for its type."""

    operation: str
    kind: str
    namespace: str
    name: str
    user: str
    groups: tuple[str, ...]
    new: Mapping[str, Any]
    old: Mapping[str, Any]


def review(request: Any, config: GuardConfig) -> Decision:
    """The decision on the ``request`` of an AdmissionReview v1 (module docstring)."""
    target = _target(request)
    if target is None:
        return NOT_GUARDED
    if target.kind == "TrainJob" and _resumes_ended(target):
        return _refuse_resume(target)
    owned = _carries_job(target.new) or _carries_job(target.old)
    if owned and not config.is_dispatch(target.user, target.groups):
        marks = list(islice(_mark_changes(target), MAX_PATHS_SHOWN + 1))
        if marks:
            what = "its dispatch.dev labels and annotations"
            return _refuse_identity(target, Rule.DISPATCH_LABELS, what, marks)
        if target.operation == "UPDATE":
            found = _spec_changes(target)
            if found:
                return _refuse_identity(target, Rule.SPEC_CHANGED, "its spec", found)
    # a runtime copy (``owned``) is dispatch's, checked when its job was planned
    if (
        target.kind in RUNTIME_KINDS
        and not owned
        and _selected(target.new, config.runtime_selector)
    ):
        return _judge_runtime(target, config)
    return Decision(True, Rule.PASSED)


def response(review_: Any, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview v1 answering ``review_`` (its ``request.uid`` echoed)."""
    request = review_.get("request") if isinstance(review_, Mapping) else None
    uid = request.get("uid") if isinstance(request, Mapping) else None
    answer: dict[str, Any] = {"uid": uid if isinstance(uid, str) else "", "allowed": True}
    if not decision.allowed:
        answer["allowed"] = False
        answer["status"] = {
            "status": "Failure",
            "code": decision.code,
            "reason": REASONS.get(decision.code, "Forbidden"),
            "message": decision.message,
        }
    if decision.warnings:
        answer["warnings"] = list(decision.warnings)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer}


# --- reading the request ----------------------------------------------------------------


def _target(request: Any) -> _Target | None:
    """The guarded request's fields, or None when the guard does not judge it."""
    if not isinstance(request, Mapping):
        return None
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE") or request.get("subResource"):
        return None
    resource = request.get("resource")
    if not isinstance(resource, Mapping) or resource.get("group") != TRAINER_GROUP:
        return None
    kind = GUARDED.get(_text(resource.get("resource")))
    new = request.get("object")
    old = request.get("oldObject") if operation == "UPDATE" else None
    if kind is None or not isinstance(new, Mapping):
        return None
    if operation == "UPDATE" and not isinstance(old, Mapping):
        return None
    user = request.get("userInfo")
    user = user if isinstance(user, Mapping) else {}
    groups = user.get("groups")
    name = _text(request.get("name")) or _text(_meta(new).get("name"))
    return _Target(
        operation=operation,
        kind=kind,
        namespace=_text(request.get("namespace")),
        name=name,
        user=_text(user.get("username")),
        groups=tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else (),
        new=new,
        old=old if isinstance(old, Mapping) else {},
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _strings(obj: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    """``metadata.labels`` or ``metadata.annotations`` (empty when missing or not a map)."""
    found = _meta(obj).get(field)
    return found if isinstance(found, Mapping) else {}


def _spec(obj: Mapping[str, Any]) -> Any:
    return obj.get("spec", ABSENT)


def _carries_job(obj: Mapping[str, Any]) -> bool:
    return LABEL_JOB in _strings(obj, "labels")


def _selected(obj: Mapping[str, Any], selector: Mapping[str, str | None]) -> bool:
    labels = _strings(obj, "labels")
    return all(k in labels and (v is None or labels[k] == v) for k, v in selector.items())


# --- rule 1: no resume after the end ------------------------------------------------------


def _suspended(obj: Mapping[str, Any]) -> bool:
    spec = obj.get("spec")
    return isinstance(spec, Mapping) and spec.get("suspend") is True


def _ended(obj: Mapping[str, Any]) -> str | None:
    """Why the attempt of this TrainJob is over, as the message shows it, or None: marked
    ended by dispatch, or marked started (suspended since, since it is being resumed)."""
    annotations = _strings(obj, "annotations")
    if ANNOTATION_ENDED in annotations:
        return f"{ANNOTATION_ENDED}={_shown(annotations[ANNOTATION_ENDED])}"
    if ANNOTATION_STARTED in annotations:
        return f"{ANNOTATION_STARTED}={_shown(annotations[ANNOTATION_STARTED])}, then suspended"
    return None


def _resumes_ended(target: _Target) -> bool:
    if target.operation != "UPDATE" or not _suspended(target.old) or _suspended(target.new):
        return False
    return _ended(target.old) is not None or _ended(target.new) is not None


def _refuse_resume(target: _Target) -> Decision:
    why = _ended(target.old)
    why = _ended(target.new) if why is None else why
    message = (
        f"{_subject(target)}: resuming refused: its attempt has ended ({why}) and an ended "
        f"attempt is never resumed; changed: spec.suspend true -> false; "
        f"asked by {_asker(target)}"
    )
    return Decision(False, Rule.RESUME_AFTER_END, FORBIDDEN, _line(message), refused_resume=True)


# --- rules 2 and 3: only dispatch writes dispatch's objects -------------------------------


def _mark_changes(target: _Target) -> list[str]:
    """The ``dispatch.dev/*`` labels and annotations added, changed or removed."""
    found: list[str] = []
    for field in ("labels", "annotations"):
        old, new = _strings(target.old, field), _strings(target.new, field)
        keys = {k for k in (*old, *new) if isinstance(k, str) and k.startswith(DISPATCH_PREFIX)}
        for key in sorted(keys):
            where = render_path(("metadata", field, key))
            if key not in old:
                found.append(f"{where} added")
            elif key not in new:
                found.append(f"{where} removed")
            elif not same(old[key], new[key]):
                found.append(f"{where} {_shown(old[key])} -> {_shown(new[key])}")
            if len(found) > MAX_PATHS_SHOWN:
                return found
    return found


def _spec_changes(target: _Target) -> list[str]:
    """The spec paths changed that the asker may not change (at most one more than shown)."""
    kueue_may = target.kind == "TrainJob"
    found: list[str] = []
    for change in changes(_spec(target.old), _spec(target.new), ("spec",)):
        if kueue_may and _kueue_writes(change):
            continue
        found.append(render_path(change.path))
        if len(found) > MAX_PATHS_SHOWN:
            break
    return found


_ANY = object()
#: below ``spec.runtimePatches[manager=kueue.x-k8s.io/manager]``: what Kueue writes
_POD_TEMPLATE = ("trainingRuntimeSpec", "template", "spec", "replicatedJobs", _ANY, "template",
                 "spec", "template")  # fmt: skip
KUEUE_PATHS: tuple[tuple[object, ...], ...] = (
    ("manager",),
    ("time",),
    ("trainingRuntimeSpec", "template", "spec", "replicatedJobs", _ANY, "name"),
    (*_POD_TEMPLATE, "metadata"),
    (*_POD_TEMPLATE, "spec", "nodeSelector"),
    (*_POD_TEMPLATE, "spec", "tolerations"),
    (*_POD_TEMPLATE, "spec", "schedulingGates"),
)
_KUEUE_ENTRY = ("spec", "runtimePatches", Keyed("manager", KUEUE_MANAGER))


def _kueue_writes(change: Change) -> bool:
    """True for a change Kueue's TrainJob integration makes (module docstring, rule 3)."""
    path = change.path
    if path == ("spec", "suspend"):
        return all(
            v is ABSENT or v is None or isinstance(v, bool) for v in (change.old, change.new)
        )
    if path[: len(_KUEUE_ENTRY)] != _KUEUE_ENTRY:
        return False
    rest = path[len(_KUEUE_ENTRY) :]
    for allowed in KUEUE_PATHS:
        if len(rest) >= len(allowed) and _matches(rest[: len(allowed)], allowed):
            return True
        # the skeleton Kueue's webhook writes: empty objects on the way to those fields
        skeleton = len(rest) < len(allowed) and _matches(rest, allowed[: len(rest)])
        if skeleton and _empty(change.old) and _empty(change.new):
            return True
    return False


def _matches(path: tuple[object, ...], pattern: tuple[object, ...]) -> bool:
    return all(p is _ANY or p == q for p, q in zip(pattern, path, strict=True))


def _empty(value: Any) -> bool:
    return value is ABSENT or value is None or (isinstance(value, (Mapping, list)) and not value)


def _refuse_identity(target: _Target, rule: Rule, what: str, found: list[str]) -> Decision:
    shown = ", ".join(found[:MAX_PATHS_SHOWN])
    if len(found) > MAX_PATHS_SHOWN:
        shown += " and more"
    message = (
        f"{_subject(target)}: only dispatch may change {what}; changed: {shown}; "
        f"asked by {_asker(target)}"
    )
    return Decision(False, rule, FORBIDDEN, _line(message))


# --- rule 4: the runtime rules ------------------------------------------------------------


def _judge_runtime(target: _Target, config: GuardConfig) -> Decision:
    verdict = check_runtime(target.new, config.settings, kind=target.kind, name=target.name)
    warnings = (verdict.weakened_identity,) if verdict.weakened_identity else ()
    if verdict.accepted:
        return Decision(True, Rule.PASSED, warnings=warnings)
    reasons = "; ".join(f"{r.rule}: {r.message}" for r in verdict.reasons)
    message = (
        f"{_subject(target)}: refused by dispatch's runtime rules (dispatch check-runtime): "
        f"{reasons}; asked by {_asker(target)}"
    )
    return Decision(False, Rule.RUNTIME_RULES, INVALID, _line(message), warnings=warnings)


# --- messages -----------------------------------------------------------------------------


def _shown(value: Any) -> str:
    """A value from the request for a message: a short string as is, else bounded."""
    if isinstance(value, str) and len(value) <= 100 and value.isprintable():
        return value
    return show(value)


def _subject(target: _Target) -> str:
    """``TrainJob ns/name (dispatch job J, attempt A)``."""
    where = f"{_shown(target.namespace)}/" if target.namespace else ""
    subject = f"{target.kind} {where}{_shown(target.name) or '(unnamed)'}"
    labels = {**_strings(target.old, "labels"), **_strings(target.new, "labels")}
    if LABEL_JOB in labels:
        subject += f" (dispatch job {_shown(labels[LABEL_JOB])}"
        if LABEL_ATTEMPT in labels:
            subject += f", attempt {_shown(labels[LABEL_ATTEMPT])}"
        subject += ")"
    return subject


def _asker(target: _Target) -> str:
    return _shown(target.user) if target.user else "an unnamed user"


def _line(message: str) -> str:
    """One line, bounded."""
    flat = " ".join(message.split())
    return flat if len(flat) <= MAX_MESSAGE else flat[: MAX_MESSAGE - 3] + "..."

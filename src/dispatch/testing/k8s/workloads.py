"""What the API server itself does to Jobs and Pods, before any controller sees them.

Kubernetes 1.33, built-in (no webhook involved), so every client meets it:

* Job create (``pkg/registry/batch/job/strategy.go``, ``generateSelector``): unless
  ``spec.manualSelector`` is true, the pod template gets the labels ``controller-uid``,
  ``batch.kubernetes.io/controller-uid`` (the Job's uid), ``job-name`` and
  ``batch.kubernetes.io/job-name`` (its name) where it does not set them itself, and
  ``spec.selector.matchLabels`` gets ``batch.kubernetes.io/controller-uid``.
* Job validation (``pkg/apis/batch/validation``, ``validateJobSpec`` /
  ``validateGeneratedSelector``): a selector is required and must match the template's labels;
  a generated one must select exactly what was generated; ``restartPolicy`` must be
  ``OnFailure`` or ``Never`` (``Always`` and unset, which the API defaults to ``Always``, are
  "Required value"), and only ``Never`` goes with a ``podFailurePolicy``.
* Pod create and update: the ``DefaultTolerationSeconds`` admission plugin adds the
  ``node.kubernetes.io/not-ready`` and ``node.kubernetes.io/unreachable`` ``NoExecute``
  tolerations (``tolerationSeconds: 300``) unless the pod tolerates those taints already.
* Pod update (``ValidatePodUpdate`` in ``pkg/apis/core/validation``): the spec may change only in
  container and init-container images, ``activeDeadlineSeconds`` (set, or lowered),
  tolerations (additions; ``tolerationSeconds`` may change) and scheduling gates (removals);
  anything else is ``spec: Forbidden: pod updates may not change fields other than ...``.
  Binding a pod to its node is the ``binding`` subresource, which this check does not see.

Messages are the API server's. Functions take and change storage-representation objects.
"""

from __future__ import annotations

import json
from typing import Any

from dispatch.testing.k8s.errors import FieldError
from dispatch.testing.k8s.resources import ResourceType
from dispatch.testing.k8s.selectors import LabelSelector

JsonObj = dict[str, Any]
JOBS = ("batch", "jobs")
PODS = ("", "pods")
B = "batch.kubernetes.io/"
CONTROLLER_UID, LEGACY_CONTROLLER_UID = B + "controller-uid", "controller-uid"
JOB_NAME, LEGACY_JOB_NAME = B + "job-name", "job-name"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300
#: what ValidatePodUpdate lists as changeable, joined with "," as the 1.33 server writes it
UPDATABLE_POD_FIELDS = ",".join(
    (
        "`spec.containers[*].image`",
        "`spec.initContainers[*].image`",
        "`spec.activeDeadlineSeconds`",
        "`spec.tolerations` (only additions to existing tolerations)",
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
        "negative)",
    )
)


def prepare_create(stype: ResourceType, obj: JsonObj) -> None:
    """The server's own additions to a new Job or Pod (after uid and name are set)."""
    if stype.storage == JOBS:
        _generate_selector(obj)
    elif stype.storage == PODS:
        add_default_tolerations(obj)


def admit(
    operation: str, stype: ResourceType, obj: JsonObj, old: JsonObj | None
) -> list[FieldError]:
    """Validation of a Job (create and update) and of a Pod update; adds the default
    tolerations to a pod update first, as the mutating admission plugin runs before."""
    if stype.storage == JOBS:
        return job_errors(obj)
    if stype.storage == PODS and operation == "UPDATE" and old is not None:
        add_default_tolerations(obj)
        return pod_update_errors(obj, old)
    return []


# ------------------------------------------------------------------ Jobs


def _generate_selector(job: JsonObj) -> None:
    spec = job.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") is True:
        return
    m = job["metadata"]
    template = spec.setdefault("template", {})
    if not isinstance(template, dict):
        return  # malformed: nothing to label
    if not isinstance(template.get("metadata"), dict):
        template["metadata"] = {}
    labels = template["metadata"].get("labels")
    if not isinstance(labels, dict):
        labels = template["metadata"]["labels"] = {}
    for key in (LEGACY_JOB_NAME, JOB_NAME):
        labels.setdefault(key, m["name"])  # a user's own value is left for validation to judge
    for key in (LEGACY_CONTROLLER_UID, CONTROLLER_UID):
        labels.setdefault(key, m["uid"])
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        selector = spec["selector"] = {}
    match = selector.get("matchLabels")
    if not isinstance(match, dict):
        match = selector["matchLabels"] = {}
    match.setdefault(CONTROLLER_UID, m["uid"])


def job_errors(job: JsonObj) -> list[FieldError]:
    """``ValidateJob``'s selector and ``restartPolicy`` checks (what a client can get wrong)."""
    spec = job.get("spec") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    errors = _generated_selector_errors(job, labels)
    selector = spec.get("selector")
    parsed = _selector(selector)
    if selector is None:
        errors.append(FieldError.required("spec.selector"))
    elif parsed is not None and not parsed.matches(labels):
        errors.append(
            FieldError.invalid(
                "spec.template.metadata.labels",
                labels,
                "`selector` does not match template `labels`",
            )
        )
    errors += _restart_policy_errors(spec, template.get("spec") or {})
    return errors


def _generated_selector_errors(job: JsonObj, labels: dict[str, Any]) -> list[FieldError]:
    spec = job.get("spec") or {}
    if spec.get("manualSelector") is True or spec.get("selector") is None:
        return []
    m = job["metadata"]
    expected = {
        LEGACY_CONTROLLER_UID: m.get("uid", ""),
        LEGACY_JOB_NAME: m.get("name", ""),
        CONTROLLER_UID: m.get("uid", ""),
        JOB_NAME: m.get("name", ""),
    }
    errors = []
    for key, value in expected.items():
        path = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            errors.append(FieldError.required(path, f"must be '{value}'"))
        elif labels[key] != value:
            errors.append(FieldError.invalid(path, labels[key], f"must be '{value}'"))
    parsed = _selector(spec["selector"])
    if parsed is not None and not parsed.matches(expected):
        errors.append(
            FieldError.invalid("spec.selector", spec["selector"], "`selector` not auto-generated")
        )
    return errors


def _selector(selector: Any) -> LabelSelector | None:
    if not isinstance(selector, dict):
        return None
    try:
        return LabelSelector.from_dict(selector)
    except (KeyError, TypeError):  # an invalid operator: the selector's own validation says so
        return None


def _restart_policy_errors(spec: JsonObj, pod_spec: JsonObj) -> list[FieldError]:
    # an unset restartPolicy is defaulted to Always before validation, hence "Required"
    policy = pod_spec.get("restartPolicy") or "Always"
    path = "spec.template.spec.restartPolicy"
    if policy == "Always":
        return [FieldError.required(path, 'valid values: "OnFailure", "Never"')]
    if policy not in ("OnFailure", "Never"):
        return [FieldError.not_supported(path, policy, ("OnFailure", "Never"))]
    if spec.get("podFailurePolicy") is not None and policy != "Never":
        message = 'only "Never" is supported when podFailurePolicy is specified'
        return [FieldError.invalid(path, policy, message)]
    return []


# ------------------------------------------------------------------ Pods


def add_default_tolerations(pod: JsonObj) -> None:
    """``DefaultTolerationSeconds``: tolerate a NotReady or unreachable node for 300 s unless
    a toleration (same key or none, ``NoExecute`` or any effect) covers it already."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    tolerations = spec.get("tolerations") or []
    if not isinstance(tolerations, list):
        return  # malformed: left for validation
    for key in (NOT_READY, UNREACHABLE):
        if not any(
            t.get("key", "") in (key, "") and t.get("effect", "") in ("NoExecute", "")
            for t in tolerations
            if isinstance(t, dict)
        ):
            tolerations = [
                *tolerations,
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                },
            ]
    spec["tolerations"] = tolerations


def pod_update_errors(new: JsonObj, old: JsonObj) -> list[FieldError]:
    """``ValidatePodUpdate``'s spec rules (the metadata rules are the generic ones)."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors: list[FieldError] = []
    for field in ("containers", "initContainers"):
        if len(spec.get(field) or []) != len(old_spec.get(field) or []):
            return [
                FieldError.forbidden(
                    f"spec.{field}", "pod updates may not add or remove containers"
                )
            ]
    deadline, old_deadline = (
        spec.get("activeDeadlineSeconds"),
        old_spec.get("activeDeadlineSeconds"),
    )
    if isinstance(deadline, int) and isinstance(old_deadline, int) and deadline > old_deadline:
        return [
            FieldError.invalid(
                "spec.activeDeadlineSeconds",
                deadline,
                "must be less than or equal to previous value",
            )
        ]
    if deadline is None and old_deadline is not None:
        errors.append(
            FieldError.invalid(
                "spec.activeDeadlineSeconds",
                None,
                "must not update from a positive integer to nil value",
            )
        )
    errors += _tolerations_errors(spec.get("tolerations") or [], old_spec.get("tolerations") or [])
    errors += _gates_errors(
        spec.get("schedulingGates") or [], old_spec.get("schedulingGates") or []
    )
    if spec == old_spec:
        return errors
    munged = dict(spec)
    for field in ("containers", "initContainers"):
        if field in munged:
            images = [c.get("image") for c in old_spec.get(field) or []]
            munged[field] = [
                {**c, "image": image} if isinstance(c, dict) else c
                for c, image in zip(munged[field], images, strict=True)
            ]
    for field in ("activeDeadlineSeconds", "tolerations", "schedulingGates"):
        munged.pop(field, None)
        if field in old_spec:
            munged[field] = old_spec[field]
    if munged != old_spec:
        detail = f"pod updates may not change fields other than {UPDATABLE_POD_FIELDS}\n"
        errors.append(FieldError.forbidden("spec", detail + _diff(old_spec, munged)))
    return errors


def _tolerations_errors(new: list[Any], old: list[Any]) -> list[FieldError]:
    def same(a: Any, b: Any) -> bool:
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return bool(a == b)
        return {**a, "tolerationSeconds": None} == {**b, "tolerationSeconds": None}

    for existing in old:
        if not any(same(existing, t) for t in new):
            return [
                FieldError.forbidden(
                    "spec.tolerations",
                    "existing toleration can not be modified except its tolerationSeconds",
                )
            ]
    return []


def _gates_errors(new: list[Any], old: list[Any]) -> list[FieldError]:
    known = {g.get("name") for g in old if isinstance(g, dict)}
    return [
        FieldError.forbidden(
            f"spec.schedulingGates[{i}].name",
            f"only deletion is allowed, but found new scheduling gate '{g.get('name')}'",
        )
        for i, g in enumerate(new)
        if isinstance(g, dict) and g.get("name") not in known
    ]


def _diff(old: JsonObj, new: JsonObj) -> str:
    """The changed top-level fields, ``-`` old and ``+`` new (the real server prints a Go
    ``cmp.Diff`` of its internal types here; this is the same information in JSON)."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            name = key[:1].upper() + key[1:]
            lines.append(f"- \t{name}: {json.dumps(old.get(key), sort_keys=True)},")
            lines.append(f"+ \t{name}: {json.dumps(new.get(key), sort_keys=True)},")
    lines.append("  }")
    return "\n".join(lines)

"""The guard without a server: ValidatingAdmissionPolicies in CEL for rules 1 and 2 (pure).

``dispatch admission manifests --policy`` prints these objects for clusters that want no
webhook server (``admissionregistration.k8s.io/v1``: Kubernetes 1.30 and later). Two
policies, each with its binding (``validationActions: [Deny]``):

* ``<name>-ended`` (rule 1): an UPDATE of a TrainJob carrying ``dispatch.dev/job`` that
  resumes it (``spec.suspend`` true to false) is refused when the old or the new object
  carries ``dispatch.dev/ended`` or ``dispatch.dev/started`` (its ranks ran, so the
  suspension being undone ended the attempt), whoever asks (Kueue included). A match condition keeps the
  policy to resumes; nothing else is evaluated.
* ``<name>-owned`` (rule 2): an UPDATE of a TrainJob or TrainingRuntime carrying
  ``dispatch.dev/job`` by anyone but dispatch's identities (a match condition exempts them)
  is refused when it adds, changes or removes a ``dispatch.dev/*`` label or annotation, or
  changes the spec: for a TrainingRuntime (dispatch's runtime copy) the whole spec; for a
  TrainJob every field of Trainer's v1alpha1 ``TrainJobSpec`` (``TRAINJOB_FIELDS``) except
  ``suspend``, and the ``runtimePatches`` entries other than Kueue's
  (``kueue.x-k8s.io/manager``); Kueue's entry may change only within what Kueue's TrainJob
  integration writes (``KUEUE_ENTRY_SHAPE``).

Both match only the objects themselves (not ``status``), only UPDATE (deletion is not
guarded), only objects labelled ``dispatch.dev/job`` (the object selector matches the old or
the new object, so removing the label is judged too). ``failurePolicy: Fail``: an expression
that cannot be evaluated refuses (the guard does not open when it is confused). Each
validation refuses with ``reason: Forbidden`` (403) and a ``messageExpression`` naming the
object, the dispatch job (``dispatch.dev/job``) and attempt (``dispatch.dev/attempt``); the
API server prefixes it with ``ValidatingAdmissionPolicy '<policy>' with binding '<binding>'
denied request:``.

The expressions use only standard CEL that both Kubernetes (cel-go) and cel-python evaluate:
``has()``, ``in``, ``all``/``exists``/``filter``, ``startsWith``, ``?:``, ``+`` on strings.
Trainer's objects are typed by their CRD schemas, so a spec cannot be iterated by key: the
fields are enumerated (from ``manifests/base/crds`` of kubeflow/trainer v2.3) and compared
one by one, each guarded by ``has()``.

What the policy cannot do that the webhook (``dispatch admission serve``) does:

* rule 3 (the runtime rules of ``dispatch check-runtime``): those are Python, not CEL;
* record an Event on the TrainJob whose resume was refused (a policy has no side effects);
  dispatch sees the refusal only in Kueue's log and the Workload's conditions;
* name every changed path in its message (each validation names one field);
* notice fields added to Trainer's ``TrainJobSpec`` after v2.3: the enumerated comparison
  lets a change to such a field through (the webhook compares whole objects), so regenerate
  the policy when Trainer's API grows;
* guard CREATE (the webhook's label rule also refuses a stranger creating an object that
  carries ``dispatch.dev/*`` labels).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dispatch.adapters.kubeflow.admission.contract import (
    ANNOTATION_ENDED,
    ANNOTATION_STARTED,
    KUEUE_MANAGER,
    LABEL_ATTEMPT,
    LABEL_JOB,
)
from dispatch.adapters.kubeflow.admission.manifests import (
    TRAINER_GROUP,
    TRAINER_VERSION,
    ManifestOptions,
    label_selector,
)

__all__ = [
    "DISPATCH_PREFIX",
    "KUEUE_ENTRY_SHAPE",
    "RESUMES",
    "TRAINJOB_FIELDS",
    "dispatch_asks",
    "policy_names",
    "policy_objects",
]

JsonObj = dict[str, Any]
API_VERSION = "admissionregistration.k8s.io/v1"
#: the prefix of the labels and annotations only dispatch may write on its objects
DISPATCH_PREFIX = "dispatch.dev/"


def cel_string(value: str) -> str:
    """``value`` as a CEL string literal."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{escaped}'"


def _map(obj: str, field: str) -> str:
    """``obj.metadata.<field>`` (labels, annotations), ``{}`` when absent."""
    return f"(has({obj}.metadata.{field}) ? {obj}.metadata.{field} : {{}})"


def _none_of(var: str, fields: Iterable[str]) -> str:
    """True when ``var`` has none of ``fields``."""
    return " && ".join(f"!has({var}.{f})" for f in fields)


KUEUE = cel_string(KUEUE_MANAGER)
ENDED = cel_string(ANNOTATION_ENDED)
STARTED = cel_string(ANNOTATION_STARTED)
#: the labels and annotations of the new and of the old object (empty maps when absent)
NEW_LABELS, OLD_LABELS = _map("object", "labels"), _map("oldObject", "labels")
NEW_ANNOTATIONS, OLD_ANNOTATIONS = _map("object", "annotations"), _map("oldObject", "annotations")


def _label(key: str) -> str:
    """The label's value on the new object, else on the old, else ``?``."""
    k = cel_string(key)
    old = f"({k} in {OLD_LABELS} ? {OLD_LABELS}[{k}] : '?')"
    return f"({k} in {NEW_LABELS} ? {NEW_LABELS}[{k}] : {old})"


#: ``TrainJob team/tj-1 (dispatch job J, attempt 2)``: the start of every message
SUBJECT = (
    "request.kind.kind + ' ' + object.metadata.namespace + '/' + object.metadata.name"
    f" + ' (dispatch job ' + {_label(LABEL_JOB)} + ', attempt ' + {_label(LABEL_ATTEMPT)} + ')'"
)
#: who asked, at the end of every message
ASKER = "'; asked by ' + request.userInfo.username"

# --- rule 1 ------------------------------------------------------------------------------

#: the request resumes the TrainJob: suspended before, not suspended now (absent is false)
RESUMES = (
    "has(oldObject.spec.suspend) && oldObject.spec.suspend == true"
    " && !(has(object.spec.suspend) && object.spec.suspend == true)"
)
#: neither the old nor the new object carries ``dispatch.dev/ended`` or ``dispatch.dev/started``
#: (started: its ranks ran, so the suspension being undone ended the attempt)
NOT_ENDED = " && ".join(
    f"!({mark} in {annotations})"
    for mark in (ENDED, STARTED)
    for annotations in (OLD_ANNOTATIONS, NEW_ANNOTATIONS)
)


def _why(key: str, annotations: str, then: str, otherwise: str) -> str:
    """``<key>=<value><then>`` when ``annotations`` carries ``key``, else ``otherwise``."""
    mark = cel_string(key)
    shown = f"{cel_string(key + '=')} + {annotations}[{mark}]"
    if then:
        shown += f" + {cel_string(then)}"
    return f"({mark} in {annotations} ? {shown} : {otherwise})"


#: why the attempt is over, as the webhook says it: the ended mark (old object first), else
#: the started mark
ENDED_WHY = _why(
    ANNOTATION_ENDED,
    OLD_ANNOTATIONS,
    "",
    _why(
        ANNOTATION_ENDED,
        NEW_ANNOTATIONS,
        "",
        _why(ANNOTATION_STARTED, OLD_ANNOTATIONS, ", then suspended",
             _why(ANNOTATION_STARTED, NEW_ANNOTATIONS, ", then suspended", "'?'")),
    ),
)  # fmt: skip
#: the refusal: the object, the job, the attempt, why it ended, the asker (the webhook's words)
NOT_ENDED_MESSAGE = (
    f"{SUBJECT} + ': resuming refused: its attempt has ended (' + {ENDED_WHY} + ') and an "
    f"ended attempt is never resumed; changed: spec.suspend true -> false' + {ASKER}"
)

# --- rule 2 ------------------------------------------------------------------------------


def dispatch_asks(identities: Iterable[str], groups: Iterable[str]) -> str:
    """True when the request is made by one of dispatch's identities or groups."""
    terms = []
    users = ", ".join(cel_string(i) for i in identities)
    if users:
        terms.append(f"request.userInfo.username in [{users}]")
    members = ", ".join(cel_string(g) for g in groups)
    if members:
        groups_ = "request.userInfo.groups"
        terms.append(f"(has({groups_}) && {groups_}.exists(g, g in [{members}]))")
    return " || ".join(terms) or "false"


def marks_unchanged(new: str, old: str) -> str:
    """No ``dispatch.dev/*`` key of the ``new`` and ``old`` maps added, changed or removed."""
    prefix = cel_string(DISPATCH_PREFIX)
    return (
        f"{new}.all(k, !k.startsWith({prefix}) || (k in {old} && {old}[k] == {new}[k]))"
        f" && {old}.all(k, !k.startsWith({prefix}) || k in {new})"
    )


#: the ``dispatch.dev/*`` labels, and the ``dispatch.dev/*`` annotations, are unchanged
LABELS_UNCHANGED = marks_unchanged(NEW_LABELS, OLD_LABELS)
ANNOTATIONS_UNCHANGED = marks_unchanged(NEW_ANNOTATIONS, OLD_ANNOTATIONS)

#: the fields of Trainer's v1alpha1 TrainJobSpec (v2.3) only dispatch may change, one
#: comparison each; ``suspend`` is Kueue's (rule 1 refuses a resume after the end) and
#: ``runtimePatches`` is compared entry by entry below
TRAINJOB_FIELDS = (
    "activeDeadlineSeconds",  # the run's deadline (Trainer: immutable once set)
    "initializer",  # dataset and model initializers (Trainer: immutable once set)
    "managedBy",  # the controller in charge (Trainer: immutable once set)
    "runtimeRef",  # the runtime the job runs on: dispatch's copy (Trainer: immutable once set)
    "trainer",  # image, command, nodes, resources, env (Trainer: immutable once set)
)


def unchanged(path: str) -> str:
    """The field at ``path`` (``spec.trainer``) present in both objects or in neither, and
    equal when present (Trainer's own ``self == oldSelf`` rules do not fire when a field is
    added or removed)."""
    new, old = f"object.{path}", f"oldObject.{path}"
    return f"has({new}) == has({old}) && (!has({new}) || {new} == {old})"


def _patches(obj: str, condition: str) -> str:
    patches = f"(has({obj}.spec.runtimePatches) ? {obj}.spec.runtimePatches : [])"
    return f"{patches}.filter(p, {condition})"


#: the runtimePatches entries other than Kueue's, in order, are unchanged
OTHER_PATCHES_UNCHANGED = (
    f"{_patches('object', f'p.manager != {KUEUE}')}"
    f" == {_patches('oldObject', f'p.manager != {KUEUE}')}"
)

#: what Kueue's entry may hold besides ``manager`` and ``time`` (Kueue's ``RunWithPodSetsInfo``,
#: pkg/controller/jobs/trainjob): per replicated job its ``name``, the pod template's
#: ``metadata.labels``/``annotations``, and ``spec.nodeSelector``/``tolerations``/
#: ``schedulingGates``. Every other field of Trainer's v2.3 patch schema must be absent:
#: the pod template's metadata fields Kueue never writes,
KUEUE_NEVER_POD_METADATA = ("finalizers", "name", "namespace")
#: and the pod spec fields Kueue never writes (containers' env, volumes, the service account
#: would change what the ranks run and as whom)
KUEUE_NEVER_POD_SPEC = (
    "affinity",
    "containers",
    "imagePullSecrets",
    "initContainers",
    "securityContext",
    "serviceAccountName",
    "terminationGracePeriodSeconds",
    "volumes",
)
_POD = "j.template.spec.template"
_POD_PATCH = (
    f"(!has({_POD}.metadata) || ({_none_of(_POD + '.metadata', KUEUE_NEVER_POD_METADATA)}))"
    f" && (!has({_POD}.spec) || ({_none_of(_POD + '.spec', KUEUE_NEVER_POD_SPEC)}))"
)
#: one replicated job's patch in Kueue's entry: no Job metadata, only the pod template's
_JOB_PATCH = (
    "!has(j.template) || (!has(j.template.metadata)"
    f" && (!has(j.template.spec) || !has({_POD}) || ({_POD_PATCH})))"
)
_TEMPLATE = "p.trainingRuntimeSpec.template"
KUEUE_ENTRY_SHAPE = (
    f"{_patches('object', f'p.manager == {KUEUE}')}.all(p, !has(p.trainingRuntimeSpec)"
    f" || !has({_TEMPLATE}) || (!has({_TEMPLATE}.metadata) && (!has({_TEMPLATE}.spec)"
    f" || !has({_TEMPLATE}.spec.replicatedJobs)"
    f" || {_TEMPLATE}.spec.replicatedJobs.all(j, {_JOB_PATCH}))))"
)
#: Kueue's entry is unchanged, or holds only what Kueue writes
KUEUE_ENTRY_ALLOWED = (
    f"{_patches('object', f'p.manager == {KUEUE}')}"
    f" == {_patches('oldObject', f'p.manager == {KUEUE}')} || ({KUEUE_ENTRY_SHAPE})"
)
#: a TrainingRuntime's (dispatch's runtime copy's) whole spec is unchanged
RUNTIME_SPEC_UNCHANGED = unchanged("spec")


def _for_kind(kind: str, expression: str) -> str:
    """``expression`` for objects of ``kind``; true for the others."""
    return f"request.kind.kind != {cel_string(kind)} || ({expression})"


def _refusal(what: str, changed: str) -> str:
    """The messageExpression of a rule 2 refusal: ``changed`` is a CEL string."""
    return f"{SUBJECT} + ': only dispatch may change {what}; changed: ' + {changed} + {ASKER}"


def _validation(expression: str, message: str, message_expression: str) -> JsonObj:
    return {
        "expression": expression,
        "message": message,
        "messageExpression": message_expression,
        "reason": "Forbidden",
    }


def owned_validations() -> list[JsonObj]:
    """Rule 2's validations, one per thing compared (so the message names it)."""
    found = [
        _validation(
            LABELS_UNCHANGED,
            f"only dispatch may change the {DISPATCH_PREFIX}* labels of dispatch's objects",
            _refusal("its dispatch.dev labels and annotations", "'metadata.labels'"),
        ),
        _validation(
            ANNOTATIONS_UNCHANGED,
            f"only dispatch may change the {DISPATCH_PREFIX}* annotations of dispatch's objects",
            _refusal("its dispatch.dev labels and annotations", "'metadata.annotations'"),
        ),
    ]
    for name in TRAINJOB_FIELDS:
        found.append(
            _validation(
                _for_kind("TrainJob", unchanged(f"spec.{name}")),
                f"only dispatch may change spec.{name} of dispatch's TrainJobs",
                _refusal("its spec", f"'spec.{name}'"),
            )
        )
    found += [
        _validation(
            _for_kind("TrainJob", OTHER_PATCHES_UNCHANGED),
            f"only dispatch may change spec.runtimePatches (but {KUEUE_MANAGER}'s entry) of "
            "dispatch's TrainJobs",
            _refusal("its spec", f"'spec.runtimePatches (other than {KUEUE_MANAGER})'"),
        ),
        _validation(
            _for_kind("TrainJob", KUEUE_ENTRY_ALLOWED),
            f"the {KUEUE_MANAGER} entry of spec.runtimePatches may hold only what Kueue writes",
            _refusal("its spec", f"'spec.runtimePatches[manager={KUEUE_MANAGER}] beyond Kueue'"),
        ),
        _validation(
            _for_kind("TrainingRuntime", RUNTIME_SPEC_UNCHANGED),
            "only dispatch may change the spec of dispatch's runtime copies",
            _refusal("its spec", "'spec'"),
        ),
    ]
    return found


# --- the objects -------------------------------------------------------------------------


def policy_names(options: ManifestOptions) -> tuple[str, str]:
    """The names of rule 1's and rule 2's policies (and of their bindings)."""
    return f"{options.name}-ended", f"{options.name}-owned"


def _match_constraints(resources: list[str]) -> JsonObj:
    return {
        "resourceRules": [
            {
                "apiGroups": [TRAINER_GROUP],
                "apiVersions": [TRAINER_VERSION],
                "operations": ["UPDATE"],
                "resources": resources,
                "scope": "Namespaced",
            }
        ],
        "objectSelector": label_selector({LABEL_JOB: None}),
        "matchPolicy": "Equivalent",
    }


def _policy(name: str, options: ManifestOptions, resources: list[str], spec: JsonObj) -> JsonObj:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(options.labels)},
        "spec": {
            "failurePolicy": options.failure_policy,
            "matchConstraints": _match_constraints(resources),
            **spec,
        },
    }


def _binding(name: str, options: ManifestOptions) -> JsonObj:
    spec: JsonObj = {"policyName": name, "validationActions": ["Deny"]}
    if options.namespace_selector is not None:
        spec["matchResources"] = {"namespaceSelector": label_selector(options.namespace_selector)}
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(options.labels)},
        "spec": spec,
    }


def policy_objects(options: ManifestOptions) -> list[JsonObj]:
    """Rule 1's policy and binding, then rule 2's (module docstring)."""
    ended, owned = policy_names(options)
    ended_policy = _policy(
        ended,
        options,
        ["trainjobs"],
        {
            "matchConditions": [{"name": "resumes", "expression": RESUMES}],
            "validations": [
                _validation(
                    NOT_ENDED,
                    f"an ended TrainJob ({ANNOTATION_ENDED}, or {ANNOTATION_STARTED} then "
                    "suspended) is never resumed",
                    NOT_ENDED_MESSAGE,
                )
            ],
        },
    )
    exempt = dispatch_asks(options.all_identities, options.groups)
    owned_policy = _policy(
        owned,
        options,
        ["trainjobs", "trainingruntimes"],
        {
            "matchConditions": [{"name": "not-dispatch", "expression": f"!({exempt})"}],
            "validations": owned_validations(),
        },
    )
    return [ended_policy, _binding(ended, options), owned_policy, _binding(owned, options)]

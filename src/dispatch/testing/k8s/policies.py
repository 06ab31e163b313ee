"""ValidatingAdmissionPolicies (``admissionregistration.k8s.io/v1``) evaluated as kube-apiserver
evaluates them (``k8s.io/apiserver/pkg/admission/plugin/policy/validating``).

For every create and update, :class:`ValidatingPolicies` pairs each binding with its policy
(``spec.policyName``; a binding whose policy is missing is skipped), and in the order policy
name, binding name (kube's order is a map's, i.e. unspecified):

1. matches the request against the policy's ``matchConstraints`` and then the binding's
   ``matchResources`` (``matching.Matcher``): namespaceSelector (cluster-scoped objects other
   than Namespaces always match), objectSelector (on the new or the old object's labels),
   excludeResourceRules, resourceRules (apiGroups, apiVersions, operations, ``resources``
   with ``*``, ``res/sub``, ``*/sub``, ``res/*``, ``resourceNames``, scope) and, with
   ``matchPolicy: Equivalent`` (the API's default), the other versions of the same stored
   resource. A failure to match (a missing namespace) is a configuration error;
2. evaluates ``matchConditions`` (all must be true; any false skips the binding; an error
   with none false follows ``failurePolicy``), with ``namespaceObject`` null as kube has it;
3. evaluates every validation; a false one is denied with its ``reason`` (Invalid 422 by
   default, Forbidden 403, Unauthorized 401, RequestEntityTooLarge 413) and the message of
   its ``messageExpression`` (trimmed; a non-string, an error, more than 5 KiB or a newline
   falls back), else its ``message``, else ``failed expression: <expression>``. A compile or
   runtime error is a denial (Invalid) under ``failurePolicy: Fail`` (the default) and nothing
   under ``Ignore``;
4. applies the binding's ``validationActions`` to each denial: ``Deny`` refuses, ``Warn``
   adds ``Validation failed for ValidatingAdmissionPolicy '<p>' with binding '<b>': <msg>``
   to ``request.store.warnings`` (the HTTP front sends them as ``Warning`` headers),
   ``Audit`` is ignored (the emulator keeps no audit log).

The first refusal is raised as kube raises it: ``admission.NewForbidden`` (``<resource>
"<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied
request: <message>``) with the reason and code of the decision and one cause holding the
inner message. Configuration errors (no matchConstraints, ``paramKind`` which the emulator
does not support, a namespace that cannot be found) follow ``failurePolicy`` and read
``failed to configure policy: ...`` / ``failed to configure binding: ...``.

The admissionregistration.k8s.io configuration kinds themselves are never subject to
policies (kube excludes them from API-defined policies). The objects are not converted to
the matched version (``matchPolicy: Equivalent``): the expressions see the stored
representation, which differs from kube's only for resources whose versions differ in shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dispatch.testing.k8s import cel
from dispatch.testing.k8s.admission import AdmissionRequest
from dispatch.testing.k8s.errors import ApiError, FieldError, not_found, qualified, status_details
from dispatch.testing.k8s.policy_matching import (
    Matcher,
    MatchError,
    NamespaceLoader,
    Target,
    is_namespace,
    target_of,
)
from dispatch.testing.k8s.resources import DEFAULT_RESOURCES, ResourceType

JsonObj = dict[str, Any]
PolicyLoader = Callable[[], tuple[list[JsonObj], list[JsonObj]]]

CONFIG_GROUP = "admissionregistration.k8s.io"
#: ``reasonToCode`` (policy_decision.go): the reasons a validation may give, and their codes
REASON_CODES: Mapping[str, int] = {
    "Invalid": 422,
    "Forbidden": 403,
    "Unauthorized": 401,
    "RequestEntityTooLarge": 413,
}
#: ``celconfig.MaxEvaluatedMessageExpressionSizeBytes``
MAX_MESSAGE_BYTES = 5 * 1024
#: the metadata fields kube keeps in ``namespaceObject`` (``CreateNamespaceObject``)
_NAMESPACE_METADATA = (
    "name", "generateName", "namespace", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "finalizers",
)  # fmt: skip


@dataclass(frozen=True)
class Decision:
    """A denial (``ActionDeny``) of one binding: from a false validation, an evaluation error
    under failurePolicy Fail, or a configuration error (``binding`` None: of the policy)."""

    policy: str
    binding: str | None
    message: str
    reason: str = "Invalid"


@dataclass(frozen=True)
class _Validation:
    expression: str
    program: cel.Program | cel.CompileError
    message: str
    message_program: cel.Program | cel.CompileError | None
    reason: str


@dataclass(frozen=True)
class _Compiled:
    variables: tuple[cel.Variable, ...]
    conditions: tuple[tuple[str, cel.Program | cel.CompileError], ...]
    validations: tuple[_Validation, ...]


def _compile(expression: str) -> cel.Program | cel.CompileError:
    try:
        return cel.compile_expression(expression)
    except cel.CompileError as ex:
        return ex


def compile_policy(spec: JsonObj) -> _Compiled:
    """Every expression of a policy's spec, compiled (errors kept, reported when used)."""
    validations = tuple(
        _Validation(
            expression=str(v.get("expression", "")),
            program=_compile(str(v.get("expression", ""))),
            message=str(v.get("message") or ""),
            message_program=_compile(v["messageExpression"])
            if v.get("messageExpression")
            else None,
            reason=str(v.get("reason") or "Invalid"),
        )
        for v in spec.get("validations") or []
    )
    return _Compiled(
        variables=tuple(
            cel.Variable(str(v["name"]), _compile(str(v["expression"])))
            for v in spec.get("variables") or []
        ),
        conditions=tuple(
            (str(c.get("name", "")), _compile(str(c["expression"])))
            for c in spec.get("matchConditions") or []
        ),
        validations=validations,
    )


# --- the request as CEL sees it -----------------------------------------------------------------


def request_value(request: AdmissionRequest, matched: ResourceType) -> JsonObj:
    """``cel.CreateAdmissionRequest``: kind and resource as matched, requestKind and
    requestResource as asked, the user, dryRun and the operation's options."""
    target = target_of(request)
    user = request.user
    options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions"}.get(request.operation)
    return {
        "kind": _gvk(matched),
        "resource": _gvr(matched),
        "subResource": target.subresource,
        "requestKind": _gvk(request.rtype),
        "requestResource": _gvr(request.rtype),
        "requestSubResource": target.subresource,
        "name": target.name,
        "namespace": target.namespace,
        "operation": request.operation,
        "userInfo": {
            "username": user.name if user else "",
            "uid": "",
            "groups": list(user.groups) if user else [],
            "extra": {},
        },
        "dryRun": request.dry_run,
        "options": {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"} if options_kind else None,
    }


def _gvk(rtype: ResourceType) -> JsonObj:
    return {"group": rtype.group, "version": rtype.version, "kind": rtype.kind}


def _gvr(rtype: ResourceType) -> JsonObj:
    return {"group": rtype.group, "version": rtype.version, "resource": rtype.plural}


def namespace_value(namespace: JsonObj | None) -> JsonObj | None:
    """``cel.CreateNamespaceObject``: the Namespace with only the fields kube exposes."""
    if namespace is None:
        return None
    meta = namespace.get("metadata") or {}
    return {
        "metadata": {k: meta[k] for k in _NAMESPACE_METADATA if k in meta},
        "spec": namespace.get("spec") or {},
        "status": namespace.get("status") or {},
    }


# --- evaluating one binding ---------------------------------------------------------------------


def _failure_policy(spec: JsonObj) -> str:
    return str(spec.get("failurePolicy") or "Fail")


def _run(result: cel.Program | cel.CompileError, evaluation: cel.Evaluation) -> Any:
    """The value of an expression, or kube's text of its compile or runtime error as a
    :class:`_Failed`. Raises :class:`cel.OutOfBudget`."""
    if isinstance(result, cel.CompileError):
        return _Failed(f"compilation error: {result}")
    try:
        return evaluation.evaluate(result)
    except cel.EvaluationError as ex:
        return _Failed(str(ex))


@dataclass(frozen=True)
class _Failed:
    message: str


def _conditions_match(compiled: _Compiled, activation: cel.Activation, fail: bool) -> bool | str:
    """``matchconditions.Matcher.Match``: True, False, or the error to deny with (Fail)."""
    evaluation = cel.Evaluation(
        replace(activation, namespace_object=None), cel.Budget(cel.MATCH_CONDITIONS_BUDGET)
    )
    errors: list[str] = []
    for _name, program in compiled.conditions:
        try:
            value = _run(program, evaluation)
        except cel.OutOfBudget as ex:
            return str(ex) if fail else False
        if isinstance(value, _Failed):
            errors.append(value.message)
        elif cel.truthy(value) is None:
            errors.append(f"expression '{program.expression}' must evaluate to bool")
        elif not cel.truthy(value):
            return False
    if errors:
        if not fail:
            return False
        return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return True


def _message(validation: _Validation, message_value: Any) -> str:
    """The denial message: messageExpression's string, else message, else the expression."""
    text = ""
    if isinstance(message_value, str):
        text = message_value.strip()
        if len(text.encode()) > MAX_MESSAGE_BYTES or "\n" in text:
            text = ""
    if not text and validation.message:
        text = validation.message.strip()
    return text or f"failed expression: {validation.expression.strip()}"


def validate(
    policy: str, binding: str, spec: JsonObj, compiled: _Compiled, activation: cel.Activation
) -> list[Decision]:
    """``validator.Validate``: the denials of one binding (true validations give none)."""
    fail = _failure_policy(spec) != "Ignore"

    def error(message: str) -> list[Decision]:
        return [Decision(policy, binding, message)] if fail else []

    if compiled.conditions:
        matched = _conditions_match(compiled, activation, fail)
        if isinstance(matched, str):
            return error(matched)
        if not matched:
            return []
    evaluation = cel.Evaluation(activation, cel.Budget(cel.BINDING_BUDGET))
    results: list[Any] = []
    try:
        for validation in compiled.validations:
            results.append(_run(validation.program, evaluation))
    except cel.OutOfBudget as ex:
        return error(str(ex))
    messages: list[Any] = []
    message_error: str | None = None
    try:
        for validation in compiled.validations:
            program = validation.message_program
            messages.append(None if program is None else _run(program, evaluation))
    except cel.OutOfBudget as ex:
        message_error = f"failed messageExpression: {ex}"
    decisions: list[Decision] = []
    for validation, result, message_value in zip(
        compiled.validations, results, messages + [None] * len(results), strict=False
    ):
        if isinstance(result, _Failed):
            decisions += error(result.message)
        elif message_error is not None:
            decisions += error(message_error)
        elif cel.truthy(result) is not True:
            if cel.truthy(result) is None:
                decisions += error(
                    f"expression '{validation.expression}' resulted in error: "
                    f"must evaluate to bool but got {cel.type_of(result)}"
                )
                continue
            decisions.append(
                Decision(policy, binding, _message(validation, message_value), validation.reason)
            )
    return decisions


# --- the plugin ----------------------------------------------------------------------------------


def _resource_types() -> Iterable[ResourceType]:
    return DEFAULT_RESOURCES


@dataclass
class ValidatingPolicies:
    """The ValidatingAdmissionPolicy admission plugin (module docstring).

    ``load`` gives the stored policies and bindings; ``namespace`` a Namespace by name (None
    when there is none); ``resource_types`` every served resource type (for
    ``matchPolicy: Equivalent``)."""

    load: PolicyLoader
    namespace: NamespaceLoader
    resource_types: Callable[[], Iterable[ResourceType]] = _resource_types
    _compiled: dict[str, _Compiled] = field(default_factory=dict, repr=False)

    def admit(self, request: AdmissionRequest) -> list[FieldError]:
        """Raise the first refusal (:class:`ApiError`); policies never give field errors."""
        if request.rtype.group == CONFIG_GROUP:
            return []
        decisions = self.decide(request)
        if decisions:
            raise refusal(request, decisions[0])
        return []

    def decide(self, request: AdmissionRequest) -> list[Decision]:
        """Every refusing decision for ``request``, in evaluation order (warnings recorded)."""
        policies, bindings = self.load()
        by_policy: dict[str, list[JsonObj]] = {}
        for binding in sorted(bindings, key=_name):
            by_policy.setdefault(str((binding.get("spec") or {}).get("policyName")), []).append(
                binding
            )
        target = target_of(request)
        rtype = request.rtype
        matcher = Matcher(
            self.namespace,
            [t for t in self.resource_types() if t.storage == rtype.storage],
        )
        denied: list[Decision] = []
        for policy in sorted(policies, key=_name):
            if _name(policy) in by_policy:
                denied += self._policy(request, target, matcher, policy, by_policy[_name(policy)])
        return denied

    def _policy(
        self,
        request: AdmissionRequest,
        target: Target,
        matcher: Matcher,
        policy: JsonObj,
        bindings: list[JsonObj],
    ) -> list[Decision]:
        name = _name(policy)
        spec = policy.get("spec") or {}
        constraints = spec.get("matchConstraints")
        try:
            if constraints is None:
                raise MatchError("policy contained no match constraints, a required field")
            matched = matcher.matches(constraints, target, request.obj)
        except MatchError as ex:
            return _config_error(spec, name, None, str(ex))
        if matched is None:
            return []
        compiled = self._compile(spec)
        denied: list[Decision] = []
        for binding in bindings:
            binding_name = _name(binding)
            bspec = binding.get("spec") or {}
            try:
                resources = bspec.get("matchResources")
                if (
                    resources is not None
                    and matcher.matches(resources, target, request.obj) is None
                ):
                    continue
            except MatchError as ex:
                denied += _config_error(spec, name, binding_name, str(ex))
                continue
            if spec.get("paramKind") is not None:
                denied += _config_error(
                    spec, name, binding_name, "paramKind is not supported by the emulator"
                )
                continue
            activation = self._activation(request, matched, compiled)
            for decision in validate(name, binding_name, spec, compiled, activation):
                denied += _act(request, decision, bspec.get("validationActions") or [])
        return denied

    def _activation(
        self, request: AdmissionRequest, matched: ResourceType, compiled: _Compiled
    ) -> cel.Activation:
        target = target_of(request)
        namespace = None
        if target.namespace and not is_namespace(request.rtype):
            namespace = self.namespace(target.namespace)
            if namespace is None:
                raise not_found("", "namespaces", target.namespace)
        return cel.Activation(
            object=request.obj,
            old_object=request.old,
            request=request_value(request, matched),
            namespace_object=namespace_value(namespace),
            params=None,
            variables=compiled.variables,
        )

    def _compile(self, spec: JsonObj) -> _Compiled:
        key = json.dumps(spec, sort_keys=True)
        if key not in self._compiled:
            self._compiled[key] = compile_policy(spec)
        return self._compiled[key]


def _act(request: AdmissionRequest, decision: Decision, actions: Sequence[str]) -> list[Decision]:
    """A binding's validationActions on one denial: the refusals it keeps (Deny); Warn
    adds kube's warning text to the request's warnings; Audit does nothing here."""
    out: list[Decision] = []
    for action in actions:
        if action == "Deny":
            out.append(decision)
        elif action == "Warn":
            request.store.warnings.append(
                f"Validation failed for ValidatingAdmissionPolicy '{decision.policy}' "
                f"with binding '{decision.binding}': {decision.message}"
            )
    return out


def _name(obj: JsonObj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _config_error(spec: JsonObj, policy: str, binding: str | None, error: str) -> list[Decision]:
    """``addConfigError``: a denial unless failurePolicy is Ignore (whatever the binding's
    validationActions: a configuration error always refuses under Fail)."""
    failure = _failure_policy(spec)
    if failure == "Ignore":
        return []
    if failure != "Fail":
        message = f"unrecognized failure policy: '{failure}'"
    elif binding is None:
        message = f"failed to configure policy: {error}"
    else:
        message = f"failed to configure binding: {error}"
    return [Decision(policy, binding, message)]


def denial_message(decision: Decision) -> str:
    """The inner message kube builds (dispatcher.go)."""
    if decision.binding is not None:
        return (
            f"ValidatingAdmissionPolicy '{decision.policy}' with binding '{decision.binding}' "
            f"denied request: {decision.message}"
        )
    return f"ValidatingAdmissionPolicy '{decision.policy}' denied request: {decision.message}"


def refusal(request: AdmissionRequest, decision: Decision) -> ApiError:
    """``admission.NewForbidden`` with the decision's reason and code and one cause."""
    meta = request.obj.get("metadata") or {}
    name = str(meta.get("name") or meta.get("generateName") or "Unknown")
    group, plural = request.rtype.group, request.rtype.plural
    inner = denial_message(decision)
    details = status_details(name, group, plural, causes=[{"message": inner}])
    return ApiError(
        REASON_CODES.get(decision.reason, 422),  # reasonToCode: anything else is 422
        decision.reason or "Invalid",
        f'{qualified(group, plural)} "{name}" is forbidden: {inner}',
        details,
    )

"""Kubernetes CEL over JSON objects, for the emulator's ValidatingAdmissionPolicies.

kube-apiserver compiles each expression of a policy with cel-go in an environment holding the
admission variables (``k8s.io/apiserver/pkg/admission/plugin/cel``) and evaluates it under a
cost budget. The emulator does the same with cel-python (``celpy``): :func:`compile_expression`
parses an expression and checks every name it uses against what the emulator supports, so an
unsupported function is a *compile* error naming it, never a silent runtime surprise;
:class:`Evaluation` binds one request's variables and evaluates compiled programs, computing the
policy's ``variables`` lazily, once each, in the order the policy lists them.

Variables of the activation (as kube's ``evaluationActivation``): ``object``, ``oldObject`` (null
on CREATE), ``request`` (the ``AdmissionRequest``: kind, resource, subResource, requestKind,
requestResource, requestSubResource, name, namespace, operation, userInfo {username, uid,
groups, extra}, dryRun, options), ``params`` (always null: ``paramKind`` is not supported),
``namespaceObject`` (null for cluster-scoped objects) and ``variables.<name>``.
``authorizer`` is not supported (a compile error says so).

Supported, each tested in tests/emulator/test_cel.py:

=====================================  =========================================================
standard CEL                           literals, arithmetic, ``&&``/``||``/``!``/``?:``,
                                       comparisons (cross-type numeric), heterogeneous ``==``
                                       over lists and maps, ``in``, indexing, ``size``,
                                       ``has()``, ``all``/``exists``/``exists_one``/``map``
                                       (2 and 3 arguments)/``filter``, ``contains``,
                                       ``startsWith``, ``endsWith``, ``matches``, ``dyn``,
                                       conversions ``int``/``uint``/``double``/``string``/
                                       ``bool``/``bytes``/``duration``/``timestamp``, ``type``
strings (cel-go ext.Strings v2)        ``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``,
                                       ``upperAscii``, ``replace``, ``split``, ``substring``,
                                       ``trim``, ``join``
lists (k8s)                            ``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``,
                                       ``lastIndexOf``
regex (k8s)                            ``find``, ``findAll`` (RE2, as kube)
URLs (k8s)                             ``url``, ``isURL``, ``getScheme``, ``getHost``,
                                       ``getHostname``, ``getPort``, ``getEscapedPath``,
                                       ``getQuery``
quantities (k8s)                       ``quantity``, ``isQuantity``, ``sign``, ``isInteger``,
                                       ``asInteger``, ``asApproximateFloat``, ``add``, ``sub``,
                                       ``compareTo``, ``isGreaterThan``, ``isLessThan``
sets (cel-go ext.Sets)                 ``sets.contains``, ``sets.equivalent``,
                                       ``sets.intersects``
=====================================  =========================================================

Not supported (a compile error naming the feature): optional types (``?.``, ``[?``,
``optional.*``, ``orValue``, ``hasValue``, ``value``), ``authorizer``, ``params`` of a
``paramKind``, IP and CIDR (``ip``, ``cidr``, ...), ``format`` and string ``format()``,
``strings.quote``, semver, two-variable comprehensions and ``transformList``/``transformMap``,
cel-go ext.Lists (``slice``, ``flatten``, ``sort``, ``distinct``, ``reverse``, ...), message
construction, ``jsonpatch``. Known differences: there is no static type check, so an
expression of the wrong result type (a validation that yields an int) fails when evaluated
rather than when compiled; runtime error texts follow cel-go's for missing keys, missing
overloads and division by zero, and are cel-python's otherwise.

Bounds: an expression longer than :data:`MAX_EXPRESSION_LENGTH` is refused at compile time; the
cost of an evaluation is the number of syntax-tree nodes visited (one per node, each element
of a comprehension counted), limited per expression (:data:`PER_CALL_LIMIT`, kube: "operation
cancelled: actual cost limit exceeded") and per binding (:class:`Budget`, kube: "validation
failed due to running out of cost budget, ..."). The limits are far lower than kube's own
units allow: Python is slower than cel-go, and the emulator must stay responsive.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import Activation as CelActivation
from celpy.evaluation import CELEvalError, Evaluator

from dispatch.testing.k8s.cel_library import FUNCTIONS, equals, type_name

JsonObj = dict[str, Any]
Value = Any
Tree = lark.Tree[Any]

#: Longest expression compiled (characters); the parser's recursion needs a bound.
MAX_EXPRESSION_LENGTH = 10_000
#: Syntax-tree nodes one expression may visit (kube's per-call limit, in the emulator's units).
PER_CALL_LIMIT = 200_000
#: Nodes all expressions of one binding may visit (kube's RuntimeCELCostBudget, likewise).
BINDING_BUDGET = 1_000_000
#: Nodes all matchConditions of one binding may visit (kube's RuntimeCELCostBudgetMatchConditions).
MATCH_CONDITIONS_BUDGET = 250_000

OUT_OF_BUDGET = (
    "validation failed due to running out of cost budget, no further validation rules will be run"
)
COST_LIMIT_EXCEEDED = "operation cancelled: actual cost limit exceeded"

ROOT_VARIABLES = frozenset(
    {"object", "oldObject", "request", "params", "namespaceObject", "variables"}
)
_TYPE_IDENTS = frozenset(
    {"int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type"}
)
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_STANDARD_FUNCTIONS = frozenset(
    {
        "size", "contains", "startsWith", "endsWith", "matches", "min",
        "int", "uint", "double", "string", "bool", "bytes", "duration", "timestamp", "type",
        "dyn", "has",
        "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getMonth",
        "getHours", "getMilliseconds", "getMinutes", "getSeconds",
    }
)  # fmt: skip
_SUPPORTED_FUNCTIONS = _STANDARD_FUNCTIONS | {n for n in FUNCTIONS if not n.startswith("_")}
_NAMESPACES = frozenset({"sets", "strings", "optional", "format", "lists", "math", "semver"})
#: Kubernetes CEL features the emulator lacks, each with the words a compile error uses.
UNSUPPORTED: dict[str, str] = {
    "authorizer": "the authorizer library",
    "orValue": "optional types", "hasValue": "optional types", "value": "optional types",
    "or": "optional types", "optional.of": "optional types", "optional.none": "optional types",
    "optional.ofNonZeroValue": "optional types",
    "ip": "the IP library", "isIP": "the IP library", "cidr": "the CIDR library",
    "isCIDR": "the CIDR library", "family": "the IP library", "isLoopback": "the IP library",
    "containsIP": "the CIDR library", "containsCIDR": "the CIDR library",
    "strings.quote": "strings.quote", "reverse": "cel-go ext.Lists",
    "semver": "the semver library", "isSemver": "the semver library",
    "slice": "cel-go ext.Lists", "flatten": "cel-go ext.Lists", "sort": "cel-go ext.Lists",
    "sortBy": "cel-go ext.Lists", "distinct": "cel-go ext.Lists", "first": "cel-go ext.Lists",
    "last": "cel-go ext.Lists", "lists.range": "cel-go ext.Lists",
    "transformList": "two-variable comprehensions", "transformMap": "two-variable comprehensions",
    "transformMapEntry": "two-variable comprehensions",
    "jsonpatch.escapeKey": "the JSON patch library",
    # whole namespaces, for their functions not named above
    "optional": "optional types", "format": "the format library",
    "strings": "cel-go ext.Strings beyond version 2", "lists": "cel-go ext.Lists",
    "math": "cel-go ext.Math",
}  # fmt: skip


class CelError(Exception):
    """A CEL expression could not be compiled or evaluated; ``str()`` is kube's message."""


class CompileError(CelError):
    """The expression does not compile (syntax, an unknown name, an unsupported feature).
    ``str()`` reads ``compilation failed: ERROR: <input>:L:C: <detail>``, as kube's."""

    def __init__(self, expression: str, detail: str, line: int = 1, column: int = 1) -> None:
        self.expression = expression
        self.detail = detail
        super().__init__(f"compilation failed: ERROR: <input>:{line}:{column}: {detail}")


class EvaluationError(CelError):
    """The expression failed at run time (no such key, no such overload, cost limit).
    ``str()`` reads ``expression '<expr>' resulted in error: <detail>``, as kube's."""

    def __init__(self, expression: str, detail: str) -> None:
        self.expression = expression
        self.detail = detail
        super().__init__(f"expression '{expression}' resulted in error: {detail}")


class OutOfBudget(CelError):
    """The binding's cost budget ran out: kube stops evaluating the binding."""

    def __init__(self) -> None:
        super().__init__(OUT_OF_BUDGET)


@dataclass
class Budget:
    """What is left of one binding's cost budget (shared by its expressions)."""

    remaining: int = BINDING_BUDGET


# --- compiling ---------------------------------------------------------------------------------

_ENVIRONMENT = celpy.Environment()


@dataclass(frozen=True)
class Program:
    """A compiled expression (its source and syntax tree)."""

    expression: str
    tree: Tree


def compile_expression(expression: str) -> Program:
    """Parse ``expression`` and check every name in it. Raises :class:`CompileError`."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CompileError(
            expression, f"expression is longer than {MAX_EXPRESSION_LENGTH} characters"
        )
    if not expression.strip():
        raise CompileError(expression, "Syntax error: the expression is empty")
    try:
        tree = _ENVIRONMENT.compile(expression)
    except CELParseError as ex:
        raise _syntax_error(expression, ex) from None
    except RecursionError:
        raise CompileError(expression, "expression is nested too deeply") from None
    _check(expression, tree, frozenset())
    return Program(expression, tree)


def _syntax_error(expression: str, ex: CELParseError) -> CompileError:
    line, column = ex.line or 1, ex.column or 1
    if "?." in expression or "[?" in expression:
        return CompileError(
            expression,
            "optional types ('?.', '[?') are not supported by the emulator's CEL",
            line,
            column,
        )
    first = str(ex.args[0]).splitlines()[0] if ex.args else "syntax error"
    return CompileError(expression, f"Syntax error: {first}", line, column)


def _token(node: Tree, index: int) -> lark.Token:
    child = node.children[index]
    if not isinstance(child, lark.Token):
        raise TypeError(f"expected a token in {node.data}")
    return child


def _trees(node: Tree) -> Iterator[Tree]:
    return (c for c in node.children if isinstance(c, lark.Tree))


def _bare_ident(node: Tree) -> str | None:
    """The name if ``node`` is nothing but an identifier (``x`` in ``l.all(x, ...)``)."""
    while len(node.children) == 1 and isinstance(node.children[0], lark.Tree):
        node = node.children[0]
    if node.data == "ident":
        return str(_token(node, 0))
    return None


def _unsupported(expression: str, name: str, at: lark.Token) -> CompileError:
    what = UNSUPPORTED.get(name) or UNSUPPORTED.get(name.partition(".")[0] if "." in name else "")
    if what is not None:
        detail = f"'{name}' ({what}) is not supported by the emulator's CEL"
    else:
        detail = f"undeclared reference to '{name}' (in container '')"
    return CompileError(expression, detail, at.line or 1, at.column or 1)


def _check(expression: str, node: Tree, bound: frozenset[str]) -> None:
    """Raise :class:`CompileError` for a name the emulator cannot evaluate."""
    if node.data == "member_dot_arg":
        _check_call(expression, node, bound)
        return
    if node.data == "ident_arg":
        name = _token(node, 0)
        if str(name) not in _SUPPORTED_FUNCTIONS or str(name) == "min":
            raise _unsupported(expression, str(name), name)
        if str(name) == "has":
            _check_has(expression, node, name)
    elif node.data == "ident":
        name = _token(node, 0)
        if str(name) not in bound | ROOT_VARIABLES | _TYPE_IDENTS:
            raise _unsupported(expression, str(name), name)
    elif node.data in ("member_object", "dot_ident", "dot_ident_arg"):
        raise CompileError(expression, f"'{node.data}' is not supported by the emulator's CEL")
    for child in _trees(node):
        _check(expression, child, bound)


def _check_has(expression: str, node: Tree, name: lark.Token) -> None:
    args = list(_trees(node))
    arg = args[0].children[0] if args and len(args[0].children) == 1 else None
    if not isinstance(arg, lark.Tree) or _member_dot(arg) is None:
        raise CompileError(
            expression, "invalid argument to has() macro", name.line or 1, name.column or 1
        )


def _member_dot(node: Tree) -> Tree | None:
    while node.data != "member_dot" and len(node.children) == 1:
        child = node.children[0]
        if not isinstance(child, lark.Tree):
            return None
        node = child
    return node if node.data == "member_dot" else None


def _check_call(expression: str, node: Tree, bound: frozenset[str]) -> None:
    receiver = node.children[0]
    name = _token(node, 1)
    args = list(_trees(node.children[2])) if len(node.children) > 2 else []
    if not isinstance(receiver, lark.Tree):
        raise TypeError("expected a receiver")
    namespace = _bare_ident(receiver)
    if namespace in _NAMESPACES and namespace not in bound:
        qualified = f"{namespace}.{name}"
        if qualified not in FUNCTIONS:
            raise _unsupported(expression, qualified, name)
        for arg in args:
            _check(expression, arg, bound)
        return
    if str(name) in _MACROS:
        variable = _bare_ident(args[0]) if args else None
        counts = (2, 3) if str(name) == "map" else (2,)
        if len(args) == 3 and str(name) != "map":
            raise CompileError(
                expression,
                f"'{name}' with two variables (two-variable comprehensions) is not supported "
                "by the emulator's CEL",
                name.line or 1,
                name.column or 1,
            )
        if variable is None or len(args) not in counts:
            raise CompileError(
                expression, f"invalid arguments to {name}() macro", name.line or 1, name.column or 1
            )
        _check(expression, receiver, bound)
        for arg in args[1:]:
            _check(expression, arg, bound | {variable})
        return
    _check(expression, receiver, bound)
    if str(name) not in _SUPPORTED_FUNCTIONS or str(name) in ("has", "dyn"):
        raise _unsupported(expression, str(name), name)
    for arg in args:
        _check(expression, arg, bound)


# --- evaluating --------------------------------------------------------------------------------


class _Exhausted(Exception):
    """Raised from deep inside an evaluation when a cost limit is passed."""

    def __init__(self, per_call: bool) -> None:
        super().__init__("cost")
        self.per_call = per_call


@dataclass
class _Meter:
    """Counts the nodes one expression visits against its two limits."""

    budget: Budget
    used: int = 0

    def charge(self) -> None:
        self.used += 1
        if self.used > PER_CALL_LIMIT:
            raise _Exhausted(per_call=True)
        if self.used > self.budget.remaining:
            raise _Exhausted(per_call=False)


class _Evaluator(Evaluator):
    """cel-python's evaluator, metered, with kube's ``has()``, the comprehension macros (CEL's
    error rules, three-argument ``map``), ``min()`` and namespaced functions
    (``sets.contains``)."""

    def __init__(self, ast: Tree, activation: CelActivation, meter: _Meter) -> None:
        super().__init__(ast, activation)
        self.meter = meter

    def _visit_tree(self, tree: Tree) -> Any:
        # lark's Interpreter routes ``visit`` and ``visit_children`` through here
        self.meter.charge()
        return super()._visit_tree(tree)

    def sub_evaluator(self, ast: Tree) -> Evaluator:
        return _Evaluator(ast, self.activation, self.meter)

    def macro_has_eval(self, exprlist: Tree) -> Any:
        node = _member_dot(exprlist)
        if node is None:
            return CELEvalError("invalid argument to has() macro", ValueError, ())
        target = self.visit(node.children[0])
        name = str(_token(node, 1))
        if isinstance(target, CELEvalError):
            return target
        if isinstance(target, dict):
            return celtypes.BoolType(name in target)
        return CELEvalError(f"no such key: {name}", KeyError, (name,))

    def member_dot_arg(self, tree: Tree) -> Any:
        receiver = tree.children[0]
        name = str(_token(tree, 1))
        args = list(_trees(tree.children[2])) if len(tree.children) > 2 else []
        if isinstance(receiver, lark.Tree):
            namespace = _bare_ident(receiver)
            if namespace in _NAMESPACES and f"{namespace}.{name}" in FUNCTIONS:
                values = [self.visit(a) for a in args]
                for v in values:
                    if isinstance(v, CELEvalError):
                        return v
                return FUNCTIONS[f"{namespace}.{name}"](*values)
            if name in _MACROS:
                return self._macro(name, receiver, args)
            if name == "min" and not args:
                return FUNCTIONS["min"](self.visit(receiver))
        return super().member_dot_arg(tree)

    def _macro(self, name: str, receiver: Tree, args: list[Tree]) -> Any:
        """``all``, ``exists``, ``exists_one``, ``map`` (2 or 3 arguments), ``filter`` over a
        list's elements or a map's keys, with CEL's error rules: ``all``/``exists`` let a
        decisive element win over another's error, the others propagate the first error."""
        items = self.visit(receiver)
        if isinstance(items, CELEvalError):
            return items
        if not isinstance(items, list | dict):
            return CELEvalError(f"no such overload: {name} on {type_name(items)}", TypeError, ())
        variable = _bare_ident(args[0]) or ""
        steps = [self.sub_evaluator(a) for a in args[1:]]
        try:
            if name in ("all", "exists"):
                return self._quantifier(name == "all", items, variable, steps[0])
            found = []
            for item in items:
                bound = {variable: item}
                if name != "map":
                    if _boolean(steps[0].evaluate(bound)):
                        found.append(item)
                elif len(steps) == 1 or _boolean(steps[0].evaluate(bound)):
                    found.append(steps[-1].evaluate(bound))
        except CELEvalError as ex:
            return ex
        if name == "exists_one":
            return celtypes.BoolType(len(found) == 1)
        return celtypes.ListType(found)

    @staticmethod
    def _quantifier(universal: bool, items: Any, variable: str, body: Evaluator) -> Any:
        error: CELEvalError | None = None
        for item in items:
            try:
                holds = _boolean(body.evaluate({variable: item}))
            except CELEvalError as ex:
                error = error or ex
                continue
            if holds != universal:
                return celtypes.BoolType(holds)
        return error if error is not None else celtypes.BoolType(universal)


def _boolean(value: Any) -> bool:
    """A macro's predicate value, which must be a bool."""
    if isinstance(value, celtypes.BoolType | bool):
        return bool(value)
    raise CELEvalError(f"no such overload: predicate of type {type_name(value)}", TypeError, ())


#: the Python errors cel-python's evaluator may let escape on a type mismatch
_PYTHON_FAILURES = (TypeError, ValueError, AttributeError, IndexError, KeyError, OverflowError)


def _new_cel_activation() -> CelActivation:
    return CelActivation(package=None, annotations=_ENVIRONMENT.annotations, functions=FUNCTIONS)


@dataclass(frozen=True)
class Variable:
    """One of a policy's ``variables``: its name and its compiled expression (or why it did
    not compile: kube reports that only when an expression reads the variable)."""

    name: str
    program: Program | CompileError


@dataclass
class Activation:
    """The values one admission request gives the expressions (plain JSON)."""

    object: JsonObj | None
    old_object: JsonObj | None
    request: JsonObj
    namespace_object: JsonObj | None = None
    params: JsonObj | None = None
    variables: Sequence[Variable] = ()


class _LazyVariables(celtypes.MapType):
    """``variables``: each computed on first use, once, within the reading expression's cost."""

    def __init__(self, evaluation: Evaluation) -> None:
        super().__init__({})
        self._evaluation = evaluation
        self._declared = {v.name: v for v in evaluation.activation.variables}
        self._values: dict[str, Value] = {}

    def __contains__(self, key: object) -> bool:
        return str(key) in self._declared

    def __getitem__(self, key: Any) -> Value:
        name = str(key)
        if name not in self._declared:
            raise KeyError(name)
        if name not in self._values:
            self._values[name] = self._evaluation.variable(self._declared[name])
        return self._values[name]


@dataclass
class Evaluation:
    """One request's activation, bound for evaluating programs against one budget."""

    activation: Activation
    budget: Budget = field(default_factory=Budget)
    _context: dict[str, Value] = field(init=False)
    _meter: _Meter = field(init=False)

    def __post_init__(self) -> None:
        a = self.activation
        self._meter = _Meter(self.budget)
        self._context = {
            "object": _from_json(a.object),
            "oldObject": _from_json(a.old_object),
            "request": _from_json(a.request),
            "params": _from_json(a.params),
            "namespaceObject": _from_json(a.namespace_object),
            "variables": _LazyVariables(self),
        }

    def evaluate(self, program: Program) -> Value:
        """The value of ``program``. Raises :class:`EvaluationError` (its runtime error, or
        the per-expression cost limit) or :class:`OutOfBudget`."""
        self._meter = _Meter(self.budget)
        try:
            value = self._run(program)
        except _Exhausted as ex:
            if ex.per_call:
                raise EvaluationError(program.expression, COST_LIMIT_EXCEEDED) from None
            raise OutOfBudget() from None
        finally:
            self.budget.remaining = max(0, self.budget.remaining - self._meter.used)
        if isinstance(value, CELEvalError):
            raise EvaluationError(program.expression, describe(value))
        return value

    def variable(self, variable: Variable) -> Value:
        """A variable's value, or a ``CELEvalError`` saying why it has none (kube's text)."""
        if isinstance(variable.program, CompileError):
            text = f'composited variable "{variable.name}" fails to compile: {variable.program}'
            return CELEvalError(text, ValueError, ())
        value = self._run(variable.program)
        if isinstance(value, CELEvalError):
            text = f'composited variable "{variable.name}" fails to evaluate: {describe(value)}'
            return CELEvalError(text, ValueError, ())
        return value

    def _run(self, program: Program) -> Value:
        evaluator = _Evaluator(program.tree, _new_cel_activation(), self._meter)
        try:
            return evaluator.evaluate(self._context)
        except CELEvalError as ex:
            return ex
        except RecursionError:
            return CELEvalError("expression is nested too deeply", RecursionError, ())
        except _PYTHON_FAILURES as ex:
            # cel-python lets a few type mismatches escape as Python errors: in CEL they are
            # runtime errors of the expression
            return CELEvalError("no such overload", type(ex), ex.args)


def _from_json(value: Any) -> Value:
    return None if value is None else json_to_cel(value)


def describe(error: CELEvalError) -> str:
    """A cel-python runtime error in cel-go's words where they are known."""
    message = str(error.args[0]) if error.args else "error"
    kind = error.args[1] if len(error.args) > 1 else None
    if message.startswith("no such member in mapping: "):
        return "no such key: " + message.removeprefix("no such member in mapping: ").strip("'")
    if message == "no such key" and len(error.args) > 2 and error.args[2]:
        return f"no such key: {error.args[2][0]}"
    if message == "return error for overflow":
        cause = str(error.args[2][0]) if len(error.args) > 2 and error.args[2] else ""
        return "integer overflow" if cause == "overflow" else f"type conversion error: {cause}"
    if kind is ZeroDivisionError:
        return "division by zero" if "divide" in message else "modulus by zero"
    if message.startswith("found no matching overload") or message == "no such overload":
        return "no such overload"
    if "does not support field selection" in message:
        target = message.split(" with type")[0]
        return "no such overload: field selection on " + ("null" if target == "None" else target)
    if kind is IndexError and message == "invalid_argument":
        return "index out of range"
    return message


def truthy(value: Value) -> bool | None:
    """``value`` as a CEL bool, or None if it is not one."""
    if isinstance(value, celtypes.BoolType | bool):
        return bool(value)
    return None


def type_of(value: Value) -> str:
    """The CEL type name of an evaluated value (``int``, ``string``, ``null_type``, ...)."""
    return type_name(value)


def same(a: Value, b: Value) -> bool:
    """CEL equality of two evaluated values (exposed for tests and callers)."""
    return equals(a, b)

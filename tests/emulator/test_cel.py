"""The emulator's Kubernetes CEL (dispatch.testing.k8s.cel): the supported subset, one case per
function, the clear errors of what is not supported, runtime errors in kube's words, bounds."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.testing.k8s import cel

OBJECT = {
    "metadata": {"name": "web", "namespace": "team", "labels": {"app": "web", "tier": "front"}},
    "spec": {
        "replicas": 3,
        "ratio": 1.5,
        "ports": [80, 443, 8080],
        "names": ["b", "a"],
        "text": "  Hello World  ",
        "memory": "1.5Gi",
        "endpoint": "https://user@example.com:8443/api/v1?watch=true&x=1",
    },
}
REQUEST = {
    "operation": "UPDATE",
    "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
    "userInfo": {"username": "alice", "uid": "", "groups": ["dev", "system:authenticated"]},
    "dryRun": False,
}


def run(expression: str, **activation: Any) -> Any:
    values: dict[str, Any] = {"object": OBJECT, "old_object": None, "request": REQUEST}
    values.update(activation)
    evaluation = cel.Evaluation(cel.Activation(**values))
    return evaluation.evaluate(cel.compile_expression(expression))


SUPPORTED = [
    # standard CEL
    ("object.spec.replicas <= 5", True),
    ("object.spec.replicas * 2 + 1 == 7", True),
    ("object.spec.replicas > 2 && object.metadata.name == 'web'", True),
    ("!(object.spec.replicas == 3) || false", False),
    ("object.spec.replicas == 3 ? 'three' : 'other'", "three"),
    ("object.spec.ratio > object.spec.replicas", False),  # cross-type numeric ordering
    ("object.spec.replicas == 3.0", True),  # heterogeneous equality
    ("object.spec.replicas == '3'", False),
    ("[1, 'a', [2]] == [1, 'a', [2]]", True),
    ("{'a': [1]} == {'a': [1]}", True),
    ("{'a': 1} == {'a': 2}", False),
    ("443 in object.spec.ports", True),
    ("'app' in object.metadata.labels", True),
    ("object.metadata.labels['tier']", "front"),
    ("object.spec.ports[1]", 443),
    ("size(object.spec.ports) == 3 && object.spec.names.size() == 2", True),
    ("has(object.spec.replicas)", True),
    ("has(object.spec.missing)", False),
    ("object.spec.ports.all(p, p > 0)", True),
    ("object.spec.ports.exists(p, p == 8080)", True),
    ("object.spec.ports.exists_one(p, p > 100)", False),
    ("object.spec.ports.map(p, p * 2)", [160, 886, 16160]),
    ("object.spec.ports.map(p, p > 100, p + 1)", [444, 8081]),
    ("object.spec.ports.filter(p, p < 1000)", [80, 443]),
    ("object.metadata.labels.all(k, k.size() > 2)", True),
    ("'Hello'.contains('ell') && 'Hello'.startsWith('He') && 'Hello'.endsWith('lo')", True),
    ("'abc123'.matches('^[a-z]+[0-9]+$')", True),
    ("string(object.spec.replicas) + '/' + string(5)", "3/5"),
    ("int('42') + int(2.9)", 44),
    ("double(object.spec.replicas) / 2.0", 1.5),
    ("dyn(object.spec.replicas) == 3", True),
    ("type(object.spec.replicas) == int", True),
    ("oldObject == null", True),
    ("request.userInfo.username == 'alice' && 'dev' in request.userInfo.groups", True),
    # strings (ext.Strings v2)
    ("'hello'.charAt(1)", "e"),
    ("'hello'.indexOf('l')", 2),
    ("'hello'.indexOf('l', 3)", 3),
    ("'hello'.lastIndexOf('l')", 3),
    ("'HeLLo'.lowerAscii()", "hello"),
    ("'HeLLo'.upperAscii()", "HELLO"),
    ("'a-b-c'.replace('-', '+')", "a+b+c"),
    ("'a-b-c'.replace('-', '+', 1)", "a+b-c"),
    ("'a,b,c'.split(',')", ["a", "b", "c"]),
    ("'a,b,c'.split(',', 2)", ["a", "b,c"]),
    ("'hello'.substring(1, 3)", "el"),
    ("'hello'.substring(2)", "llo"),
    ("object.spec.text.trim()", "Hello World"),
    ("['a', 'b'].join()", "ab"),
    ("['a', 'b'].join(', ')", "a, b"),
    # lists
    ("object.spec.ports.isSorted() && !object.spec.names.isSorted()", True),
    ("object.spec.ports.sum()", 8603),
    ("object.spec.ports.min()", 80),
    ("object.spec.ports.max()", 8080),
    ("object.spec.ports.indexOf(443)", 1),
    ("[1, 2, 1].lastIndexOf(1)", 2),
    # regex
    ("'abc 123 def 45'.find('[0-9]+')", "123"),
    ("'abc 123 def 45'.findAll('[0-9]+')", ["123", "45"]),
    ("'abc 123 def 45'.findAll('[0-9]+', 1)", ["123"]),
    # URLs
    ("isURL(object.spec.endpoint) && !isURL('not a url')", True),
    ("url(object.spec.endpoint).getScheme()", "https"),
    ("url(object.spec.endpoint).getHost()", "example.com:8443"),
    ("url(object.spec.endpoint).getHostname()", "example.com"),
    ("url(object.spec.endpoint).getPort()", "8443"),
    ("url(object.spec.endpoint).getEscapedPath()", "/api/v1"),
    ("url(object.spec.endpoint).getQuery()['watch']", ["true"]),
    # quantities
    ("isQuantity(object.spec.memory) && !isQuantity('1.5 Gi')", True),
    ("quantity(object.spec.memory).isGreaterThan(quantity('1Gi'))", True),
    ("quantity('500m').isLessThan(quantity('1'))", True),
    ("quantity('1k').compareTo(quantity('1000'))", 0),
    ("quantity('1') == quantity('1000m') && quantity('1') != quantity('1001m')", True),
    ("type(quantity('1')) == type(url('https://a')) ", False),
    ("quantity('500m').add(quantity('1500m')).asInteger()", 2),
    ("quantity('2').sub(1).asInteger()", 1),
    ("quantity('1.5').isInteger()", False),
    ("quantity('-3').sign()", -1),
    ("quantity('250m').asApproximateFloat()", 0.25),
    # sets
    ("sets.contains([1, 2, 3], [2, 3])", True),
    ("sets.equivalent([1, 2], [2, 1, 1])", True),
    ("sets.intersects([1, 2], [3])", False),
]


@pytest.mark.parametrize(("expression", "expected"), SUPPORTED)
def test_supported(expression: str, expected: Any) -> None:
    value = run(expression)
    assert cel.same(value, expected), f"{expression} -> {value!r}"


def test_variables_are_lazy_ordered_and_evaluated_once() -> None:
    double = cel.Variable("double", cel.compile_expression("object.spec.replicas * 2"))
    plus = cel.Variable("plus", cel.compile_expression("variables.double + 1"))
    costly = cel.Variable("costly", cel.compile_expression("object.spec.ports.all(p, p > 0)"))
    broken = cel.Variable("broken", cel.compile_expression("object.spec.nothing"))
    budget = cel.Budget(10_000)
    evaluation = cel.Evaluation(
        cel.Activation(OBJECT, None, REQUEST, variables=(double, plus, costly, broken)), budget
    )
    assert cel.same(evaluation.evaluate(cel.compile_expression("variables.plus == 7")), True)
    # a variable's cost is paid by the first expression reading it, and only once
    reads = cel.compile_expression("variables.costly")
    before = budget.remaining
    assert cel.same(evaluation.evaluate(reads), True)
    first = before - budget.remaining
    before = budget.remaining
    evaluation.evaluate(reads)
    assert before - budget.remaining < first
    # a broken variable is an error only for an expression that reads it
    with pytest.raises(cel.EvaluationError) as err:
        evaluation.evaluate(cel.compile_expression("variables.broken == 1"))
    assert str(err.value) == (
        "expression 'variables.broken == 1' resulted in error: "
        'composited variable "broken" fails to evaluate: no such key: nothing'
    )
    with pytest.raises(cel.EvaluationError, match="no such key: undeclared"):
        evaluation.evaluate(cel.compile_expression("variables.undeclared"))


def test_a_variable_that_does_not_compile_fails_when_read() -> None:
    with pytest.raises(cel.CompileError) as compiled:
        cel.compile_expression("object.spec.(")
    bad = cel.Variable("bad", compiled.value)
    evaluation = cel.Evaluation(cel.Activation(OBJECT, None, REQUEST, variables=(bad,)))
    assert cel.same(evaluation.evaluate(cel.compile_expression("1 == 1")), True)
    with pytest.raises(cel.EvaluationError, match='composited variable "bad" fails to compile'):
        evaluation.evaluate(cel.compile_expression("variables.bad"))


def test_the_activation_variables() -> None:
    namespace = {"metadata": {"name": "team", "labels": {"env": "prod"}}}
    old = {"spec": {"replicas": 1}}
    assert cel.same(run("oldObject.spec.replicas < object.spec.replicas", old_object=old), True)
    assert cel.same(run("namespaceObject.metadata.labels.env", namespace_object=namespace), "prod")
    assert cel.same(run("params == null"), True)
    assert cel.same(run("request.operation"), "UPDATE")


RUNTIME_ERRORS = [
    ("object.spec.nothing", "no such key: nothing"),
    ("object.metadata.labels['nothing'] == 'x'", "no such key: nothing"),
    ("has(object.nothing.deeper)", "no such key: nothing"),
    ("object.spec.replicas + 'a'", "no such overload"),
    ("object.spec.replicas / 0", "division by zero"),
    ("object.spec.ports[7]", "index out of range"),
    ("oldObject.spec", "no such overload: field selection on null"),
    ("[].max()", "max(list) called on empty list"),
    ("quantity('12 parsecs')", "quantities must match the regular expression"),
    ("url('no-scheme')", "URL parse error"),
    ("9223372036854775807 + 1", "integer overflow"),
    ("int('x')", "type conversion error"),
    ("object.spec.replicas.all(x, true)", "no such overload: all on int"),
    ("'abc'.exists(c, true)", "no such overload: exists on string"),
    ("object.spec.ports.filter(p, p)", "no such overload: predicate of type int"),
    ("size(5)", "no such overload"),
    ("object.spec.replicas[0]", "no such overload"),
    ("object.spec.ports.map(p, 10 / (p - 80))", "division by zero"),
    ("object.spec.ports.exists_one(p, 10 / (p - 80) > 0)", "division by zero"),
]


@pytest.mark.parametrize(("expression", "detail"), RUNTIME_ERRORS)
def test_runtime_errors_name_the_expression(expression: str, detail: str) -> None:
    with pytest.raises(cel.EvaluationError) as err:
        run(expression)
    assert str(err.value).startswith(f"expression '{expression}' resulted in error: {detail}")


def test_errors_short_circuit_as_in_cel() -> None:
    assert cel.same(run("true || object.spec.nothing"), True)
    assert cel.same(run("object.spec.nothing || true"), True)
    assert cel.same(run("false && object.spec.nothing"), False)
    # all/exists: a decisive element wins over another element's error
    assert cel.same(run("[0, 1].exists(x, 1 / x == 1)"), True)
    assert cel.same(run("[0, 1].all(x, 1 / x == 5)"), False)
    with pytest.raises(cel.EvaluationError, match="division by zero"):
        run("[0, 1].all(x, 1 / x == 1)")


UNSUPPORTED = [
    ("object.spec?.replicas", "optional types ('?.', '[?') are not supported"),
    ("object.spec.replicas.orValue(1)", "'orValue' (optional types) is not supported"),
    ("optional.of(1).hasValue()", "'optional.of' (optional types) is not supported"),
    ("authorizer.group('apps').check('get').allowed()", "'authorizer' (the authorizer library)"),
    ("ip('10.0.0.1').family() == 4", "'ip' (the IP library) is not supported"),
    ("cidr('10.0.0.0/8').containsIP('10.1.1.1')", "'cidr' (the CIDR library)"),
    ("'%s'.format(['x'])", "'format' (the format library) is not supported"),
    ("format.dns1123Label().validate('x')", "'format.dns1123Label' (the format library)"),
    ("strings.quote('x')", "'strings.quote' (strings.quote) is not supported"),
    ("semver('1.0.0').major() == 1", "'semver' (the semver library) is not supported"),
    ("object.spec.ports.all(i, p, p > 0)", "two-variable comprehensions"),
    ("object.spec.ports.transformList(i, p, p)", "'transformList' (two-variable"),
    ("object.spec.ports.sort()", "'sort' (cel-go ext.Lists) is not supported"),
    ("lists.range(3)", "'lists.range' (cel-go ext.Lists) is not supported"),
    ("object.spec.ports.reduce(a, p, 0, a + p)", "undeclared reference to 'reduce'"),
    ("nothing == 1", "undeclared reference to 'nothing'"),
    ("frobnicate(object)", "undeclared reference to 'frobnicate'"),
    ("has(object)", "invalid argument to has() macro"),
    ("object.spec.ports.all(1, true)", "invalid arguments to all() macro"),
]


@pytest.mark.parametrize(("expression", "detail"), UNSUPPORTED)
def test_unsupported_features_are_compile_errors_naming_them(expression: str, detail: str) -> None:
    with pytest.raises(cel.CompileError) as err:
        cel.compile_expression(expression)
    assert str(err.value).startswith("compilation failed: ERROR: <input>:")
    assert detail in str(err.value)


def test_syntax_errors_are_compile_errors() -> None:
    for expression in ("object.spec.replicas <=", "(1 + 2", "", "   "):
        with pytest.raises(cel.CompileError, match="compilation failed: ERROR: <input>"):
            cel.compile_expression(expression)


def test_huge_expressions_are_refused() -> None:
    expression = " || ".join(["object.spec.replicas == 1"] * 1000)
    assert len(expression) > cel.MAX_EXPRESSION_LENGTH
    with pytest.raises(cel.CompileError, match="longer than 10000 characters"):
        cel.compile_expression(expression)


TEN = "[0,1,2,3,4,5,6,7,8,9]"
NESTED = f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, {TEN}.all(d, {TEN}.all(e, e >= 0)))))"


def test_an_expression_over_the_per_call_limit_is_an_evaluation_error() -> None:
    with pytest.raises(cel.EvaluationError) as err:
        run(NESTED)
    assert str(err.value) == (
        f"expression '{NESTED}' resulted in error: operation cancelled: actual cost limit exceeded"
    )


def test_a_binding_over_its_budget_is_out_of_budget() -> None:
    budget = cel.Budget(300)
    evaluation = cel.Evaluation(cel.Activation(OBJECT, None, REQUEST), budget)
    program = cel.compile_expression("object.spec.ports.all(p, p > 0)")
    assert cel.same(evaluation.evaluate(program), True)
    assert 0 < budget.remaining < 300
    outcomes = []
    for _ in range(20):
        try:
            outcomes.append(evaluation.evaluate(program))
        except cel.OutOfBudget as ex:
            outcomes.append(str(ex))
    assert outcomes[-1] == cel.OUT_OF_BUDGET
    assert budget.remaining == 0

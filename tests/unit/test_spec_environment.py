"""inheritEnv and secretEnv in the job spec: their shape, and clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from dispatch.model import InvalidSpec, parse_spec
from dispatch.model.environ import capture_environment


def parse(**fields: Any) -> Any:
    return parse_spec({"name": "t", "command": ["x"], **fields})


def problems(**fields: Any) -> str:
    with pytest.raises(InvalidSpec) as caught:
        parse(**fields)
    return str(caught.value)


def test_the_two_forms_of_a_secret_and_inherited_names() -> None:
    spec = parse(
        inheritEnv=["WANDB_MODE"],
        secretEnv={"A": {"fromEnv": "MY_A"}, "B": {"fromFile": "~/.secrets/b"}},
    )
    assert spec.inherit_env == ("WANDB_MODE",)
    assert spec.secret_env["A"].from_env == "MY_A"
    assert spec.secret_env["B"].from_file == "~/.secrets/b"
    assert parse_spec(spec.to_yaml_dict()) == spec  # round trip as stored in the records


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"secretEnv": {"A": {}}}, "exactly one of fromEnv"),
        ({"secretEnv": {"A": {"fromEnv": "X", "fromFile": "f"}}}, "exactly one of fromEnv"),
        ({"secretEnv": {"A": {"fromEnv": "not a name"}}}, "is not a variable name"),
        ({"secretEnv": {"A": {"fromFile": ""}}}, "must be a path"),
        ({"secretEnv": {"A": {"value": "x"}}}, "secretEnv.A.value"),
        ({"secretEnv": {"DISPATCH_X": {"fromEnv": "X"}}}, "DISPATCH_ is reserved"),
        ({"inheritEnv": ["1BAD"]}, "invalid variable name"),
        ({"inheritEnv": "FOO"}, "inheritEnv"),
        ({"env": {"A": "1"}, "secretEnv": {"A": {"fromEnv": "X"}}}, "more than one of env"),
        ({"env": {"A": "1"}, "inheritEnv": ["A"]}, "more than one of env"),
    ],
)
def test_malformed_forms_are_refused_with_the_field_named(
    fields: dict[str, Any], expected: str
) -> None:
    assert expected in problems(**fields)


def test_capture_takes_the_base_and_the_named_variables_only() -> None:
    environ = {"PATH": "/bin", "LC_ALL": "C", "FOO": "1", "SECRET_OF_MY_SHELL": "x"}
    captured, missing = capture_environment(("FOO", "GONE"), environ)
    assert captured == {"PATH": "/bin", "LC_ALL": "C", "FOO": "1"}
    assert missing == ["GONE"]

"""``dispatch.jsontext`` reads and writes what the standard library's ``json`` does, on the
objects dispatch handles and on the text orjson alone would refuse."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from dispatch import jsontext

GOLDEN = Path(__file__).parents[1] / "kubeflow" / "planning" / "golden"


def golden_objects() -> list[Any]:
    found = [json.loads(p.read_text()) for p in sorted(GOLDEN.glob("*.json"))]
    assert found, f"no golden plans under {GOLDEN}"
    return found


def test_kubernetes_objects_read_and_written_as_json_does() -> None:
    for obj in golden_objects():
        for text in (json.dumps(obj), json.dumps(obj, indent=2), json.dumps(obj).encode()):
            assert jsontext.loads(text) == json.loads(text)
        written = jsontext.dumps(obj)
        assert json.loads(written) == obj
        # the records' form: compact, keys sorted; only the escaping of non-ASCII differs
        assert written == json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def test_equal_values_give_equal_text_whatever_the_order_of_their_keys() -> None:
    one = {"b": [1, {"y": 2, "x": 1}], "a": "é", "c": None}
    other = {"c": None, "a": "é", "b": [1, {"x": 1, "y": 2}]}
    assert (
        jsontext.dumps(one) == jsontext.dumps(other) == '{"a":"é","b":[1,{"x":1,"y":2}],"c":null}'
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"n": NaN}',
        '{"n": Infinity, "m": -Infinity}',
        '{"big": 123456789012345678901234567890}',
        '{"past 64 bits": [18446744073709551616, -9223372036854775809]}',
        '{"in a string": "1234567890123456789012", "n": 1}',
        '{"s": "\\ud800"}',  # an escaped lone surrogate
        "[1e400]",
    ],
)
def test_text_orjson_refuses_is_read_as_json_reads_it(text: str) -> None:
    got, want = jsontext.loads(text), json.loads(text)
    assert json.dumps(got) == json.dumps(want)  # NaN != NaN: compare as text


def test_nan_is_read_as_a_float_nan() -> None:
    assert math.isnan(jsontext.loads('{"n": NaN}')["n"])


@pytest.mark.parametrize("text", ["", "{", '{"a": }', "[1,]", "nul", b"\xff"])
def test_text_neither_reads_raises_what_json_raises(text: str | bytes) -> None:
    try:
        json.loads(text)
    except ValueError as exc:
        raised = type(exc)
    else:
        pytest.fail(f"json read {text!r}")
    with pytest.raises(raised):
        jsontext.loads(text)


def test_integers_past_64_bits_stay_integers_both_ways() -> None:
    value = {"n": [2**64, -(2**63) - 1, 2**63 - 1, 10**30]}
    assert jsontext.loads(jsontext.dumps(value)) == value
    assert all(isinstance(n, int) for n in jsontext.loads(jsontext.dumps(value))["n"])


@pytest.mark.parametrize(
    "value",
    [
        {"big": 123456789012345678901234567890},
        {1: "a key that is not a string", 2: "b"},
        {"s": "\ud800"},
    ],
)
def test_values_orjson_cannot_write_are_written_as_json_writes_them(value: Any) -> None:
    assert jsontext.dumps(value) == json.dumps(value, separators=(",", ":"), sort_keys=True)


def test_values_neither_can_write_raise_a_type_error() -> None:
    with pytest.raises(TypeError):
        jsontext.dumps({"a": object()})


def test_objects_are_encoded_as_an_api_server_writes_them_keys_in_their_order() -> None:
    for obj in golden_objects():
        encoded = jsontext.encode(obj)
        assert encoded == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    assert jsontext.encode({"z": "é", "a": [1, None]}) == '{"z":"é","a":[1,null]}'.encode()


@pytest.mark.parametrize("value", [{"big": 10**30}, {1: "a"}, {"s": "\ud800"}])
def test_values_orjson_cannot_encode_are_encoded_as_json_writes_them(value: Any) -> None:
    assert jsontext.encode(value) == json.dumps(value, separators=(",", ":")).encode()


def test_same_is_json_text_equality_not_python_equality() -> None:
    assert jsontext.same({"a": [1, {"b": None}]}, {"a": [1, {"b": None}]})
    assert not jsontext.same([1], [True]) and [1] == [True]
    assert not jsontext.same({"n": 1}, {"n": 1.0}) and {"n": 1} == {"n": 1.0}
    assert not jsontext.same({"a": 1, "b": 2}, {"b": 2, "a": 1})  # keys in their order
    assert not jsontext.same({"big": 10**30}, {"big": 10**30})  # orjson cannot write it


def test_plain_is_json_data_alone() -> None:
    import dataclasses
    import datetime

    class Name(str):
        pass

    @dataclasses.dataclass
    class Point:
        x: int

    assert jsontext.plain({"a": [1, 2.5, True, None, "x", (1, 2)], "b": {"c": []}})
    assert jsontext.plain([])
    for value in (
        {"when": datetime.datetime(2026, 1, 1)},
        [Point(1)],
        {"name": Name("a")},
        {"big": 2**64},
        {1: "key not a string"},
    ):
        assert not jsontext.plain(value), value

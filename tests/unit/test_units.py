from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dispatch.model.units import (
    format_bytes,
    format_duration,
    parse_cpu,
    parse_duration,
    parse_memory,
    quantity_value,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("30m", 1800), ("1h30m", 5400), ("2d", 172800), ("90", 90), (12, 12), (0.5, 0.5)],
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-5", "m", "1x", "30 m", math.nan, math.inf, -1, True])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the message is checked elsewhere
        parse_duration(text)  # type: ignore[arg-type]


@given(st.integers(min_value=1, max_value=10**8))
def test_format_duration_round_trips(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize(
    ("text", "size"),
    [("4Gi", 4 * 2**30), ("512Mi", 512 * 2**20), ("1G", 10**9), ("1000", 1000), ("1.5Ki", 1536)],
)
def test_memory(text: str, size: int) -> None:
    assert parse_memory(text) == size


@pytest.mark.parametrize("text", ["4 gigs", "4Xi", "0", "", "-1Gi", [1]])
def test_bad_memory(text: object) -> None:
    with pytest.raises(ValueError, match=r"memory|quantity|unit"):
        parse_memory(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "cpus"), [("2", 2.0), ("500m", 0.5), (1.5, 1.5)])
def test_cpu(text: str, cpus: float) -> None:
    assert parse_cpu(text) == cpus


@pytest.mark.parametrize("text", ["lots", "0", math.inf, "-1"])
def test_bad_cpu(text: object) -> None:
    with pytest.raises(ValueError, match=r"cpu|CPU"):
        parse_cpu(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", 1), ("1Gi", 2**30), ("2", 2), (4, 4), ("0.1", 1), ("1.5k", 1500), ("8Gi ", 8 * 2**30),
     ("abc", 0), ("", 0), (None, 0), ("nan", 0), ("inf", 0)],
)  # fmt: skip
def test_quantity_value_rounds_up_as_go_does_and_reads_junk_as_zero(
    text: object, value: int
) -> None:
    assert quantity_value(text) == value


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (4294967296, "4Gi"),
        (512 * 2**20, "512Mi"),
        (int(3.7 * 2**30), "3.7 GiB"),
        (1000, "1000 bytes"),
        (None, "None"),
        (True, "True"),
    ],
)
def test_format_bytes_as_people_read_them(count: object, shown: str) -> None:
    assert format_bytes(count) == shown

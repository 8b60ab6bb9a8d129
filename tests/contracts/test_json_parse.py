"""Bounded parsing reads what ``json.loads`` reads, and fails where and how it fails: the scanner
alone takes a frame as servers write it, everything else goes through ``json.loads``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import JsonLimitError, bounded_loads

TEXTS = [
    '{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"tok"},"finish_reason":null}]}',
    ' {"a": 1}',  # leading whitespace
    '{"a": 1}\n',  # trailing whitespace
    '\ufeff{"a": 1}',  # a BOM: json.loads refuses it
    '{"a": 1} {"b": 2}',  # extra data
    '{"a":',  # truncated
    '{"a": "\\x"}',  # a bad escape inside
    '{"a": "\x01"}',  # a control character inside a string
    '"\\ud800"',  # a lone surrogate escape
    "NaN",
    "-Infinity",
    "1e400",
    "-0",
    "[]",
    "",
    "   ",
    "1" * 5000,  # past Python's digit limit for int()
    b'{"a": 1}',  # bytes
    '{"a": 1, "a": 2}',  # a repeated key: the last one wins, as in json.loads
]


def _outcome(parse: Any, text: str | bytes) -> tuple[str, str]:
    try:
        return "value", repr(parse(text))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("text", TEXTS)
def test_each_text_reads_or_fails_as_json_loads_does(text: str | bytes) -> None:
    assert _outcome(bounded_loads, text) == _outcome(json.loads, text)


@given(st.text(alphabet='{}[]":,0123456789.eE+-truefalsnul \\\n\t\ufeffab', max_size=40))
def test_any_text_reads_or_fails_as_json_loads_does(text: str) -> None:
    assert _outcome(bounded_loads, text) == _outcome(json.loads, text)


def test_the_bounds_still_hold() -> None:
    with pytest.raises(JsonLimitError, match="nested deeper"):
        bounded_loads("[" * 200 + "]" * 200)
    with pytest.raises(JsonLimitError, match="over the limit"):
        bounded_loads('{"a": 1}', max_bytes=4)

"""Bounded parsing reads what ``json.loads`` reads, and fails where and how it fails: the scanner
alone takes a frame as servers write it, everything else goes through ``json.loads``."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import JsonLimitError, bounded_loads
from wirecheck.contracts._json import PLAIN_MAX, key_text, key_value, plain_numbers

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
    "18446744073709551616",  # past 64 bits: orjson would read a float
    '{"n": -9223372036854775809}',
    '{"id": "chatcmpl-0123456789012345678901", "n": 1}',  # a long run of digits in a string
    "1e-400",
    "123456789012345678.5",
    '"\\ud83d\\ude00 \u00e9"',  # an escaped surrogate pair, and a character as it is
    '"\ud800"',  # a lone surrogate in the text itself
    b'\xef\xbb\xbf{"a": 1}',  # bytes with a UTF-8 BOM: json.loads reads them
    b'{"a": "\xed\xa0\x80"}',  # an encoded surrogate: json decodes it, orjson refuses
    '{"a": "\u00e9"}'.encode("utf-16"),  # UTF-16, which json detects
    '{"a": "\u00e9"}'.encode("utf-32-le"),
    b'{"a": "\xff"}',  # not UTF-8 at all
    b'{"n": 18446744073709551616}',  # past 64 bits, in bytes
    b'{"n": 1}{"m": 2}',
    bytearray(b'{"a": [1, 2.5, null]}'),
    b"",
]


def _outcome(parse: Any, text: str | bytes | bytearray) -> tuple[str, str]:
    try:
        return "value", repr(parse(text))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("text", TEXTS)
def test_each_text_reads_or_fails_as_json_loads_does(text: str | bytes | bytearray) -> None:
    assert _outcome(bounded_loads, text) == _outcome(json.loads, text)


@given(st.text(alphabet='{}[]":,0123456789.eE+-truefalsnul \\\n\t\ufeffab', max_size=40))
def test_any_text_reads_or_fails_as_json_loads_does(text: str) -> None:
    assert _outcome(bounded_loads, text) == _outcome(json.loads, text)


@given(st.text(alphabet='{}[]":,0123456789.eE+-truefalsnul \\\n\t\ufeffab\u00e9', max_size=40), st.booleans())
def test_any_bytes_read_or_fail_as_json_loads_does(text: str, ascii_only: bool) -> None:
    data = text.encode("ascii", "backslashreplace") if ascii_only else text.encode()
    assert _outcome(bounded_loads, data) == _outcome(json.loads, data)


def test_the_bounds_still_hold() -> None:
    with pytest.raises(JsonLimitError, match="nested deeper"):
        bounded_loads("[" * 200 + "]" * 200)
    with pytest.raises(JsonLimitError, match="over the limit"):
        bounded_loads('{"a": 1}', max_bytes=4)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


@given(
    _json_values, st.sampled_from([None, 0, 2]), st.sampled_from([(",", ":"), (", ", ": ")]), st.booleans()
)
def test_any_json_document_reads_as_json_loads_reads_it(
    value: Any, indent: int | None, separators: tuple[str, str], ascii_only: bool
) -> None:
    text = json.dumps(value, indent=indent, separators=separators, ensure_ascii=ascii_only)
    assert _outcome(bounded_loads, text) == _outcome(json.loads, text)


@given(st.lists(_json_values, min_size=1, max_size=4), st.booleans())
def test_texts_found_plain_together_read_as_json_loads_reads_them(
    values: list[Any], ascii_only: bool
) -> None:
    # what a stream's frames skip per frame once plain_numbers said so of all of them
    texts = [json.dumps(v, ensure_ascii=ascii_only) for v in values] + TEXTS[:3]
    if plain_numbers(texts):
        for text in texts:
            assert _outcome(lambda t: bounded_loads(t, plain=True), text) == _outcome(json.loads, text)
    else:
        assert any(len(run) >= 19 for t in texts for run in re.findall(r"[0-9]+", t))


def test_a_long_run_in_any_text_makes_them_not_plain() -> None:
    assert plain_numbers(['{"a": 1}', '{"b": 2}'])
    assert not plain_numbers(['{"a": 1}', '{"n": 18446744073709551616}'])
    # runs of two texts are not one
    assert plain_numbers(["1234567890", "123456789"])
    # past the bound they are asked one by one (no copies of a huge stream)
    assert not plain_numbers(['{"a": 1}', " " * PLAIN_MAX])


# every value a JSON document parses to, and what json (not orjson) reads besides: NaN and the
# infinities, integers past 64 bits, lone surrogates, strings that hold "null"
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text()
    | st.sampled_from(["null", "a:null", ",null", "\ud800"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def _document(value: Any, sort_keys: bool) -> str:
    """The document a value is, as json writes it (NaN and the infinities by name)."""
    return json.dumps(value, sort_keys=sort_keys)


@given(_json_values, _json_values, st.booleans())
def test_a_key_is_one_document(a: Any, b: Any, sort_keys: bool) -> None:
    """Two values share a key only when they are one document (in one order of keys, unless
    sorted), and a key reads back as its document."""
    key_a, key_b = key_text(a, sort_keys=sort_keys), key_text(b, sort_keys=sort_keys)
    assert (key_a == key_b) == (_document(a, sort_keys) == _document(b, sort_keys))
    assert _document(key_value(key_a), sort_keys) == _document(a, sort_keys)


def test_orjson_writes_the_keys_it_can_write_alike_and_json_the_rest() -> None:
    assert key_text({"type": ["string", "null"], "b": 1}) == b'o{"type":["string","null"],"b":1}'
    assert key_text({"b": 1, "a": 2}, sort_keys=True) == b'o{"a":2,"b":1}'
    # a null value, NaN (orjson would write it as null), an integer past 64 bits, a lone surrogate
    for value in ({"d": None}, {"d": float("nan")}, [2**64], "\ud800", None):
        assert key_text(value).startswith(b"j")
    assert key_text({"d": None}) != key_text({"d": float("nan")})

"""Bounded JSON parsing for everything read off the wire.

``json.loads`` recurses once per nesting level (the C scanner included), so a body or tool arguments
nested a few thousand levels deep raise ``RecursionError`` and, unbounded, one hostile request stopped
the live checker and crashed ``wirecheck check``. Everything the contracts parse from the wire (request
and response bodies, SSE data, tool arguments) goes through :func:`loads`, which refuses documents
deeper than :data:`MAX_DEPTH` levels or larger than :data:`MAX_BYTES` with :class:`JsonLimitError`.
That error is a ``ValueError``, so a caller that already treats "not JSON" as data keeps working, and
the ``json-limit`` rule reports the limit itself as a finding.

The depth bound is far above real traffic (OpenAI requests and tool arguments stay well under 20
levels) and well below what the JSON Schema validator and ``json.dumps`` can recurse through.
"""

from __future__ import annotations

import json
import json.scanner
import re
from typing import Any, cast

import orjson

from ._native import native

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "JsonLimitError",
    "depth_exceeds",
    "json_loads",
    "key_text",
    "key_value",
    "loads",
    "plain_number_bytes",
    "plain_numbers",
]

#: deepest nesting accepted (objects and arrays); deeper documents are a ``json-limit`` finding
MAX_DEPTH = 128
#: largest document parsed, in bytes (or characters); the proxy records bodies up to its body limit
MAX_BYTES = 64 * 1024 * 1024


class JsonLimitError(ValueError):
    """A JSON document over the depth or size bound: valid or not, it is not parsed."""


#: a null value in orjson's compact text (after a colon, a bracket or a comma: one inside a string
#: only looks like it, and costs that value the slower writer)
_NULL_VALUE = re.compile(rb"[:\[,]null")


def key_text(value: Any, *, sort_keys: bool = False) -> bytes:
    """A parsed JSON value's text as a cache key: one key, one document (with ``sort_keys`` one
    for every order of an object's keys). orjson writes it in a tenth of json's time where it takes
    the value (not an integer past 64 bits, a lone surrogate or nesting past its bound) and the text
    has no null value (orjson writes NaN and the infinities as null); json writes the rest. The
    first byte says which wrote it, so the two writers' keys never meet; :func:`key_value` reads a
    key back. A rule's cache keyed by ``json.dumps`` of an agent's tools spent milliseconds an
    exchange on writing the keys alone."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else None)
    except TypeError:  # orjson.JSONEncodeError: what it does not write
        text = b""
    if text and text != b"null" and not _NULL_VALUE.search(text):
        return b"o" + text
    return b"j" + json.dumps(value, sort_keys=sort_keys).encode()


def key_value(key: bytes) -> Any:
    """The value :func:`key_text` wrote (json reads either writer's text)."""
    return json.loads(key[1:])


def depth_exceeds(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """True when ``value`` nests containers deeper than ``max_depth``; iterative, so it cannot recurse."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > max_depth:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


#: json's own C scanner: ``json.loads`` is it behind a Python wrapper (type checks, a BOM check and a
#: whitespace regex on each side), which cost as much as the scan itself on a short SSE frame
_SCAN = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))  # typeshed types its argument oddly
#: a run of digits orjson may read otherwise than json (an integer past 64 bits becomes a float
#: there), found as a run of zeros in the text's bytes with every digit made a zero and every other
#: byte a space: a third of the time of a regular expression's search
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


#: texts of more characters than this together are not asked at once by :func:`plain_numbers` (the
#: test copies them three times over)
PLAIN_MAX = 1 << 20


def plain_numbers(texts: list[str]) -> bool:
    """True when none of these texts holds a run of 19 digits: then orjson reads every number in
    them as json does, and :func:`json_loads` may skip that test per text. Asked once for a
    stream's frames (the test alone cost as much as orjson's read of a short frame); False, so
    asked text by text, past ``PLAIN_MAX`` characters in all."""
    if sum(map(len, texts)) > PLAIN_MAX:
        return False
    return _LONG_RUN not in " ".join(texts).encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZEROS)


def plain_number_bytes(raw: bytes) -> bool:
    """:func:`plain_numbers` of the texts a UTF-8 stream is cut into, asked of its bytes (each of
    its digits is one byte, and no text joins two runs): no copy of the texts to join."""
    return len(raw) <= PLAIN_MAX and _LONG_RUN not in raw.translate(_DIGITS_AS_ZEROS)


def json_loads(text: str | bytes | bytearray, *, plain: bool = False) -> Any:
    """``json.loads(text)``. orjson reads a text first (a third of the scanner's time on an SSE
    frame): what it reads it reads as json does, except integers past 64 bits, which a text with
    19 digits in a row never goes to it for (``plain``: the caller knows there is no such run,
    :func:`plain_numbers`); what it refuses (errors, and NaN, Infinity, lone surrogates, which
    json reads) goes on to json. There, the scanner alone when it reads the whole text from its
    first character, else ``json.loads`` itself (leading or trailing whitespace, a BOM, bytes,
    every error: its messages are the ones reported)."""
    if isinstance(text, str):
        if plain or _LONG_RUN not in text.encode("utf-8", "surrogatepass").translate(_DIGITS_AS_ZEROS):
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError:
                pass
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:
            pass
        else:
            if end == len(text):
                return value
    elif plain or _LONG_RUN not in text.translate(_DIGITS_AS_ZEROS):
        # bytes (a request body): orjson takes UTF-8 only, which json decodes alike; anything
        # else (UTF-16, a BOM, encoded surrogates, errors) goes to json, which detects and decodes
        # it (its encoding detection and decoding alone cost more than orjson's read)
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def loads(
    text: str | bytes | bytearray,
    *,
    max_depth: int = MAX_DEPTH,
    max_bytes: int = MAX_BYTES,
    plain: bool = False,
) -> Any:
    """``json.loads`` with a depth and size bound; raises :class:`JsonLimitError` past either.
    ``plain``: as for :func:`json_loads`."""
    if plain and len(text) <= 2 * max_depth and isinstance(text, str):
        # what follows, for a frame of a stream found plain: orjson reads it or it goes the long way
        # (the calls and tests between cost half of what orjson's read does)
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    if len(text) > max_bytes:
        raise JsonLimitError(f"JSON document of {len(text)} bytes is over the limit of {max_bytes}")
    try:
        value = json_loads(text, plain=plain)
    except RecursionError:
        raise JsonLimitError(f"JSON nested deeper than the limit of {max_depth} levels") from None
    # Off the common path: a document nested n deep has n openers and n closers, so one of at most
    # twice the bound in length cannot be over it (an SSE frame); past that, one with fewer brackets
    # than the bound cannot nest deeper than it either, and only the rest is walked.
    if len(text) <= 2 * max_depth:
        return value
    if isinstance(text, str):
        opens = text.count("[") + text.count("{")
    else:
        opens = text.count(b"[") + text.count(b"{")
    if opens > max_depth:
        # the text's nesting is the value's: its compiled twin reads it off the text in one pass
        deep = _C.deeper(text, max_depth) if _C is not None else None
        if deep is None:
            deep = depth_exceeds(value, max_depth)
        if deep:
            raise JsonLimitError(f"JSON nested deeper than the limit of {max_depth} levels")
    return value


#: the compiled twin of :func:`depth_exceeds` read off a document's text (``_json_c.c``), or None
_C = native("wirecheck.contracts._json_c")

"""How an exchange lies in a store row: its interchange form (docs/exchange-format.md) as one JSON
document, except the bytes of a response recorded chunk by chunk. Those go beside the document in the
row's ``body`` column, joined as they arrived, and the document keeps each chunk's arrival offset and
size (``stored_chunks``: ``t_us``, ``sizes``).

In the interchange form each chunk is an object of its own, its bytes JSON text (or base64 when a
chunk ends mid-character). For a streamed answer that was most of the writer's work in the
proxy's process (a JSON string escaped per chunk, every quote of every SSE frame) and most of the
live checker's work to read it back. As bytes they are written and read as they are. A row written
before the ``body`` column existed (or a response without chunks) keeps its chunks in the document
and reads as it always did.
"""

from __future__ import annotations

import json
import struct
from itertools import repeat
from math import floor
from operator import truediv
from typing import Any

import orjson

from wirecheck.contracts import (
    DEFAULT_REDACTION,
    Chunk,
    Exchange,
    HttpRequest,
    HttpResponse,
    InputError,
    JoinedResponse,
    dump_exchange,
    load_exchange,
    native,
)

__all__ = ["STORED_CHUNKS", "encode", "row_document", "row_exchange", "row_text"]

#: the response's key for the chunks whose bytes are in the ``body`` column
STORED_CHUNKS = "stored_chunks"


def row_document(ex: Exchange) -> tuple[dict[str, Any], bytes | None]:
    """The row's document (redacted like every writer's: ``dump_exchange``) and its ``body``."""
    resp = ex.response
    joined = resp.joined() if resp is not None else None
    columns: tuple[list[int], list[int], bytes] | None
    if joined is not None:  # held as the row holds it (the proxy's record, a row read back): no chunks made
        columns = _whole_us(joined[2]), list(joined[1]), joined[0]
    elif resp is None or resp.chunks is None:
        return dump_exchange(ex), None
    else:
        columns = _native.chunk_columns(resp.chunks) if _native is not None else None
        if columns is None:
            columns = chunk_columns(resp.chunks)
    doc = dump_exchange(ex, chunks=False)
    doc["response"][STORED_CHUNKS] = {"t_us": columns[0], "sizes": columns[1]}
    return doc, columns[2]


def row_text(ex: Exchange) -> tuple[str, bytes | None, str]:
    """The row's document as its text, its ``body``, and the request's path as the document has it
    (redacted): :func:`row_text_py`, written in one pass by the compiled twin where it can."""
    if _native is not None:
        got: tuple[str, bytes | None, str] | None = _native.row_text(
            ex, _VERDICTS, DEFAULT_REDACTION.target, orjson.dumps
        )
        if got is not None:
            return got
    return row_text_py(ex)


def row_text_py(ex: Exchange) -> tuple[str, bytes | None, str]:
    """:func:`row_text`, the reference: :func:`row_document` without the exchange's end time (the
    row's own column), as compact JSON text (:func:`encode`)."""
    doc, body = row_document(ex)
    doc.pop("_ended_mono", None)
    return encode(doc), body, doc["request"]["path"]


#: the default policy's verdicts by header name, which the twin reads (and leaves a name not in
#: them to the reference, which tests it and keeps its verdict there)
_VERDICTS = DEFAULT_REDACTION.kept_verdicts()

#: ``json.dumps(doc, ensure_ascii=False, separators=(",", ":"))`` with its encoder made once: dumps
#: builds one per call when given options (see ``encode``)
_json_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode(doc: dict[str, Any]) -> str:
    """A row's document as compact JSON text: by orjson (a tenth of ``json``'s time, on the store
    writer's thread, which shares the forwarding loop's GIL), by ``json`` for what orjson refuses
    (integers past 64 bits, lone surrogates, keys that are not strings). Either text reads back to
    the same document, but for NaN and the infinities (not JSON, and never in an exchange's
    document: orjson writes them as null)."""
    try:
        return orjson.dumps(doc).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return _json_encode(doc)


def chunk_columns(chunks: list[Chunk]) -> tuple[list[int], list[int], bytes]:
    """A response's chunks as the row keeps them: each one's arrival offset in whole microseconds
    (:func:`_whole_us`), each one's size, and their bytes joined. The reference of the compiled
    twin (record/_rows_c.c), which answers None where it leaves a response to this."""
    data = [c.data for c in chunks]
    return _whole_us([c.t_ms for c in chunks]), list(map(len, data)), b"".join(data)


#: the compiled twin of ``chunk_columns`` (None: off or not built; contracts/_native.py)
_native = native("wirecheck.record._rows_c")


def _whole_us(times_ms: list[float]) -> list[int]:
    """Each chunk's ``round(round(t_ms, 3) * 1000)`` (``times_ms``: their ``t_ms``): whole
    microseconds, what the interchange form keeps (t_ms to three places) as an integer, for a
    response's chunks at once.

    A Python step a chunk (a rounding and its test) was a fifth of the store writer's work, so the
    integers are made by the float unit and read out of the bytes of the sums in C. Each
    ``t_ms * 1000 + 0.5`` is added to ``1.5 * 2**36``: the sum's 52-bit fraction is then ``2**51 +
    k``, ``k`` the microseconds plus a half in 65536ths, rounded once. Its two low bytes are the
    65536ths and the next four hold ``k >> 16``, ``floor(us + 0.5)``: the integer wanted wherever
    those two bytes are neither 0 nor 0xffff, for ``us + 0.5`` is then at least 2**-17 from an
    integer, sixteen times the error of ``t_ms * 1000`` below 2**32 microseconds
    (``tests/record/test_row_document.py`` holds it to the decimal way). Those, an offset past
    2**32 microseconds (71 minutes) or before the start, NaN and the infinities take
    :func:`_each_us`."""
    doubles, words, top = _layouts(len(times_ms))
    raw = doubles.pack(*[t * 1000.0 + _GRID for t in times_ms])
    if raw[6::8] + raw[7::8] != top:
        return _each_us(times_ms)
    # the 65536ths: where a high byte is 0 or 255 (one response in a few), each pair is looked at
    high = raw[1::8]
    if (0 in high or 255 in high) and not _clear(raw, high):
        return _each_us(times_ms)
    return list(words.unpack(raw))


def _clear(raw: bytes, high: bytes) -> bool:
    """Whether no sum's 65536ths are 0 or 0xffff (within 2**-16 of a whole number): each high byte
    of 0 or 255 with the low byte beside it."""
    for byte in (0, 255):
        i = high.find(byte)
        while i >= 0:
            if raw[8 * i] == byte:
                return False
            i = high.find(byte, i + 1)
    return True


#: ``1.5 * 2**36`` (sums in [2**36, 2**37): 65536ths apart) and the half of rounding to nearest
_GRID = 1.5 * 2.0**36 + 0.5
_LAYOUTS: dict[int, tuple[struct.Struct, struct.Struct, bytes]] = {}


def _layouts(n: int) -> tuple[struct.Struct, struct.Struct, bytes]:
    """For ``n`` chunks: their sums as little-endian doubles; bytes 2 to 5 of each; and bytes 6 of
    all, then bytes 7 of all, as they are where ``0 <= k < 2**48`` (the fraction's top bit, the
    exponent of 2**36, no sign)."""
    got = _LAYOUTS.get(n)
    if got is None:
        got = (struct.Struct(f"<{n}d"), struct.Struct("<" + "xxIxx" * n), b"\x38" * n + b"\x42" * n)
        if len(_LAYOUTS) < 1024:  # a response's count of chunks: kept for the counts that recur
            _LAYOUTS[n] = got
    return got


def _each_us(times_ms: list[float]) -> list[int]:
    """``_whole_us`` one chunk at a time: ``floor(us + 0.5)`` (``round(us)`` away from a half, in
    a third of its instructions), the decimal way where the product is within rounding error of
    a half."""
    out = []
    for t_ms in times_ms:
        us = t_ms * 1000.0
        whole = floor(us + 0.5)
        if abs(abs(us - whole) - 0.5) <= 1e-9 + abs(us) * 1e-12:
            whole = round(round(t_ms, 3) * 1000)
        out.append(whole)
    return out


def row_exchange(obj: Any, body: bytes | None, *, source: str) -> Exchange:
    """The exchange of one row: its document (parsed) and its ``body`` column. A streamed response
    is a :class:`JoinedResponse`: its chunks are cut from the body when first asked for."""
    plain = _plain_row(obj, body)
    return plain if plain is not None else _read_row(obj, body, source=source)


def _read_row(obj: Any, body: bytes | None, *, source: str) -> Exchange:
    """:func:`row_exchange` by :func:`load_exchange`, for any document (the reference of
    :func:`_plain_row`), and what is wrong with one that is not an exchange."""
    if body is None:
        return load_exchange(obj, source=source)
    resp = obj.get("response") if isinstance(obj, dict) else None
    if not isinstance(resp, dict) or not isinstance(stored := resp.pop(STORED_CHUNKS, None), dict):
        raise _mismatch(source)
    resp["chunks"] = []  # read as an empty chunked response, then given its chunks
    ex = load_exchange(obj, source=source)
    assert ex.response is not None
    data = bytes(body)
    joined = _joined(stored, data)
    if joined is None:
        raise _mismatch(source)
    r = ex.response
    ex.response = JoinedResponse(r.status, r.headers, r.body, joined)
    return ex


def _joined(stored: dict[str, Any], data: bytes) -> tuple[bytes, list[int], list[float]] | None:
    """A streamed response's (bytes, sizes, ``t_ms``) from its stored chunks, or None where they do
    not cut its bytes. The compiled twin reads the plain case in one pass over each list (five in
    Python; a third of reading a row) and leaves the rest to :func:`_joined_py`."""
    if _native is not None:
        try:
            got: tuple[bytes, list[int], list[float]] | None = _native.joined(
                stored["t_us"], stored["sizes"], data
            )
        except KeyError:
            return None
        if got is not None:
            return got
    return _joined_py(stored, data)


def _joined_py(stored: dict[str, Any], data: bytes) -> tuple[bytes, list[int], list[float]] | None:
    """:func:`_joined`, the reference."""
    try:
        times, sizes = stored["t_us"], stored["sizes"]
        if len(times) != len(sizes) or min(sizes, default=0) < 0 or sum(sizes) != len(data):
            return None
        # what slicing takes of what JSON holds (a float size would fail there, when first cut)
        if not set(map(type, sizes)) <= _WHOLE:
            return None
        return data, list(sizes), list(map(truediv, times, repeat(1000.0)))
    except (KeyError, TypeError, ValueError, OverflowError):  # an offset past any float: not a cut
        return None


#: the keys of a row's document in its plain shape (what the store writes for an exchange without
#: an error or keys of its own), of its request and of its response
_PLAIN_TOP = frozenset({"v", "id", "tap", "correlation", "started_at", "request", "response"})
_PLAIN_REQUEST = frozenset({"method", "path", "headers", "body_text"})
_PLAIN_STREAMED = frozenset({"status", "headers", STORED_CHUNKS})
_PLAIN_ANSWER = frozenset({"status", "headers", "body_text"})


def plain_row_text(text: str, body: bytes | None) -> Exchange | None:
    """:func:`row_exchange` of a document's text read by orjson alone, where it reads as the plain
    shape (:func:`_plain_row`); None for any other text, which the caller reads as before
    (``json_loads``, then :func:`row_exchange`). ``json_loads`` first looks for a run of 19
    digits, which orjson reads as a float where json reads an integer past 64 bits: a third of
    its time on a row's document. The plain shape needs no such test: a number orjson reads so
    there is a float where the shape takes an int (the version, a status, a chunk's size) and is
    not plain; an arrival offset is divided into a float either way, from the same nearest float."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return _plain_row(obj, body)


def _plain_row(obj: Any, body: bytes | None) -> Exchange | None:
    """The exchange of a row whose document has the plain shape the store writes (every value of
    the type the interchange form asks, no error, no keys of its own), as :func:`load_exchange`
    reads it but with none of its checks' calls and each object made by its slots: reading a row was
    a tenth of the live checker's work, and two thirds of that was ``load_exchange`` making and
    checking what the store wrote. None for any other document, which the general path reads (and
    says what is wrong with it). ``tests/record/test_row_reading.py`` holds the two equal. The
    compiled twin (``_rows_c.plain_row``) makes the exchange of the plainest documents without a
    Python frame (3.2 -> 0.9 us a row of a streamed answer); what it does not take, the reference
    reads."""
    if _native is not None:
        made: Exchange | None = _native.plain_row(obj, body)
        if made is not None:
            return made
    return _plain_row_py(obj, body)


def _plain_row_py(obj: Any, body: bytes | None) -> Exchange | None:
    """:func:`_plain_row`, the reference."""
    if type(obj) is not dict or not obj.keys() <= _PLAIN_TOP:
        return None
    v = obj.get("v", 1)
    ex_id, tap, req, resp = obj.get("id"), obj.get("tap", "caller"), obj.get("request"), obj.get("response")
    corr, started = obj.get("correlation"), obj.get("started_at")
    if (
        type(ex_id) is not str
        or type(tap) is not str
        or not tap
        or type(req) is not dict
        or (corr is not None and type(corr) is not str)
        or (started is not None and type(started) is not str)
        or type(v) is not int
        or v != 1
        or not req.keys() <= _PLAIN_REQUEST
    ):
        return None
    method, path, text = (
        req.get("method", "POST"),
        req.get("path", "/v1/chat/completions"),
        req.get("body_text", ""),
    )
    if type(method) is not str or not method or type(path) is not str or not path or type(text) is not str:
        return None
    headers = _plain_headers(req.get("headers"))
    if headers is None:
        return None
    request = HttpRequest.__new__(HttpRequest)
    request.method, request.path, request.headers = method.upper(), path, headers
    request.body = text.encode("utf-8", "surrogateescape")
    response: HttpResponse | None = None
    if resp is not None:
        if type(resp) is not dict or type(status := resp.get("status")) is not int:
            return None
        headers = _plain_headers(resp.get("headers"))
        if headers is None:
            return None
        if body is None:
            if not resp.keys() <= _PLAIN_ANSWER or type(text := resp.get("body_text", "")) is not str:
                return None
            response = HttpResponse.__new__(HttpResponse)
            response.status, response.headers = status, headers
            response.body = text.encode("utf-8", "surrogateescape")
            response.chunks = None
        else:
            stored = resp.get(STORED_CHUNKS)
            if not resp.keys() <= _PLAIN_STREAMED or type(stored) is not dict:
                return None
            joined = _joined(stored, bytes(body))
            if joined is None:
                return None  # the general path says so
            response = JoinedResponse.made(status, headers, joined)
    elif body is not None:
        return None
    ex = Exchange.__new__(Exchange)
    ex.id, ex.tap, ex.request, ex.response, ex.correlation = ex_id, tap, request, response, corr
    ex.started_at, ex.error, ex.extra = started, None, {}
    return ex


def _plain_headers(value: Any) -> list[tuple[str, str]] | None:
    """A document's headers as the exchange's list, where every name and value is a string: an
    object, or [name, value] pairs (names that repeat but for case); none where absent; None for
    anything else."""
    if value is None:
        return []
    if type(value) is dict:
        for k, v in value.items():
            if type(v) is not str or type(k) is not str:
                return None
        return list(value.items())
    if type(value) is not list:
        return None
    out = []
    for pair in value:
        if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not str:
            return None
        out.append((pair[0], pair[1]))
    return out


#: the types of a chunk's size that cut the body as an index does
_WHOLE = {int, bool}


def _mismatch(source: str) -> InputError:
    return InputError("the row's body and its stored chunks do not match", source=source)

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

import struct
from itertools import repeat
from math import floor
from operator import truediv
from typing import Any

from wirecheck.contracts import (
    Chunk,
    Exchange,
    InputError,
    JoinedResponse,
    dump_exchange,
    load_exchange,
    native,
)

__all__ = ["STORED_CHUNKS", "row_document", "row_exchange"]

#: the response's key for the chunks whose bytes are in the ``body`` column
STORED_CHUNKS = "stored_chunks"


def row_document(ex: Exchange) -> tuple[dict[str, Any], bytes | None]:
    """The row's document (redacted like every writer's: ``dump_exchange``) and its ``body``."""
    resp = ex.response
    if resp is None or resp.chunks is None:
        return dump_exchange(ex), None
    chunks = resp.chunks
    doc = dump_exchange(ex, chunks=False)
    columns = _native.chunk_columns(chunks) if _native is not None else None
    if columns is None:
        columns = chunk_columns(chunks)
    doc["response"][STORED_CHUNKS] = {"t_us": columns[0], "sizes": columns[1]}
    return doc, columns[2]


def chunk_columns(chunks: list[Chunk]) -> tuple[list[int], list[int], bytes]:
    """A response's chunks as the row keeps them: each one's arrival offset in whole microseconds
    (:func:`_whole_us`), each one's size, and their bytes joined. The reference of the compiled
    twin (record/_rows_c.c), which answers None where it leaves a response to this."""
    data = [c.data for c in chunks]
    return _whole_us(chunks), list(map(len, data)), b"".join(data)


#: the compiled twin of ``chunk_columns`` (None: off or not built; contracts/_native.py)
_native = native("wirecheck.record._rows_c")


def _whole_us(chunks: list[Chunk]) -> list[int]:
    """Each chunk's ``round(round(t_ms, 3) * 1000)``: whole microseconds, what the interchange form
    keeps (t_ms to three places) as an integer, for a response's chunks at once.

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
    doubles, words, top = _layouts(len(chunks))
    raw = doubles.pack(*[c.t_ms * 1000.0 + _GRID for c in chunks])
    if raw[6::8] + raw[7::8] != top:
        return _each_us([c.t_ms for c in chunks])
    # the 65536ths: where a high byte is 0 or 255 (one response in a few), each pair is looked at
    high = raw[1::8]
    if (0 in high or 255 in high) and not _clear(raw, high):
        return _each_us([c.t_ms for c in chunks])
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
    if body is None:
        return load_exchange(obj, source=source)
    resp = obj.get("response") if isinstance(obj, dict) else None
    if not isinstance(resp, dict) or not isinstance(stored := resp.pop(STORED_CHUNKS, None), dict):
        raise _mismatch(source)
    resp["chunks"] = []  # read as an empty chunked response, then given its chunks
    ex = load_exchange(obj, source=source)
    assert ex.response is not None
    data = bytes(body)
    try:
        times, sizes = stored["t_us"], stored["sizes"]
        if len(times) != len(sizes) or min(sizes, default=0) < 0 or sum(sizes) != len(data):
            raise ValueError
        # what slicing takes of what JSON holds (a float size would fail there, when first cut)
        if not set(map(type, sizes)) <= _WHOLE:
            raise TypeError
        t_ms = list(map(truediv, times, repeat(1000.0)))
    except (KeyError, TypeError, ValueError):
        raise _mismatch(source) from None
    r = ex.response
    ex.response = JoinedResponse(r.status, r.headers, r.body, (data, list(sizes), t_ms))
    return ex


#: the types of a chunk's size that cut the body as an index does
_WHOLE = {int, bool}


def _mismatch(source: str) -> InputError:
    return InputError("the row's body and its stored chunks do not match", source=source)

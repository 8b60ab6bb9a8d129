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

from itertools import repeat
from math import floor
from operator import truediv
from typing import Any

from wirecheck.contracts import (
    Exchange,
    HttpResponse,
    InputError,
    JoinedResponse,
    dump_exchange,
    load_exchange,
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
    # shallow copies by their constructors: ``dataclasses.replace`` looks every field up by name,
    # twice per exchange on the store writer's thread (which shares the forwarding loop's GIL)
    doc = dump_exchange(ex.with_parts(ex.request, HttpResponse(resp.status, resp.headers, resp.body, [])))
    stored: dict[str, Any] = doc["response"]
    del stored["chunks"]
    stored[STORED_CHUNKS] = {
        "t_us": _whole_us([c.t_ms for c in chunks]),
        "sizes": [len(c.data) for c in chunks],
    }
    return doc, b"".join([c.data for c in chunks])


def _whole_us(times_ms: list[float]) -> list[int]:
    """Each ``round(round(t_ms, 3) * 1000)``: whole microseconds, what the interchange form keeps
    (t_ms to three places) as an integer. ``round(x, 3)`` rounds through a decimal conversion (a
    third of the writer's time per chunk); rounding ``t_ms * 1000`` gives the same integer wherever
    the product is not within rounding error of a half, and only there is the decimal way taken. One
    call for a response's chunks: a call per chunk cost as much as its rounding."""
    out = []
    for t_ms in times_ms:
        us = t_ms * 1000.0
        whole = floor(us + 0.5)  # round(us) away from a half, in a third of its instructions
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

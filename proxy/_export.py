"""Export a store as exchange JSONL or as HAR 1.2.

HAR keeps SSE bodies as text, and wirecheck's own facts in ``_``-prefixed fields (allowed by HAR for
custom data): ``_wirecheck`` on each entry holds id, tap, correlation, error, and the per-chunk
arrival offsets, so a HAR written here loads back as the same exchanges.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import IO, Any

from wirecheck.contracts import DEFAULT_REDACTION, Exchange, Redaction, write_exchanges
from wirecheck.record import CORRELATION_HEADER

__all__ = ["to_har", "write_har", "write_jsonl"]


def write_jsonl(
    exchanges: Iterable[Exchange], fh: IO[str], *, redaction: Redaction = DEFAULT_REDACTION
) -> int:
    return write_exchanges(exchanges, fh, redaction=redaction)


def _content(data: bytes, mime: str) -> dict[str, Any]:
    try:
        return {"size": len(data), "mimeType": mime, "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "size": len(data),
            "mimeType": mime,
            "text": base64.b64encode(data).decode(),
            "encoding": "base64",
        }


def to_har(
    exchanges: Iterable[Exchange], *, host: str = "upstream", redaction: Redaction = DEFAULT_REDACTION
) -> dict[str, Any]:
    entries = []
    for ex in exchanges:
        ex = redaction.exchange(ex)  # noqa: PLW2901 - credentials never reach the HAR
        req, resp = ex.request, ex.response
        req_mime = req.header("content-type") or "application/octet-stream"
        entry: dict[str, Any] = {
            "startedDateTime": ex.started_at or "1970-01-01T00:00:00+00:00",
            "time": 0,
            "request": {
                "method": req.method,
                "url": f"http://{host}{req.path}",
                "httpVersion": "HTTP/1.1",
                "headers": [{"name": k, "value": v} for k, v in req.headers],
                "queryString": [],
                "cookies": [],
                "headersSize": -1,
                "bodySize": len(req.body),
            },
            "response": {
                "status": resp.status if resp else 0,
                "statusText": "",
                "httpVersion": "HTTP/1.1",
                "headers": [{"name": k, "value": v} for k, v in (resp.headers if resp else [])],
                "cookies": [],
                "content": _content(
                    resp.content if resp else b"",
                    (resp.header("content-type") if resp else None) or "application/octet-stream",
                ),
                "redirectURL": "",
                "headersSize": -1,
                "bodySize": len(resp.content) if resp else 0,
            },
            "cache": {},
            "timings": {"send": 0, "wait": 0, "receive": 0},
        }
        if req.body:
            entry["request"]["postData"] = {
                "mimeType": req_mime,
                **{k: v for k, v in _content(req.body, req_mime).items() if k in ("text", "encoding")},
            }
        chunks = resp.chunks if resp is not None else None
        if chunks:
            entry["time"] = round(chunks[-1].t_ms, 3)
            entry["timings"] = {
                "send": 0,
                "wait": round(chunks[0].t_ms, 3),
                "receive": round(chunks[-1].t_ms - chunks[0].t_ms, 3),
            }
        meta: dict[str, Any] = {"id": ex.id, "tap": ex.tap}
        if ex.correlation:
            meta["correlation"] = ex.correlation
        if ex.error:
            meta["error"] = {"kind": ex.error.kind, "message": ex.error.message, "t_ms": ex.error.t_ms}
        if chunks is not None:
            meta["chunks"] = [
                {
                    "t_ms": round(c.t_ms, 3),
                    **(
                        {"text": c.data.decode()}
                        if _is_utf8(c.data)
                        else {"b64": base64.b64encode(c.data).decode()}
                    ),
                }
                for c in chunks
            ]
        entry["_wirecheck"] = meta
        entries.append(entry)
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "wirecheck", "version": _version()},
            "entries": entries,
            "comment": f"correlation header: {CORRELATION_HEADER}",
        }
    }


def write_har(exchanges: Iterable[Exchange], fh: IO[str], *, redaction: Redaction = DEFAULT_REDACTION) -> int:
    har = to_har(exchanges, redaction=redaction)
    json.dump(har, fh, indent=1)  # ASCII: a lone surrogate from the wire stays writable
    fh.write("\n")
    return len(har["log"]["entries"])


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wirecheck")
    except PackageNotFoundError:
        return "unknown"

"""Loaders for captured traffic, all yielding the same :class:`Exchange`: exchange JSONL, HAR 1.2
(SSE bodies as text; wirecheck's own HAR adds per-chunk timing in ``_wirecheck``), and mitmproxy flow
files (``mitmproxy.io.FlowReader``). wirecheck stores are read by ``wirecheck.proxy``.

Every loader names the file (and the entry or line) when something cannot be used.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from wirecheck.contracts import (
    Chunk,
    Exchange,
    ExchangeError,
    HttpRequest,
    HttpResponse,
    InputError,
    read_exchanges,
)

__all__ = ["detect_format", "load_capture", "load_har", "load_mitm"]


def detect_format(path: str | Path) -> str:
    """ "store" | "har" | "mitm" | "jsonl", from the file's first bytes (and its name for flows)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", source=str(p)) from None
    if head.startswith(b"SQLite format 3\x00"):
        return "store"
    if p.suffix in (".mitm", ".flow", ".flows") or (
        head[:1].isdigit() and b":" in head[:12] and not head.lstrip().startswith(b"{")
    ):
        return "mitm"
    stripped = head.lstrip()
    if (
        stripped.startswith(b"{")
        and b'"log"' in head
        and (p.suffix == ".har" or b'"entries"' in head or b'"version"' in head)
    ):
        return "har"
    return "jsonl"


def load_capture(path: str | Path, *, tap: str = "caller") -> Iterator[Exchange]:
    """Exchanges from a JSONL, HAR or mitmproxy file (not a store: see wirecheck.proxy.open_store)."""
    kind = detect_format(path)
    if kind == "har":
        yield from load_har(path, tap=tap)
    elif kind == "mitm":
        yield from load_mitm(path, tap=tap)
    elif kind == "jsonl":
        yield from read_exchanges(path)
    else:
        raise InputError(
            "this is a wirecheck store: open it with wirecheck.proxy.open_store", source=str(path)
        )


def _b64(text: str, where: str, source: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{where}: not base64", source=source) from None


def _har_headers(items: Any) -> list[tuple[str, str]]:
    out = []
    for h in items or []:
        if isinstance(h, dict) and "name" in h:
            out.append((str(h["name"]), str(h.get("value", ""))))
    return out


def _har_text(obj: Any, where: str, source: str) -> bytes:
    """The bytes of a HAR ``postData`` or ``content`` object: ``text``, base64 when ``encoding`` says."""
    obj = obj or {}
    if "text" not in obj:
        return b""
    if obj.get("encoding") == "base64":
        return _b64(obj["text"], where, source)
    return str(obj["text"]).encode("utf-8")


def load_har(path: str | Path, *, tap: str = "caller") -> Iterator[Exchange]:
    source = str(path)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a HAR file ({exc})", source=source) from None
    except RecursionError:  # a hostile capture is bad input, not a crash
        raise InputError("not a usable HAR file (JSON nested too deep to read)", source=source) from None
    entries = doc.get("log", {}).get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise InputError("not a HAR file (no log.entries)", source=source)
    for i, e in enumerate(entries):
        where = f"entry {i}"
        if not isinstance(e, dict) or not isinstance(e.get("request"), dict):
            raise InputError(f"{where}: no request", source=source)
        req, resp = e["request"], e.get("response") or {}
        url = urlsplit(str(req.get("url", "/")))
        path_qs = (url.path or "/") + (f"?{url.query}" if url.query else "")
        body = _har_text(req.get("postData"), f"{where}.request.postData", source)
        raw_meta = e.get("_wirecheck")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        rbody = _har_text(resp.get("content"), f"{where}.response.content", source)
        chunks = None
        if isinstance(meta.get("chunks"), list):
            chunks = []
            for c in meta["chunks"]:
                data = (
                    _b64(c["b64"], f"{where}._wirecheck.chunks", source)
                    if "b64" in c
                    else str(c.get("text", "")).encode("utf-8")
                )
                chunks.append(Chunk(float(c.get("t_ms", 0.0)), data))
        status = resp.get("status", 0)
        response = None
        if isinstance(status, int) and status > 0:
            response = HttpResponse(
                status, _har_headers(resp.get("headers")), b"" if chunks is not None else rbody, chunks
            )
        err = meta.get("error")
        error = (
            ExchangeError(
                str(err.get("kind", "upstream_reset")), str(err.get("message", "")), err.get("t_ms")
            )
            if isinstance(err, dict)
            else None
        )
        if response is None and error is None and e.get("_error"):
            error = ExchangeError("upstream_reset", str(e["_error"]))
        yield Exchange(
            id=str(meta.get("id") or f"har-{i}"),
            tap=str(meta.get("tap") or tap),
            correlation=meta.get("correlation"),
            started_at=e.get("startedDateTime"),
            request=HttpRequest(
                str(req.get("method", "GET")).upper(), path_qs, _har_headers(req.get("headers")), body
            ),
            response=response,
            error=error,
        )


def _fields(headers: Any) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers.fields]


def load_mitm(path: str | Path, *, tap: str = "caller") -> Iterator[Exchange]:
    """HTTP flows of a mitmproxy flow file. Flows streamed through mitmproxy keep no body; they load
    without one (the wirecheck addon records those into a store instead)."""
    try:
        from mitmproxy import http, io
        from mitmproxy.exceptions import FlowReadException
    except ImportError:
        raise InputError(
            "reading mitmproxy flows needs mitmproxy (pip install 'wirecheck[mitm]')", source=str(path)
        ) from None
    try:
        fh = Path(path).open("rb")  # noqa: SIM115 - closed by the with below; open errors named first
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", source=str(path)) from None
    with fh:
        try:
            for n, flow in enumerate(io.FlowReader(fh).stream()):
                if not isinstance(flow, http.HTTPFlow):
                    continue
                req = flow.request
                started = (
                    datetime.fromtimestamp(req.timestamp_start, UTC).isoformat()
                    if req.timestamp_start
                    else None
                )
                response = None
                if flow.response is not None:
                    r = flow.response
                    response = HttpResponse(
                        r.status_code,
                        _fields(r.headers),
                        r.raw_content or b"",
                    )
                error = ExchangeError("upstream_reset", str(flow.error.msg)) if flow.error else None
                yield Exchange(
                    id=f"mitm-{flow.id}" if flow.id else f"mitm-{n}",
                    tap=tap,
                    correlation=req.headers.get("x-wirecheck-id"),
                    started_at=started,
                    request=HttpRequest(
                        req.method,
                        req.path,
                        _fields(req.headers),
                        req.raw_content or b"",
                    ),
                    response=response,
                    error=error,
                )
        except FlowReadException as exc:
            raise InputError(f"not a readable mitmproxy flow file ({exc})", source=str(path)) from None

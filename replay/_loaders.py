"""Opening a capture, once for every reader: ``check``, ``replay``, ``export``, ``accept --samples``
and the pytest plugin all call :func:`read_capture`, which tells a wirecheck store (SQLite or
PostgreSQL), exchange JSONL (a file, or ``-`` for standard input), HAR 1.2 and mitmproxy flow files
apart by their content and yields the same :class:`Exchange` from each.

Captures are read as streams, with limits (:class:`CaptureLimits`): one entry (a JSONL line, a HAR
entry, a store row, a flow) at most ``entry_bytes``, a file at most ``exchanges`` exchanges. The
memory a reader needs is one entry's, whatever the number of entries (a HAR is parsed entry by entry,
``_jsonstream``). Every malformed input is an :class:`InputError` that names the file and the entry
(line, ``log.entries[N]``, store row, flow N): the CLI exits 2 with it, never with a traceback and
never as a pass. Types are checked, not coerced: ``"path": 123`` or a HAR entry without a URL is an
error, not an exchange at ``/``.
"""

from __future__ import annotations

import base64
import binascii
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from wirecheck.contracts import (
    Chunk,
    Exchange,
    ExchangeError,
    Finding,
    HttpRequest,
    HttpResponse,
    InputError,
    read_exchanges,
)
from wirecheck.record import is_postgres, is_store, open_store, store_notes

from ._jsonstream import JsonStreamError, stream_array_at

__all__ = [
    "CaptureLimits",
    "detect_format",
    "load_capture",
    "load_har",
    "load_jsonl",
    "load_mitm",
    "read_capture",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureLimits:
    """How much of a capture is read before it is refused as unusable (exit 2); the CLI options
    ``--max-entry-size`` and ``--max-exchanges`` raise them."""

    #: one entry: a JSONL line, a HAR entry, a store row's document, a mitmproxy flow (a proxy records
    #: at most 16 MiB of each body by default, which its interchange form holds in well under this)
    entry_bytes: int = 64 * 1024 * 1024
    #: exchanges in one file (or store). Reading costs the same whatever the count, but ``check``
    #: holds every exchange and its parsed view to pair them (about 8 KB an exchange of a chat
    #: completion: 218 MB at 20 000 in benchmarks/hostile_captures.py), so this bounds its memory
    #: near 2 GB; a larger capture says so and names the option
    exchanges: int = 250_000


DEFAULT_LIMITS = CaptureLimits()


def detect_format(path: str | Path) -> str:
    """ "store" | "har" | "mitm" | "jsonl", from the file's first bytes (and its name for flows)."""
    if is_postgres(path):
        return "store"
    p = Path(path)
    try:
        with p.open("rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", source=str(p)) from None
    if head.startswith(b"SQLite format 3\x00"):
        return "store"
    stripped = head.lstrip()
    if p.suffix in (".mitm", ".flow", ".flows") or (
        head[:1].isdigit() and b":" in head[:12] and not stripped.startswith(b"{")
    ):
        return "mitm"
    if (
        stripped.startswith(b"{")
        and b'"log"' in head
        and (p.suffix == ".har" or b'"entries"' in head or b'"version"' in head)
    ):
        return "har"
    return "jsonl"


def read_capture(
    source: str | Path,
    *,
    limits: CaptureLimits = DEFAULT_LIMITS,
    notes: list[Finding] | None = None,
    tap: str = "caller",
) -> Iterator[Exchange]:
    """The exchanges of any capture, one at a time. Stores are opened read-only; what a store says
    it lost (gap rows) or set aside (live checks skipped) is added to ``notes`` as findings, so that
    a report counts it. ``-`` is exchange JSONL on standard input."""
    name = str(source)
    if name == "-":
        yield from _counted(load_jsonl(sys.stdin.buffer, limits=limits, name="<stdin>"), limits, name)
    elif is_store(source):
        store = open_store(source)
        try:
            yield from _counted(store.exchanges(max_doc=limits.entry_bytes), limits, store.path)
            if notes is not None:
                notes.extend(store_notes(store))
        finally:
            store.close()
    else:
        yield from load_capture(source, tap=tap, limits=limits)


def load_capture(
    path: str | Path, *, tap: str = "caller", limits: CaptureLimits = DEFAULT_LIMITS
) -> Iterator[Exchange]:
    """Exchanges from a JSONL, HAR or mitmproxy file (a store: :func:`read_capture`)."""
    kind = detect_format(path)
    if kind == "har":
        found = load_har(path, tap=tap, limits=limits)
    elif kind == "mitm":
        found = load_mitm(path, tap=tap, limits=limits)
    elif kind == "jsonl":
        found = load_jsonl(path, limits=limits)
    else:
        raise InputError("this is a wirecheck store: read it with read_capture", source=str(path))
    yield from _counted(found, limits, str(path))


def _counted(exchanges: Iterator[Exchange], limits: CaptureLimits, source: str) -> Iterator[Exchange]:
    """The exchanges, at most ``limits.exchanges`` of them. A reader's checks name each field they
    refuse; should one still fail on some shape nobody foresaw, that too is bad input, named by the
    entry it was reading, not a crash."""
    n = 0
    while True:
        try:
            ex = next(exchanges)
        except StopIteration:
            return
        except InputError:
            raise
        except (Exception, RecursionError) as exc:
            raise InputError(
                f"entry {n + 1}: unusable ({type(exc).__name__}: {str(exc)[:200]})", source=source
            ) from None
        n += 1
        if n > limits.exchanges:
            raise InputError(
                f"more than {limits.exchanges} exchanges: over the limit for one file "
                "(--max-exchanges raises it)",
                source=source,
            )
        yield ex


# --- JSONL ---------------------------------------------------------------------------------------


def load_jsonl(
    source: str | Path | IO[bytes], *, limits: CaptureLimits = DEFAULT_LIMITS, name: str | None = None
) -> Iterator[Exchange]:
    """Exchange JSONL (docs/exchange-format.md), line by line: a line is read only up to the
    entry limit, so one huge line costs that much memory and an error, not the whole line."""
    return read_exchanges(source, max_line=limits.entry_bytes, name=name)


# --- HAR -----------------------------------------------------------------------------------------


class _Bad(Exception):
    """A HAR entry that cannot be used; the message says which field."""


def load_har(
    path: str | Path, *, tap: str = "caller", limits: CaptureLimits = DEFAULT_LIMITS
) -> Iterator[Exchange]:
    """HAR 1.2 entries, parsed one at a time (SSE bodies as text; wirecheck's own HAR adds per-chunk
    timing in ``_wirecheck``)."""
    source = str(path)
    try:
        fh = Path(path).open("rb")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror or exc}", source=source) from None
    with fh:
        i = -1
        try:
            for i, entry in enumerate(stream_array_at(fh, ("log", "entries"), limit=limits.entry_bytes)):
                try:
                    yield _har_exchange(entry, i, tap)
                except _Bad as exc:
                    raise InputError(f"log.entries[{i}]: {exc}", source=source) from None
        except JsonStreamError as exc:
            raise InputError(f"not a usable HAR file: {exc}", source=source) from None
        except RecursionError:  # a hostile entry that the checks below walk too deep
            raise InputError(f"log.entries[{i + 1}]: nested too deep to read", source=source) from None


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    label = f"{where}.{key}" if where else key
    if key not in obj:
        raise _Bad(f"{label}: missing")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise _Bad(f"{label}: expected {_kind(kind)}, got {type(value).__name__}")
    return value


def _may(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    return _need(obj, key, kind, where) if obj.get(key) is not None else None


def _kind(kind: type | tuple[type, ...]) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "a whole number", float: "a number"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _har_headers(items: Any, where: str) -> list[tuple[str, str]]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise _Bad(f"{where}: expected a list of {{name, value}}, got {type(items).__name__}")
    out = []
    for n, h in enumerate(items):
        if not isinstance(h, dict):
            raise _Bad(f"{where}[{n}]: expected an object")
        out.append((_need(h, "name", str, f"{where}[{n}]"), _may(h, "value", str, f"{where}[{n}]") or ""))
    return out


def _har_text(obj: Any, where: str) -> bytes:
    """The bytes of a HAR ``postData`` or ``content`` object: ``text``, base64 when ``encoding`` says."""
    if obj is None:
        return b""
    if not isinstance(obj, dict):
        raise _Bad(f"{where}: expected an object, got {type(obj).__name__}")
    text = _may(obj, "text", str, where)
    if text is None:
        return b""
    if _may(obj, "encoding", str, where) == "base64":
        return _b64(text, f"{where}.text")
    return _utf8(text)


def _utf8(text: str) -> bytes:
    # a lone surrogate (JSON allows "\\ud800") is kept as its bytes, not an error
    return text.encode("utf-8", "surrogatepass")


def _b64(text: str, where: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _Bad(f"{where}: not base64") from None


def _har_exchange(e: Any, i: int, tap: str) -> Exchange:
    if not isinstance(e, dict):
        raise _Bad(f"expected an object, got {type(e).__name__}")
    req = _need(e, "request", dict, "")
    url = _need(req, "url", str, "request")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise _Bad(f"request.url: not a URL ({exc})") from None
    path_qs = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    method = _may(req, "method", str, "request") or "GET"
    body = _har_text(req.get("postData"), "request.postData")
    meta: dict[str, Any] = _may(e, "_wirecheck", dict, "") or {}
    resp: dict[str, Any] = _may(e, "response", dict, "") or {}
    rbody = _har_text(resp.get("content"), "response.content")
    chunks = None
    raw_chunks = _may(meta, "chunks", list, "_wirecheck")
    if raw_chunks is not None:
        chunks = []
        for n, c in enumerate(raw_chunks):
            where = f"_wirecheck.chunks[{n}]"
            if not isinstance(c, dict):
                raise _Bad(f"{where}: expected an object, got {type(c).__name__}")
            t_ms = _may(c, "t_ms", (int, float), where) or 0.0
            b64 = _may(c, "b64", str, where)
            data = _b64(b64, f"{where}.b64") if b64 is not None else _utf8(_may(c, "text", str, where) or "")
            chunks.append(Chunk(float(t_ms), data))
    status = _may(resp, "status", int, "response") or 0
    response = None
    if status > 0:
        response = HttpResponse(
            status,
            _har_headers(resp.get("headers"), "response.headers"),
            b"" if chunks is not None else rbody,
            chunks,
        )
    err = _may(meta, "error", dict, "_wirecheck")
    error = None
    if err is not None:
        t = _may(err, "t_ms", (int, float), "_wirecheck.error")
        error = ExchangeError(
            _may(err, "kind", str, "_wirecheck.error") or "upstream_reset",
            _may(err, "message", str, "_wirecheck.error") or "",
            float(t) if t is not None else None,
        )
    if response is None and error is None and e.get("_error"):
        error = ExchangeError("upstream_reset", str(_need(e, "_error", str, "")))
    ex_id = _may(meta, "id", (str, int), "_wirecheck")
    return Exchange(
        id=str(ex_id) if ex_id is not None else f"har-{i}",
        tap=_may(meta, "tap", str, "_wirecheck") or tap,
        correlation=_may(meta, "correlation", str, "_wirecheck"),
        started_at=_may(e, "startedDateTime", str, ""),
        request=HttpRequest(
            method.upper(), path_qs, _har_headers(req.get("headers"), "request.headers"), body
        ),
        response=response,
        error=error,
    )


# --- mitmproxy flows -----------------------------------------------------------------------------


class _TooBig(Exception):
    pass


class _Bounded:
    """The flow file for mitmproxy's reader, refusing any one read past the entry limit (a flow's
    length prefix says how much it reads next) and any read of everything."""

    def __init__(self, fh: Any, limit: int) -> None:
        self.fh, self.limit = fh, limit

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > self.limit:
            raise _TooBig
        return bytes(self.fh.read(n))

    def peek(self, n: int = 0) -> bytes:
        return bytes(self.fh.peek(n))


def _fields(headers: Any) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in headers.fields]


def load_mitm(
    path: str | Path, *, tap: str = "caller", limits: CaptureLimits = DEFAULT_LIMITS
) -> Iterator[Exchange]:
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
    n = 0
    with fh:
        flows = iter(io.FlowReader(_Bounded(fh, limits.entry_bytes)).stream())  # type: ignore[arg-type]
        while True:
            try:
                flow = next(flows)
            except StopIteration:
                return
            except FlowReadException as exc:
                raise InputError(
                    f"flow {n}: not a readable mitmproxy flow ({exc})", source=str(path)
                ) from None
            except _TooBig:
                raise InputError(
                    f"flow {n}: over the limit of {limits.entry_bytes} bytes for one entry "
                    "(--max-entry-size raises it)",
                    source=str(path),
                ) from None
            except RecursionError:
                raise InputError(f"flow {n}: nested too deep to read", source=str(path)) from None
            except Exception as exc:  # mitmproxy's own reader on a hostile flow: bad input, named
                raise InputError(
                    f"flow {n}: not a usable mitmproxy flow ({type(exc).__name__}: {str(exc)[:200]})",
                    source=str(path),
                ) from None
            n += 1
            if isinstance(flow, http.HTTPFlow):
                yield _flow_exchange(flow, n - 1, tap)


def _flow_exchange(flow: Any, n: int, tap: str) -> Exchange:
    req = flow.request
    started = datetime.fromtimestamp(req.timestamp_start, UTC).isoformat() if req.timestamp_start else None
    response = None
    if flow.response is not None:
        r = flow.response
        response = HttpResponse(r.status_code, _fields(r.headers), r.raw_content or b"")
    error = ExchangeError("upstream_reset", str(flow.error.msg)) if flow.error else None
    return Exchange(
        id=f"mitm-{flow.id}" if flow.id else f"mitm-{n}",
        tap=tap,
        correlation=req.headers.get("x-wirecheck-id"),
        started_at=started,
        request=HttpRequest(req.method, req.path, _fields(req.headers), req.raw_content or b""),
        response=response,
        error=error,
    )

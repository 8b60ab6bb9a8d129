"""The exchange: one HTTP request and its response as seen at one tap, and its JSONL interchange form.

The JSONL form (docs/exchange-format.md) is what fixtures, exports, replay and ``wirecheck check`` read
and write. Bodies are kept as bytes so that nothing a tap saw is lost; a body may be written as a JSON
value (``body``), as text (``body_text``) or as base64 (``body_b64``). Unknown keys are preserved.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache, lru_cache
from itertools import accumulate
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ._errors import InputError
from ._text import escape_surrogates

if TYPE_CHECKING:
    from ._redact import Redaction

__all__ = [
    "FORMAT_VERSION",
    "Chunk",
    "Exchange",
    "ExchangeError",
    "HttpRequest",
    "HttpResponse",
    "JoinedResponse",
    "dump_exchange",
    "load_exchange",
    "read_exchanges",
    "write_exchanges",
]

#: Version of the JSONL interchange format written by this build (key ``v`` on each line).
FORMAT_VERSION = 1

Headers = list[tuple[str, str]]


@dataclass(slots=True)
class Chunk:
    """One piece of a response body as it arrived, ``t_ms`` after the request started."""

    t_ms: float
    data: bytes


@dataclass(slots=True)
class ExchangeError:
    """What went wrong on the transport: ``kind`` is one of the names in the format doc."""

    kind: str  # upstream_reset | upstream_refused | client_abort | timeout | store_gap | ...
    message: str = ""
    t_ms: float | None = None


@dataclass(slots=True)
class HttpRequest:
    method: str = "POST"
    path: str = "/v1/chat/completions"
    headers: Headers = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return _header(self.headers, name)


@dataclass(slots=True)
class HttpResponse:
    status: int = 200
    headers: Headers = field(default_factory=list)
    body: bytes = b""
    chunks: list[Chunk] | None = None

    def header(self, name: str) -> str | None:
        return _header(self.headers, name)

    @property
    def content(self) -> bytes:
        """The whole body: the joined chunks when the response was recorded chunk by chunk."""
        if self.chunks is not None:
            return b"".join(c.data for c in self.chunks)
        return self.body

    def joined(self) -> tuple[bytes, list[int], list[float]] | None:
        """The chunks as one piece of bytes, each chunk's size and its ``t_ms``, where they are held
        so (:class:`JoinedResponse`); None: read ``chunks``."""
        return None

    def arrivals(self) -> list[float]:
        """Each chunk's ``t_ms`` (none without chunks)."""
        return [c.t_ms for c in self.chunks] if self.chunks else []

    def chunk_bytes(self) -> int:
        """The chunks' bytes, in all."""
        return sum([len(c.data) for c in self.chunks]) if self.chunks else 0


class JoinedResponse(HttpResponse):
    """A response recorded chunk by chunk, held as its chunks' bytes joined, their sizes and their
    arrival offsets, as a store row keeps them (``record/_rows.py``): its :class:`Chunk` objects are
    made the first time ``chunks`` is read. Whoever only reads the bytes and the offsets (building a
    view of it: ``joined``, ``arrivals``, ``chunk_bytes``) never makes them: for a stream of 20
    frames the live checker spent as much on its chunks as on reading the row's document.

    Equal to an :class:`HttpResponse` of the same fields. Reading ``chunks`` makes it one in all
    but its class: setting ``chunks`` or changing the list read drops the joined form."""

    __slots__ = ("_chunks", "_joined")
    _chunks: list[Chunk] | None

    def __init__(
        self,
        status: int,
        headers: Headers,
        body: bytes,
        joined: tuple[bytes, list[int], list[float]],
    ) -> None:
        """``joined``: (the bytes, each chunk's size, each chunk's ``t_ms``), which the caller has
        checked agree (as many sizes as offsets, sizes of ``int`` at least 0 adding up to the
        bytes)."""
        HttpResponse.__init__(self, status, headers, body, None)
        self._joined: tuple[bytes, list[int], list[float]] | None = joined

    @classmethod
    def made(
        cls, status: int, headers: Headers, joined: tuple[bytes, list[int], list[float]]
    ) -> JoinedResponse:
        """``JoinedResponse(status, headers, b"", joined)`` with its slots set here, not through the
        constructors' chain: the store's reader makes one for every streamed row it reads."""
        made = cls.__new__(cls)
        made.status, made.headers, made.body = status, headers, b""
        made._chunks, made._joined = None, joined
        return made

    @property
    def chunks(self) -> list[Chunk] | None:
        if self._joined is not None:
            data, sizes, times = self._joined
            ends = list(accumulate(sizes))
            pieces = list(map(data.__getitem__, map(slice, [0, *ends[:-1]], ends)))
            self._chunks = list(map(Chunk, times, pieces))
            self._joined = None
        return self._chunks

    @chunks.setter
    def chunks(self, value: list[Chunk] | None) -> None:
        self._chunks = value
        self._joined = None

    def joined(self) -> tuple[bytes, list[int], list[float]] | None:
        return self._joined

    @property
    def content(self) -> bytes:
        if self._joined is not None:
            return self._joined[0]
        return HttpResponse.content.fget(self)  # type: ignore[attr-defined,no-any-return]

    def arrivals(self) -> list[float]:
        if self._joined is not None:
            return list(self._joined[2])
        return HttpResponse.arrivals(self)

    def chunk_bytes(self) -> int:
        if self._joined is not None:
            return len(self._joined[0])
        return HttpResponse.chunk_bytes(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HttpResponse):
            return NotImplemented
        return (self.status, self.headers, self.body, self.chunks) == (
            other.status,
            other.headers,
            other.body,
            other.chunks,
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(slots=True)
class Exchange:
    id: str
    tap: str = "caller"
    request: HttpRequest = field(default_factory=HttpRequest)
    response: HttpResponse | None = None
    correlation: str | None = None
    started_at: str | None = None
    error: ExchangeError | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def started_epoch(self) -> float | None:
        """``started_at`` (ISO 8601, ``Z`` or an offset) as POSIX seconds; None when absent or not
        a time. The one reading of it for pairing by time and for the live checker's windows."""
        return _epoch(self.started_at) if self.started_at else None

    def with_parts(self, request: HttpRequest, response: HttpResponse | None) -> Exchange:
        """A copy with this request and response, every other field the same: what
        ``dataclasses.replace`` makes, without its lookup of every field by name (the store writer
        copies each exchange so, on the thread that shares the forwarding loop's interpreter)."""
        return Exchange(
            self.id, self.tap, request, response, self.correlation, self.started_at, self.error, self.extra
        )


@lru_cache(maxsize=8192)
def _epoch(started_at: str) -> float | None:
    """An ISO 8601 time as POSIX seconds, None when it is not one: read once for the several times
    the live checker and pairing ask it of one exchange (0.5 us a reading)."""
    try:
        return datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _header(headers: Headers, name: str) -> str | None:
    name = name.lower()
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


# --- JSONL form ------------------------------------------------------------------------------------

_KNOWN = {"v", "id", "tap", "correlation", "started_at", "request", "response", "error"}


class _Bad(Exception):
    pass


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise _Bad(f"{where}: missing key {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise _Bad(f"{where}.{key}: expected {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def _headers_in(value: Any, where: str) -> Headers:
    if value is None:
        return []
    if isinstance(value, dict):
        return [(str(k), str(v)) for k, v in value.items()]
    if isinstance(value, list):
        out: Headers = []
        for i, pair in enumerate(value):
            if not (isinstance(pair, list | tuple) and len(pair) == 2):
                raise _Bad(f"{where}[{i}]: a header is [name, value]")
            out.append((str(pair[0]), str(pair[1])))
        return out
    raise _Bad(f"{where}: headers are an object or a list of [name, value] pairs")


def _headers_out(red: Redaction, headers: Headers) -> dict[str, str] | list[list[str]]:
    """The headers redacted, as an object when no two names are the same but for case, else as
    [name, value] pairs."""
    out = red.header_object(headers)
    if out is not None:
        return out
    return [[k, v] for k, v in red.header_list(headers)]


def _body_in(obj: dict[str, Any], where: str) -> bytes:
    present = [k for k in ("body", "body_text", "body_b64") if k in obj]
    if len(present) > 1:
        raise _Bad(f"{where}: give one of body, body_text, body_b64, not {', '.join(present)}")
    if not present:
        return b""
    key = present[0]
    value = obj[key]
    if key == "body":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    if not isinstance(value, str):
        raise _Bad(f"{where}.{key}: expected a string")
    if key == "body_text":
        return value.encode("utf-8", "surrogateescape")
    return _b64(value, f"{where}.{key}")


def _b64(value: str, where: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _Bad(f"{where}: not base64 ({exc})") from None


def _body_out(body: bytes, into: dict[str, Any], *, text_key: str = "body_text") -> None:
    if not body:
        return
    try:
        into[text_key] = body.decode("utf-8")
    except UnicodeDecodeError:
        into[text_key.replace("text", "b64")] = base64.b64encode(body).decode()


def load_exchange(obj: Any, *, source: str | None = None, line: int | None = None) -> Exchange:
    """Build an :class:`Exchange` from one parsed JSONL object; raises :class:`InputError`."""
    try:
        return _load(obj)
    except _Bad as exc:
        raise InputError(str(exc), source=source, line=line) from None


def _load(obj: Any) -> Exchange:
    if not isinstance(obj, dict):
        raise _Bad(f"an exchange is a JSON object, got {type(obj).__name__}")
    version = obj.get("v", FORMAT_VERSION)
    if not isinstance(version, int) or version < 1:
        raise _Bad(f"v: format version must be a positive integer, got {version!r}")
    if version > FORMAT_VERSION:
        raise _Bad(f"v: format version {version} is newer than this wirecheck reads ({FORMAT_VERSION})")
    ex_id = _need(obj, "id", (str, int), "exchange")
    tap = obj.get("tap", "caller")
    if not isinstance(tap, str) or not tap:
        raise _Bad("exchange.tap: expected a non-empty string")
    req_obj = _need(obj, "request", dict, "exchange")
    # checked, not coerced: "path": 123 is a broken capture, not a request to "/123"
    method, path = req_obj.get("method", "POST"), req_obj.get("path", "/v1/chat/completions")
    if not isinstance(method, str) or not method:
        raise _Bad("request.method: expected a non-empty string")
    if not isinstance(path, str) or not path:
        raise _Bad("request.path: expected a non-empty string")
    request = HttpRequest(
        method=method.upper(),
        path=path,
        headers=_headers_in(req_obj.get("headers"), "request.headers"),
        body=_body_in(req_obj, "request"),
    )
    response = None
    resp_obj = obj.get("response")
    if resp_obj is not None:
        if not isinstance(resp_obj, dict):
            raise _Bad("response: expected an object or null")
        status = _need(resp_obj, "status", int, "response")
        chunks = None
        if "chunks" in resp_obj:
            raw = resp_obj["chunks"]
            if not isinstance(raw, list):
                raise _Bad("response.chunks: expected a list")
            chunks = []
            for i, c in enumerate(raw):
                where = f"response.chunks[{i}]"
                if not isinstance(c, dict):
                    raise _Bad(f"{where}: expected an object")
                t = c.get("t_ms", 0.0)
                if not isinstance(t, int | float) or isinstance(t, bool):
                    raise _Bad(f"{where}.t_ms: expected a number")
                if "text" in c and "b64" in c:
                    raise _Bad(f"{where}: give text or b64, not both")
                if "text" in c:
                    if not isinstance(c["text"], str):
                        raise _Bad(f"{where}.text: expected a string")
                    data = c["text"].encode("utf-8", "surrogateescape")
                elif "b64" in c:
                    if not isinstance(c["b64"], str):
                        raise _Bad(f"{where}.b64: expected a string")
                    data = _b64(c["b64"], f"{where}.b64")
                else:
                    raise _Bad(f"{where}: needs text or b64")
                chunks.append(Chunk(float(t), data))
        body = _body_in(resp_obj, "response")
        if chunks is not None and body and body != b"".join(c.data for c in chunks):
            raise _Bad("response: body and chunks disagree (give one, or the same bytes)")
        response = HttpResponse(
            status=status,
            headers=_headers_in(resp_obj.get("headers"), "response.headers"),
            body=body if chunks is None else b"",
            chunks=chunks,
        )
    error = None
    err_obj = obj.get("error")
    if isinstance(err_obj, str):
        error = ExchangeError(err_obj)
    elif isinstance(err_obj, dict):
        kind = _need(err_obj, "kind", str, "error")
        t = err_obj.get("t_ms")
        if t is not None and (not isinstance(t, int | float) or isinstance(t, bool)):
            raise _Bad("error.t_ms: expected a number")
        error = ExchangeError(kind, str(err_obj.get("message", "")), float(t) if t is not None else None)
    elif err_obj is not None:
        raise _Bad("error: expected a string, an object or null")
    correlation = obj.get("correlation")
    started = obj.get("started_at")
    if isinstance(started, int | float) and not isinstance(started, bool):
        started = datetime.fromtimestamp(started, UTC).isoformat()
    return Exchange(
        id=str(ex_id),
        tap=tap,
        request=request,
        response=response,
        correlation=str(correlation) if correlation is not None else None,
        started_at=str(started) if started is not None else None,
        error=error,
        extra={k: v for k, v in obj.items() if k not in _KNOWN},
    )


def dump_exchange(ex: Exchange, *, redaction: Redaction | None = None, chunks: bool = True) -> dict[str, Any]:
    """The JSONL object for one exchange (bytes kept exactly: text when UTF-8, base64 otherwise).

    Credentials are redacted on the way out by ``redaction`` (the default policy when None): every
    store and JSONL file is written through here, so no writer can forget it.

    ``chunks=False``: a response recorded chunk by chunk is written without its chunks (and without
    a body), for a writer that keeps the chunks its own way (the store, record/_rows.py).
    """
    # what ``Redaction.exchange`` redacts (the target, both header lists), part by part: its copy
    # of the exchange cost as much as the redaction on the store writer's thread
    red = redaction or _default_redaction()
    request = ex.request
    out: dict[str, Any] = {"v": FORMAT_VERSION, "id": ex.id, "tap": ex.tap}
    if ex.correlation is not None:
        out["correlation"] = ex.correlation
    if ex.started_at is not None:
        out["started_at"] = ex.started_at
    req: dict[str, Any] = {
        "method": request.method,
        "path": red.target(request.path),
        "headers": _headers_out(red, request.headers),
    }
    _body_out(request.body, req)
    out["request"] = req
    if ex.response is not None:
        resp: dict[str, Any] = {
            "status": ex.response.status,
            "headers": _headers_out(red, ex.response.headers),
        }
        # a response held joined was recorded chunk by chunk: told so without cutting it into chunks
        recorded = ex.response.chunks if ex.response.joined() is None or chunks else []
        if recorded is None:
            _body_out(ex.response.body, resp)
        elif chunks:
            resp["chunks"] = _chunks_out(recorded)
        out["response"] = resp
    if ex.error is not None:
        err: dict[str, Any] = {"kind": ex.error.kind}
        if ex.error.message:
            err["message"] = ex.error.message
        if ex.error.t_ms is not None:
            err["t_ms"] = ex.error.t_ms
        out["error"] = err
    out.update(ex.extra)
    return out


def _chunks_out(chunks: list[Chunk]) -> list[dict[str, Any]]:
    out = []
    for c in chunks:
        item: dict[str, Any] = {"t_ms": round(c.t_ms, 3)}
        try:
            item["text"] = c.data.decode("utf-8")
        except UnicodeDecodeError:
            # A chunk may end mid-character: keep its bytes exactly.
            item["b64"] = base64.b64encode(c.data).decode()
        out.append(item)
    return out


@cache
def _default_redaction() -> Redaction:
    """The default policy, imported on first use (``_redact`` builds on this module's types) and
    kept: an import statement in ``dump_exchange`` ran on every exchange written."""
    from ._redact import DEFAULT_REDACTION

    return DEFAULT_REDACTION


def read_exchanges(
    source: str | Path | IO[str] | IO[bytes], *, max_line: int | None = None, name: str | None = None
) -> Iterator[Exchange]:
    """Yield the exchanges of a JSONL file; blank lines are skipped, anything else bad is an error.

    ``max_line``: the longest line read, in bytes; a line past it is an :class:`InputError` for that
    line, and no more of it than the limit is ever held (a file, a binary stream, or a text stream
    with a binary ``buffer`` such as standard input)."""
    if isinstance(source, str | Path):
        path = Path(source)
        try:
            fh: IO[bytes] = path.open("rb")
        except OSError as exc:
            raise InputError(f"cannot open: {exc.strerror or exc}", source=str(path)) from None
        with fh:
            yield from _read_lines(fh, name or str(path), max_line)
        return
    label = name or str(getattr(source, "name", "<stream>"))
    raw = getattr(source, "buffer", source)
    if isinstance(raw.read(0), bytes):
        yield from _read_lines(raw, label, max_line)
    else:  # a text stream with no bytes under it (io.StringIO): its lines as they are
        yield from _read_lines(_Encoded(source), label, max_line)


class _Encoded:
    """The lines of a text stream as UTF-8 bytes, read as a binary stream is."""

    def __init__(self, fh: Any) -> None:
        self._lines = iter(fh)

    def readline(self, _size: int = -1) -> bytes:
        line = next(self._lines, "")
        return str(line).encode("utf-8", "surrogatepass")


def _read_lines(fh: Any, name: str, max_line: int | None) -> Iterator[Exchange]:
    lineno = 0
    while True:
        raw: bytes = fh.readline(max_line + 1) if max_line is not None else fh.readline()
        if not raw:
            return
        lineno += 1
        if max_line is not None and len(raw) > max_line and not raw.endswith(b"\n"):
            raise InputError(
                f"a line over the limit of {max_line} bytes for one entry (--max-entry-size raises it)",
                source=name,
                line=lineno,
            )
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"not UTF-8 text ({exc.reason})", source=name, line=lineno) from None
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"not JSON ({exc.msg} at column {exc.colno})", source=name, line=lineno
            ) from None
        except RecursionError:
            # a body written as a JSON value thousands of levels deep
            raise InputError(
                "JSON nested too deep to read (write a deep body as body_text)", source=name, line=lineno
            ) from None
        yield load_exchange(obj, source=name, line=lineno)


def write_exchanges(exchanges: Iterable[Exchange], fh: IO[str], *, redaction: Redaction | None = None) -> int:
    """Write exchanges as JSONL, credentials redacted; returns how many were written."""
    n = 0
    for ex in exchanges:
        # a lone surrogate (an id or header read from JSON) is written as its escape
        fh.write(
            escape_surrogates(
                json.dumps(dump_exchange(ex, redaction=redaction), ensure_ascii=False, separators=(",", ":"))
            )
        )
        fh.write("\n")
        n += 1
    return n

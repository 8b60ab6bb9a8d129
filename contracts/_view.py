"""One parsed look at an exchange, shared by every rule: request JSON, response kind, assembled choices.

Streamed and non-streamed responses end up in the same :class:`AssembledChoice` shape, so a rule about
tool calls or reasoning is written once and judges both.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from . import _apis_messages, _apis_responses
from ._apis import API_ENDPOINTS, endpoint_of
from ._assembly import AssembledCall, AssembledChoice, AssembledStream, StreamAnomaly, assemble_stream
from ._exchange import Exchange
from ._json import MAX_BYTES, JsonLimitError
from ._json import loads as bounded_loads
from ._sse import SSEAnomaly, SSEDecoder, SSEEvent, decode_joined, decode_parts, decode_sse

__all__ = ["ExchangeView", "build_view", "build_views", "output_constraint"]


@dataclass(slots=True)
class ExchangeView:
    ex: Exchange
    req: dict[str, Any] = field(default_factory=dict)
    request_problem: str | None = None
    is_chat: bool = False
    #: chat | responses | messages, None for any other path
    endpoint: str | None = None
    #: the request as sent, where ``req`` is its chat-shaped normal form (/v1/responses, /v1/messages)
    raw_req: dict[str, Any] = field(default_factory=dict)
    wants_stream: bool = False
    tools: dict[str, Any] = field(default_factory=dict)  # declared name -> parameters (or None)
    status: int | None = None
    content_type: str = ""
    kind: str = "none"  # "stream" | "json" | "error" | "none" | "other"
    body: Any = None
    body_problem: str | None = None
    stream: AssembledStream | None = None
    events: list[SSEEvent] = field(default_factory=list)
    sse_anomalies: list[SSEAnomaly] = field(default_factory=list)
    choices: list[AssembledChoice] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    anomalies: list[StreamAnomaly] = field(default_factory=list)
    model: str | None = None
    #: (pointer, what) of every JSON document over the depth or size bound (the json-limit rule)
    limits: list[tuple[str, str]] = field(default_factory=list)
    #: what pairing derived from this view (its request fingerprint, its side), worked out once: the
    #: live checker pairs the same recent views again in every batch
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: ``ok`` once asked (a view is not changed once built): the rules, pairing and the live
    #: checker's twin keys ask it about 17 times a view, 2.4k instructions each
    _ok: bool | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def id(self) -> str:
        return self.ex.id

    @property
    def tap(self) -> str:
        return self.ex.tap

    @property
    def closed_after_done(self) -> bool:
        """The caller closed once ``data: [DONE]`` had been passed on: a complete exchange. The openai
        SDK closes right after ``[DONE]``, before the chunked terminator (gateway-litellm.md), so a tap
        records a client abort on a stream that ended normally."""
        err = self.ex.error
        return (
            err is not None
            and err.kind == "client_abort"
            and self.stream is not None
            and self.stream.done > 0
            and not self.stream.error_frames
        )

    @property
    def is_agent(self) -> bool:
        """An exchange the message rules judge: a chat completion, or a Responses / Messages call
        normalized into the same choices."""
        return self.is_chat or self.endpoint in API_ENDPOINTS

    @property
    def ok(self) -> bool:
        """A 2xx chat completion (or Responses / Messages call) with a usable body or stream that ran
        to its end: a stream cut by an in-band error or the transport is not judged as a message (its
        own rules report it)."""
        ok = self._ok
        if ok is None:
            ok = self._ok = bool(
                self.is_agent
                and self.status is not None
                and 200 <= self.status < 300
                and self.kind in ("stream", "json")
                and (self.ex.error is None or self.closed_after_done)
                and not (self.stream is not None and self.stream.error_frames)
            )
        return ok

    def call_pointer(self, choice: AssembledChoice, call: AssembledCall, tail: str = "") -> str:
        if call.pointer:
            return call.pointer + tail.replace("/function", "")
        pos = choice.calls.index(call)
        return f"/choices/{choice.index}/message/tool_calls/{pos}{tail}"


class _Inflate:
    """Incremental content-encoding decoder (gzip, deflate, br): the taps record bytes as they
    travelled, compressed included, and the checker reads what a client would decode."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self.failed: str | None = None
        self.size = 0
        if encoding == "br":
            import brotli  # type: ignore[import-not-found,import-untyped,unused-ignore]

            self._d: Any = brotli.Decompressor()
        else:
            self._d = zlib.decompressobj(wbits=47 if encoding in ("gzip", "x-gzip") else 15)

    def feed(self, data: bytes) -> bytes:
        if self.failed is not None:
            return b""
        try:
            if self.encoding == "br":
                out = bytes(self._d.process(data))
            else:
                # bounded: a small compressed body may inflate to gigabytes
                out = bytes(self._d.decompress(data, MAX_BYTES - self.size + 1))
        except Exception as exc:  # zlib.error, brotli.error
            self.failed = f"{self.encoding} body does not decode ({exc})"
            return b""
        self.size += len(out)
        if self.size > MAX_BYTES:
            self.failed = f"{self.encoding} body decodes to more than the limit of {MAX_BYTES} bytes"
            return b""
        return out


def _inflater(resp: Any) -> _Inflate | None:
    enc = (resp.header("content-encoding") or "").strip().lower()
    if enc in ("gzip", "x-gzip", "deflate"):
        return _Inflate(enc)
    if enc == "br":
        try:
            return _Inflate(enc)
        except ImportError:
            return None
    return None


#: the typed APIs, each read as chat by its module: request, non-streamed body, event stream
_DIALECTS = {"responses": _apis_responses, "messages": _apis_messages}


#: a chunk's bytes, and its arrival offset
_DATA = attrgetter("data")
_T_MS = attrgetter("t_ms")


def build_view(ex: Exchange) -> ExchangeView:
    view = _begin(ex)
    pending = _read_response(view)
    if pending is not None:
        _assemble(view, *pending)
    return view


def build_views(exchanges: list[Exchange]) -> list[ExchangeView | None]:
    """:func:`build_view` of each exchange, built a step at a time across all of them (every request,
    then every response's frames, then every stream's assembly), or None for one whose view raised
    (:func:`build_view` of it alone raises the same). The views are those :func:`build_view` makes;
    what differs is the order of the work: each step's code runs over the whole list while it is
    in the CPU's caches, where one exchange after another went through all of them in turn (the live
    checker builds its views a run at a time so: about a tenth of its CPU an exchange)."""
    views: list[ExchangeView | None] = []
    for ex in exchanges:
        try:
            views.append(_begin(ex))
        except Exception:  # a view that cannot be built: its own build_view says why
            views.append(None)
    streams: list[tuple[int, ExchangeView, tuple[list[SSEEvent], SSEDecoder]]] = []
    for k, view in enumerate(views):
        if view is None:
            continue
        try:
            pending = _read_response(view)
        except Exception:
            views[k] = None
            continue
        if pending is not None:
            streams.append((k, view, pending))
    for k, view, (events, decoder) in streams:
        try:
            _assemble(view, events, decoder)
        except Exception:
            views[k] = None
    return views


def _begin(ex: Exchange) -> ExchangeView:
    """A view's first step: its endpoint and its request read."""
    view = ExchangeView(ex)
    req = ex.request
    view.endpoint = endpoint_of(req.method, req.path)
    view.is_chat = view.endpoint == "chat"
    if view.endpoint is not None:
        _parse_request(view)
    return view


def _read_response(view: ExchangeView) -> tuple[list[SSEEvent], SSEDecoder] | None:
    """A view's second step: the response read, whole, but for a stream's assembly: then the stream's
    events and their decoder, for :func:`_assemble`."""
    resp = view.ex.response
    if resp is None:
        return None
    view.status = resp.status
    view.content_type = resp.header("content-type") or ""
    # Judge by the Content-Type; a stream asked for and served under another non-JSON type is still
    # decoded as one (stream-content-type reports the header).
    ctype = view.content_type.split(";", 1)[0].strip().lower()
    raw_stream = ctype == "text/event-stream" or (view.wants_stream and not ctype.endswith("json"))
    if 200 <= resp.status < 300 and raw_stream:
        view.kind = "stream"
        inflate = _inflater(resp)
        joined = resp.joined() if inflate is None else None
        if joined is not None:  # as a store row holds it: no chunk objects made to be joined again
            events, decoder = decode_joined(joined[0], joined[1], list(joined[2]))
        else:
            datas: list[bytes]
            times: list[float | None]
            if resp.chunks is not None:  # mapped in C: a comprehension cost more per frame than the cut
                datas, times = list(map(_DATA, resp.chunks)), list(map(_T_MS, resp.chunks))
            else:
                datas, times = [resp.body], [None]
            if inflate is None:
                events, decoder = decode_parts(datas, times)
            else:  # inflated piece by piece, in order, as a client reads it
                events, decoder = decode_sse([inflate.feed(d) for d in datas], times)
        if inflate is not None and inflate.failed:
            decoder.anomalies.append(
                SSEAnomaly("bad-content-encoding", inflate.failed, decoder.events_seen, None)
            )
        view.events = events
        view.sse_anomalies = decoder.anomalies
        return events, decoder
    content = resp.content
    inflate = _inflater(resp)
    if inflate is not None and content:
        decoded = inflate.feed(content)
        if inflate.failed:
            view.body_problem = inflate.failed
        content = decoded
    if not content and view.body_problem is None:
        view.kind = "none" if resp.status < 400 else "error"
        return None
    if view.body_problem is None:
        try:
            view.body = bounded_loads(content)
        except JsonLimitError as exc:
            view.limits.append(("/response/body", str(exc)))
            view.body_problem = f"body is not parsed ({exc})"
        except (ValueError, UnicodeDecodeError) as exc:
            view.body_problem = f"body is not JSON ({exc})"
    if resp.status >= 400:
        view.kind = "error"
        return None
    if view.body_problem is not None or not view.is_agent:
        view.kind = "other"
        return None
    view.kind = "json"
    dialect = _DIALECTS.get(str(view.endpoint))
    if dialect is not None:
        dialect.take_body(view)
    else:
        _take_completion(view)
    return None


def _assemble(view: ExchangeView, events: list[SSEEvent], decoder: SSEDecoder) -> None:
    """A stream's view's last step: its events assembled into choices."""
    dialect = _DIALECTS.get(str(view.endpoint))
    plain = decoder.plain_numbers
    st = (
        dialect.assemble(events, plain=plain) if dialect is not None else assemble_stream(events, plain=plain)
    )
    st.sse_anomalies = decoder.anomalies
    view.stream = st
    view.anomalies = st.anomalies
    view.choices = [st.choices[k] for k in sorted(st.choices)]
    view.usage = st.usage
    view.model = st.model


def _parse_request(view: ExchangeView) -> None:
    body = view.ex.request.body
    if not body:
        view.request_problem = "empty request body"
        return
    try:
        req = bounded_loads(body)
    except JsonLimitError as exc:
        view.limits.append(("/request/body", str(exc)))
        view.request_problem = f"request body is not parsed ({exc})"
        return
    except (ValueError, UnicodeDecodeError) as exc:
        view.request_problem = f"request body is not JSON ({exc})"
        return
    if not isinstance(req, dict):
        view.request_problem = f"request body is a JSON {type(req).__name__}, not an object"
        return
    dialect = _DIALECTS.get(str(view.endpoint))
    if dialect is not None:
        view.raw_req = req
        req = dialect.normalize_request(req)
    view.req = req
    view.wants_stream = req.get("stream") is True
    tools = req.get("tools")
    if isinstance(tools, list):
        for t in tools:
            fn = t.get("function") if isinstance(t, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                view.tools[fn["name"]] = fn.get("parameters")


def _take_completion(view: ExchangeView) -> None:
    body = view.body
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        view.body_problem = "a chat completion needs an object with a choices list"
        view.kind = "other"
        return
    view.model = body.get("model") if isinstance(body.get("model"), str) else None
    usage = body.get("usage")
    view.usage = usage if isinstance(usage, dict) else None
    for ci, ch in enumerate(body["choices"]):
        ptr = f"/choices/{ci}"
        if not isinstance(ch, dict) or not isinstance(ch.get("message"), dict):
            view.anomalies.append(StreamAnomaly("bad-shape", "choice has no message object", -1, ptr))
            continue
        idx = ch.get("index", ci)
        choice = AssembledChoice(idx if isinstance(idx, int) else ci)
        msg = ch["message"]
        choice.role = msg.get("role")
        content = msg.get("content")
        if content is None or isinstance(content, str):
            choice.content = content
        else:
            view.anomalies.append(
                StreamAnomaly("bad-shape", "content is not a string or null", -1, ptr + "/message/content")
            )
        for key in ("reasoning", "reasoning_content"):
            value = msg.get(key)
            if value is not None:
                choice.reasoning_fields.add(key)
                if isinstance(value, str):
                    if choice.reasoning is None:
                        choice.reasoning = value
                    elif choice.reasoning != value:
                        view.anomalies.append(
                            StreamAnomaly(
                                "reasoning-conflict",
                                "reasoning and reasoning_content differ",
                                -1,
                                ptr + "/message",
                            )
                        )
                else:
                    view.anomalies.append(
                        StreamAnomaly(
                            "reasoning-not-string", json.dumps(value)[:200], -1, f"{ptr}/message/{key}"
                        )
                    )
        for key in msg:
            if key not in _MESSAGE_KEYS:
                choice.extra_delta_keys.add(key)
        tcs = msg.get("tool_calls")
        if isinstance(tcs, list):
            for ti, tc in enumerate(tcs):
                tptr = f"{ptr}/message/tool_calls/{ti}"
                if not isinstance(tc, dict):
                    view.anomalies.append(StreamAnomaly("bad-shape", "tool call is not an object", -1, tptr))
                    continue
                fn = tc.get("function")
                if not isinstance(fn, dict):
                    view.anomalies.append(
                        StreamAnomaly("bad-shape", "tool call has no function object", -1, tptr)
                    )
                    fn = {}
                args = fn.get("arguments")
                if args is not None and not isinstance(args, str):
                    view.anomalies.append(
                        StreamAnomaly(
                            "arguments-not-string", json.dumps(args)[:200], -1, tptr + "/function/arguments"
                        )
                    )
                    args = json.dumps(args, ensure_ascii=False)
                name = fn.get("name")
                choice.calls.append(
                    AssembledCall(
                        index=ti,
                        id=tc.get("id") if isinstance(tc.get("id"), str) else None,
                        type=tc.get("type"),
                        name=name if isinstance(name, str) else "",
                        arguments=args or "",
                        has_arguments_key="arguments" in fn,
                    )
                )
        elif tcs is not None:
            view.anomalies.append(
                StreamAnomaly("bad-shape", "tool_calls is not a list", -1, ptr + "/message/tool_calls")
            )
        choice.finish_reason = ch.get("finish_reason")
        choice.stop_reason = ch.get("stop_reason")
        view.choices.append(choice)


_MESSAGE_KEYS = frozenset(
    {
        "role",
        "content",
        "refusal",
        "annotations",
        "audio",
        "function_call",
        "tool_calls",
        "reasoning",
        "reasoning_content",
        "name",
    }
)


def output_constraint(req: dict[str, Any]) -> tuple[str, Any] | None:
    """What a chat-shaped request constrains the answer's text to, per ``response_format`` and
    ``structured_outputs`` (the typed APIs' formats are read into these): ("json_object", None) |
    ("json_schema", schema) | ("regex", pattern) | ("choice", [...]) or None."""
    rf = req.get("response_format")
    if isinstance(rf, dict):
        kind = rf.get("type")
        if kind == "json_object":
            return "json_object", None
        if kind == "json_schema":
            js = rf.get("json_schema")
            return "json_schema", js.get("schema", {}) if isinstance(js, dict) else {}
    so = req.get("structured_outputs")
    if isinstance(so, dict):
        if so.get("json") is not None:
            schema = so["json"]
            if isinstance(schema, str):
                try:
                    schema = bounded_loads(schema)
                except ValueError:
                    schema = {}
            return "json_schema", schema
        if so.get("json_object"):
            return "json_object", None
        if isinstance(so.get("regex"), str):
            return "regex", so["regex"]
        if isinstance(so.get("choice"), list):
            return "choice", so["choice"]
    return None

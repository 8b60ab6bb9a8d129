"""A pass-through gateway that can apply every gateway fault of gateway-faults.md, one name per fault.

With no faults it forwards requests and responses unchanged (streams chunk by chunk, unbuffered).
Each fault rewrites what a real gateway was reported to rewrite (docs/sim.md lists them with the
reports). Streams are cut into frames by the gateway's own splitter: vLLM (and the simulator) end
every frame with a blank line.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ._config import FaultSpec, parse_faults
from ._truth import CORRELATION_HEADER, GroundTruth, Injected

__all__ = ["GATEWAY_FAULTS", "GatewayConfig", "create_gateway", "parse_gateway_faults"]

GATEWAY_FAULTS: dict[str, str] = {
    # request side
    "response_format_stripped": "response_format / structured_outputs removed from the request (CLIProxyAPI #5533)",
    "history_merged": "consecutive messages of one role merged into one (litellm #2662)",
    "tool_messages_dropped": "role: tool messages dropped from the history (hermes-agent PR #14316)",
    "correlation_header_dropped": "unknown x- headers dropped, x-wirecheck-id among them",
    # response side
    "reasoning_dropped": "the reasoning field dropped (litellm #20246)",
    "reasoning_renamed": "reasoning renamed to reasoning_content",
    "reasoning_reshaped": "reasoning turned into reasoning_details objects (bifrost #5325)",
    "reasoning_merged": "reasoning prepended to content (higress PR #1842)",
    "tool_index_zero": "every tool call at index 0 (litellm #33678)",
    "tool_index_from_one": "tool call indexes start at 1 (agentgateway #2965)",
    "id_every_delta": "the tool call id repeated on every delta (litellm #20480)",
    "ids_rewritten": "tool call ids replaced by the gateway's own (CLIProxyAPI #3878)",
    "args_double_encoded": "arguments wrapped again as a JSON string (praxis-proxy/ai #558)",
    "stream_buffered": "the whole stream held back and sent at once (litellm #26102)",
    "sse_split_frames": "a blank line inserted inside a frame's JSON (litellm #30224)",
    "sse_no_data_prefix": "frames sent without their data: prefix (opik PR #5149)",
    "done_missing": "data: [DONE] dropped (litellm #1255)",
    "done_doubled": "data: [DONE] sent twice (one-api #1628)",
    "error_hidden": "an in-band error frame replaced by a normal stop (litellm #40578)",
    "finish_reason_changed": "finish_reason tool_calls turned into stop (litellm #21041)",
    "usage_dropped": "the usage chunk (and usage) dropped (OmniRoute #9750)",
    "usage_recomputed": "usage rewritten by counting characters (headroom PR #2026)",
    "retry_duplicates": "the answer text sent again after a replayed attempt (nuguard #455)",
}
_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "host",
}


def parse_gateway_faults(spec: str | None, *, seed: int = 0) -> FaultSpec:
    return parse_faults(spec, seed=seed, known=GATEWAY_FAULTS)


@dataclass(kw_only=True, slots=True)
class GatewayConfig:
    upstream: str
    faults: FaultSpec = field(default_factory=FaultSpec)
    timeout_s: float = 600.0
    #: in-process upstream (tests): an httpx transport instead of the network
    transport: httpx.AsyncBaseTransport | None = None
    #: where to write the faults that changed an exchange (the demo's ground truth)
    truth: GroundTruth | None = None


#: A stream the engine sent within this many milliseconds arrives "at once" with or without a
#: buffer: on loopback, scheduling jitter is as large as the stream itself, so holding it back is not
#: visible on the wire (the checker's gateway-stream-buffered documents the same floor).
_BUFFER_VISIBLE_MS = 50.0


class _Faults:
    def __init__(self, active: set[str], seq: int) -> None:
        self.on = active
        self.seq = seq
        #: faults that changed something (fired is not enough: the ground truth records these)
        self.applied: set[str] = set()
        self.hidden: dict[str, str] = {}  # applied, but not visible on the wire: why
        self.completion_id: str | None = None

    def __contains__(self, name: str) -> bool:
        return name in self.on

    def did(self, name: str) -> None:
        self.applied.add(name)

    def injected(self) -> list[Injected]:
        return [
            Injected(n, "gateway", observable=n not in self.hidden, why=self.hidden.get(n, ""))
            for n in sorted(self.applied)
        ]


# --- request side --------------------------------------------------------------------------------


def _rewrite_request(body: dict[str, Any], f: _Faults) -> dict[str, Any]:
    if "response_format_stripped" in f:
        stripped = [body.pop(k, None) for k in ("response_format", "structured_outputs")]
        if any(v is not None for v in stripped):
            f.did("response_format_stripped")
    msgs = body.get("messages")
    if isinstance(msgs, list):
        if "tool_messages_dropped" in f:
            kept = [m for m in msgs if not (isinstance(m, dict) and m.get("role") == "tool")]
            if len(kept) != len(msgs):
                f.did("tool_messages_dropped")
            msgs = kept
        if "history_merged" in f:
            merged: list[Any] = []
            for m in msgs:
                prev = merged[-1] if merged else None
                if (
                    isinstance(m, dict)
                    and isinstance(prev, dict)
                    and m.get("role") == prev.get("role")
                    and isinstance(m.get("content"), str)
                    and isinstance(prev.get("content"), str)
                ):
                    merged[-1] = {**prev, "content": prev["content"] + "\n" + m["content"]}
                    f.did("history_merged")
                else:
                    merged.append(m)
            msgs = merged
        body["messages"] = msgs
    return body


# --- response side -------------------------------------------------------------------------------


def _new_id(old: str, seq: int) -> str:
    return "call_" + hashlib.sha256(f"{seq}:{old}".encode()).hexdigest()[:24]


def _rewrite_reasoning(part: dict[str, Any], f: _Faults, *, keep_key: bool) -> None:
    """The reasoning faults on a non-streamed message (``keep_key``: it declares every field, so a
    dropped reasoning stays as null) or on a stream delta (the key goes)."""
    reasoning = part.get("reasoning")
    if reasoning is None:
        return

    def clear() -> None:
        if keep_key:
            part["reasoning"] = None
        else:
            part.pop("reasoning")

    if "reasoning_dropped" in f:
        clear()
    elif "reasoning_renamed" in f:
        part["reasoning_content"] = part.pop("reasoning")
    elif "reasoning_reshaped" in f:
        part.pop("reasoning")
        part["reasoning_details"] = [{"type": "reasoning.text", "text": reasoning}]
    elif "reasoning_merged" in f:
        part["content"] = reasoning + (part.get("content") or "")
        clear()
    _did_reasoning(f, reasoning)


def _rewrite_message(msg: dict[str, Any], f: _Faults) -> None:
    """Non-streamed message."""
    _rewrite_reasoning(msg, f, keep_key=True)
    if "retry_duplicates" in f and isinstance(msg.get("content"), str) and msg["content"]:
        msg["content"] = msg["content"] + msg["content"]
        f.did("retry_duplicates")
    for tc in msg.get("tool_calls") or []:
        if "ids_rewritten" in f and isinstance(tc.get("id"), str):
            tc["id"] = _new_id(tc["id"], f.seq)
            f.did("ids_rewritten")
        fn = tc.get("function") or {}
        if "args_double_encoded" in f and isinstance(fn.get("arguments"), str):
            fn["arguments"] = json.dumps(fn["arguments"])
            f.did("args_double_encoded")


def _did_reasoning(f: _Faults, reasoning: Any) -> None:
    # the first reasoning fault wins (the if/elif chain of _rewrite_reasoning); only text that was there is changed
    for name in ("reasoning_dropped", "reasoning_renamed", "reasoning_reshaped", "reasoning_merged"):
        if name in f:
            if reasoning:
                f.did(name)
            return


def _rewrite_completion(body: dict[str, Any], f: _Faults) -> dict[str, Any]:
    if isinstance(body.get("id"), str):
        f.completion_id = body["id"]
    for ch in body.get("choices") or []:
        if isinstance(ch.get("message"), dict):
            _rewrite_message(ch["message"], f)
        if "finish_reason_changed" in f and ch.get("finish_reason") == "tool_calls":
            ch["finish_reason"] = "stop"
            f.did("finish_reason_changed")
    usage = body.get("usage")
    if isinstance(usage, dict):
        if "usage_dropped" in f:
            body["usage"] = None
            f.did("usage_dropped")
        elif "usage_recomputed" in f:
            f.did("usage_recomputed")
            text = "".join((ch.get("message") or {}).get("content") or "" for ch in body.get("choices") or [])
            usage["completion_tokens"] = max(1, len(text) // 4)
            usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage["completion_tokens"]
    return body


class _StreamRewriter:
    def __init__(self, f: _Faults) -> None:
        self.f = f
        self.ids: dict[int, str] = {}
        self.started: set[int] = set()
        self.content: list[str] = []

    def frame(self, data: str) -> list[str]:
        """One frame's data in, the frames' data to send out."""
        f = self.f
        if data.strip() == "[DONE]":
            if "done_missing" in f:
                f.did("done_missing")
                return []
            if "done_doubled" in f:
                f.did("done_doubled")
                return ["[DONE]", "[DONE]"]
            return ["[DONE]"]
        try:
            obj = json.loads(data)
        except ValueError:
            return [data]
        if not isinstance(obj, dict):
            return [data]
        if isinstance(obj.get("id"), str) and f.completion_id is None:
            f.completion_id = obj["id"]
        if "error" in obj and "choices" not in obj and "error_hidden" in f:
            f.did("error_hidden")
            fake = {
                "id": "chatcmpl-gateway",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
            return [json.dumps(fake)]
        out_before: list[str] = []
        if obj.get("choices") == [] and obj.get("usage") is not None:
            if "usage_dropped" in f:
                f.did("usage_dropped")
                return []
            if "usage_recomputed" in f:
                f.did("usage_recomputed")
                u = obj["usage"]
                u["completion_tokens"] = max(1, len("".join(self.content)) // 4)
                u["total_tokens"] = u.get("prompt_tokens", 0) + u["completion_tokens"]
        for ch in obj.get("choices") or []:
            delta = ch.get("delta") or {}
            _rewrite_reasoning(delta, f, keep_key=False)
            if isinstance(delta.get("content"), str):
                self.content.append(delta["content"])
            for tc in delta.get("tool_calls") or []:
                idx = tc.get("index", 0)
                if isinstance(tc.get("id"), str):
                    self.ids[idx] = _new_id(tc["id"], f.seq) if "ids_rewritten" in f else tc["id"]
                    tc["id"] = self.ids[idx]
                    if "ids_rewritten" in f:
                        f.did("ids_rewritten")
                elif "id_every_delta" in f and idx in self.ids:
                    tc["id"] = self.ids[idx]
                    f.did("id_every_delta")
                fn = tc.get("function")
                if (
                    "args_double_encoded" in f
                    and isinstance(fn, dict)
                    and isinstance(fn.get("arguments"), str)
                ):
                    f.did("args_double_encoded")
                    piece = json.dumps(fn["arguments"])[1:-1]
                    if idx not in self.started:
                        piece = '"' + piece
                        self.started.add(idx)
                    fn["arguments"] = piece
                if "tool_index_zero" in f:
                    if idx != 0:
                        f.did("tool_index_zero")
                    tc["index"] = 0
                elif "tool_index_from_one" in f and isinstance(idx, int):
                    tc["index"] = idx + 1
                    f.did("tool_index_from_one")
            if ch.get("finish_reason") is not None:
                if "args_double_encoded" in f and self.started:
                    closing = [{"index": i, "function": {"arguments": '"'}} for i in sorted(self.started)]
                    out_before.append(
                        json.dumps(
                            {
                                **obj,
                                "choices": [
                                    {
                                        "index": ch.get("index", 0),
                                        "delta": {"tool_calls": closing},
                                        "finish_reason": None,
                                    }
                                ],
                            }
                        )
                    )
                if "retry_duplicates" in f and "".join(self.content):
                    f.did("retry_duplicates")  # only text there is can be sent twice
                    out_before.append(
                        json.dumps(
                            {
                                **obj,
                                "choices": [
                                    {
                                        "index": ch.get("index", 0),
                                        "delta": {"content": "".join(self.content)},
                                        "finish_reason": None,
                                    }
                                ],
                            }
                        )
                    )
                if "finish_reason_changed" in f and ch["finish_reason"] == "tool_calls":
                    ch["finish_reason"] = "stop"
                    f.did("finish_reason_changed")
        return [*out_before, json.dumps(obj, separators=(",", ":"), ensure_ascii=False)]


def _encode(data: str, f: _Faults) -> bytes:
    if "sse_no_data_prefix" in f:
        f.did("sse_no_data_prefix")
        return data.encode() + b"\n\n"
    frame = "data: " + data
    if "sse_split_frames" in f and data.startswith("{") and len(data) > 20:
        f.did("sse_split_frames")
        cut = len(frame) // 2
        frame = frame[:cut] + "\n\n" + frame[cut:]
    return frame.encode() + b"\n\n"


async def _rewrite_stream(
    upstream: httpx.Response, f: _Faults, done: Callable[[], None]
) -> AsyncIterator[bytes]:
    try:
        async for out in _rewrite_frames(upstream, f):
            yield out
    finally:
        done()  # the ground truth is known once the stream has passed (or the caller left)


async def _rewrite_frames(upstream: httpx.Response, f: _Faults) -> AsyncIterator[bytes]:
    rw = _StreamRewriter(f)
    buf = b""
    held: list[bytes] = []
    first_held: float | None = None
    async for piece in upstream.aiter_bytes():
        buf += piece
        while b"\n\n" in buf:
            frame, buf = buf.split(b"\n\n", 1)
            text = frame.decode("utf-8", "replace")
            if not text.startswith("data:"):
                out = [frame + b"\n\n"]  # comments and anything else pass as they are
            else:
                data = text[5:].lstrip(" ")
                out = [_encode(d, f) for d in rw.frame(data)]
            if "stream_buffered" in f:
                held.extend(out)
                first_held = time.monotonic() if first_held is None else first_held
                _did_buffer(f, (time.monotonic() - first_held) * 1000)
            else:
                for o in out:
                    yield o
    if buf:  # a last frame without its blank line passes as it came
        held.append(buf)
    if held:
        yield b"".join(held)


def _did_buffer(f: _Faults, span_ms: float) -> None:
    f.did("stream_buffered")
    if span_ms < _BUFFER_VISIBLE_MS:
        f.hidden["stream_buffered"] = (
            f"the engine sent the whole stream within {span_ms:.0f} ms: held back or not, it arrives "
            f"at once (under {_BUFFER_VISIBLE_MS:.0f} ms is loopback jitter)"
        )
    else:
        f.hidden.pop("stream_buffered", None)


def create_gateway(cfg: GatewayConfig) -> Starlette:
    """The faulty gateway as an ASGI app forwarding to ``cfg.upstream``."""
    seq = itertools.count(1)
    client = httpx.AsyncClient(
        base_url=cfg.upstream.rstrip("/"), timeout=cfg.timeout_s, transport=cfg.transport
    )

    async def forward(request: Request) -> Response:
        n = next(seq)
        active = _Faults({name for name in cfg.faults.rates if cfg.faults.fires(name, n)}, n)
        correlation = request.headers.get(CORRELATION_HEADER)

        def record() -> None:
            if cfg.truth is not None:
                cfg.truth.record(
                    "gateway",
                    seq=n,
                    correlation=correlation,
                    completion_id=active.completion_id,
                    faults=active.injected(),
                )

        body = await request.body()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        if "correlation_header_dropped" in active:
            headers = [(k, v) for k, v in headers if not k.lower().startswith("x-")]
            if correlation is not None:
                active.did("correlation_header_dropped")
                # pairing's business, not the contract's: the checker pairs by completion id instead
                active.hidden["correlation_header_dropped"] = "no rule judges headers: pairing falls back"

        is_chat = request.method == "POST" and request.url.path.rstrip("/").endswith("/chat/completions")
        if is_chat and active.on:
            try:
                parsed = json.loads(body)
                if isinstance(parsed, dict):
                    body = json.dumps(_rewrite_request(parsed, active)).encode()
            except ValueError:
                pass
        url = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            upstream_req = client.build_request(request.method, url, headers=headers, content=body)
            upstream = await client.send(upstream_req, stream=True)
        except httpx.HTTPError as exc:
            return JSONResponse(
                {
                    "error": {
                        "message": f"gateway: upstream failed: {exc}",
                        "type": "BadGateway",
                        "param": None,
                        "code": 502,
                    }
                },
                status_code=502,
            )
        raw_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
        # bodies the gateway reads are decoded, so they go out without content-encoding
        out_headers = {k: v for k, v in raw_headers.items() if k.lower() != "content-encoding"}
        ctype = upstream.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            if active.on:
                gen, hdrs = _rewrite_stream(upstream, active, record), out_headers
            else:
                gen, hdrs = upstream.aiter_raw(), raw_headers
            return StreamingResponse(
                gen,
                status_code=upstream.status_code,
                headers=hdrs,
                background=BackgroundTask(upstream.aclose),
            )
        content = await upstream.aread()
        await upstream.aclose()
        if is_chat and active.on and ctype.startswith("application/json") and upstream.status_code == 200:
            with contextlib.suppress(ValueError, AttributeError):
                content = json.dumps(_rewrite_completion(json.loads(content), active)).encode()
        record()
        return Response(content, status_code=upstream.status_code, headers=out_headers)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await client.aclose()  # closes the pooled upstream connections with the server

    app = Starlette(
        routes=[
            Route(
                "/{path:path}", forward, methods=["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
            )
        ],
        lifespan=lifespan,
    )
    app.state.client = client
    return app

"""Builders for exchanges in vLLM's exact wire shapes (vllm-wire.md), for the contract tests.

Independent of the checker: frames are written out here as vLLM 0.33 serialises them (explicit
nulls on token chunks, the role chunk first, the finish chunk with ``"delta": {}``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from wirecheck.contracts import Chunk, Exchange, ExchangeError, HttpRequest, HttpResponse
from wirecheck.generators import function_tool

K2 = "moonshotai/Kimi-K2-Thinking"
K3 = "moonshotai/Kimi-K3"
CID = "chatcmpl-8a9e95f5621789de"
FP = "vllm-0.33.0-tp8-1a2b3c4d"
_ids = itertools.count(1)

WEATHER = function_tool(
    "get_weather",
    "Weather for a city",
    {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    ["city"],
    additionalProperties=False,
)
SEARCH = function_tool("search", None, {"q": {"type": "string"}}, ["q"])


def req(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": K2,
        "messages": [{"role": "user", "content": "What is the weather in Tokyo?"}],
    }
    body.update(kw)
    return body


def tool_req(**kw: Any) -> dict[str, Any]:
    return req(tools=[WEATHER, SEARCH], **kw)


def call(
    name: str = "get_weather", args: Any = '{"city": "Tokyo"}', id: str | None = None, idx: int = 0
) -> dict[str, Any]:
    if not isinstance(args, str):
        args = json.dumps(args)
    return {
        "id": id or f"functions.{name}:{idx}",
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


def tool_turn(question: str, result: str, *, args: str = '{"city": "Tokyo"}') -> list[dict[str, Any]]:
    """A history in which the assistant called get_weather (id ``functions.get_weather:0``) and the
    tool answered ``result``: what a caller sends back for the next turn."""
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call(args=args)]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": result},
    ]


def call_delta(
    name: str = "get_weather", args: str | None = '{"city": "Tokyo"}', *, id: str, index: int = 0
) -> dict[str, Any]:
    """A tool call as one stream delta announces it: index, id, type and name, and its arguments
    whole (K3, a whole call per delta) or none yet (``args=None``: hermes sends the name first)."""
    fn = {"name": name} if args is None else {"name": name, "arguments": args}
    return {"index": index, "id": id, "type": "function", "function": fn}


def usage_counts(prompt: int, completion_tokens: int, **details: Any) -> dict[str, Any]:
    """vLLM's usage object: the three counts (the total is their sum), then ``details`` as given
    (``prompt_tokens_details``, ``completion_tokens_details``)."""
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion_tokens,
        "completion_tokens": completion_tokens,
        **details,
    }


def message(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    reasoning: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    m: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
    }
    if tool_calls is not None:
        m["tool_calls"] = tool_calls
    m["reasoning"] = reasoning
    m.update(extra)
    return m


def completion(
    msg: dict[str, Any] | None = None,
    finish: str | None = "stop",
    *,
    usage: dict[str, Any] | None = None,
    model: str = K2,
) -> dict[str, Any]:
    return {
        "id": CID,
        "object": "chat.completion",
        "created": 1796199188,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": msg if msg is not None else message("Hello"),
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "token_ids": None,
            }
        ],
        "service_tier": None,
        "system_fingerprint": FP,
        "usage": usage or usage_counts(12, 20, prompt_tokens_details=None, completion_tokens_details=None),
        "prompt_logprobs": None,
        "kv_transfer_params": None,
    }


def _chunk_frame(model: str, choices: list[dict[str, Any]], **rest: Any) -> dict[str, Any]:
    """What every chat.completion.chunk starts with (id, object, created, model, choices), then the
    fields that kind of chunk carries, in vLLM's order."""
    return {
        "id": CID,
        "object": "chat.completion.chunk",
        "created": 1796199188,
        "model": model,
        "choices": choices,
        **rest,
    }


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    model: str = K2,
    index: int = 0,
    **top: Any,
) -> dict[str, Any]:
    ch: dict[str, Any] = {
        "index": index,
        "delta": delta if delta is not None else {},
        "logprobs": None,
        "finish_reason": finish,
    }
    if finish is not None:
        ch["stop_reason"] = None
    ch["token_ids"] = None
    return _chunk_frame(model, [ch], **({"kv_transfer_params": None} | top))


def role_chunk(model: str = K2) -> dict[str, Any]:
    # the first chunk: no token_ids in its choice, the prompt fields instead of kv_transfer_params
    role = {"role": "assistant", "content": ""}
    choice = {"index": 0, "delta": role, "logprobs": None, "finish_reason": None}
    return _chunk_frame(model, [choice], prompt_token_ids=None, prompt_text=None)


def usage_chunk(prompt: int = 12, completion_tokens: int = 20, model: str = K2) -> dict[str, Any]:
    return _chunk_frame(model, [], usage=usage_counts(prompt, completion_tokens), system_fingerprint=FP)


def frames(*objs: Any, done: bool = True, sep: str = "\n\n", prefix: str = "data: ") -> bytes:
    """SSE bytes: each object as one ``data:`` event; strings are sent as they are."""
    out = []
    for o in objs:
        text = o if isinstance(o, str) else json.dumps(o, separators=(",", ":"))
        out.append(f"{prefix}{text}{sep}")
    if done:
        out.append(f"{prefix}[DONE]{sep}")
    return "".join(out).encode()


def text_stream(
    *pieces: str, reasoning: tuple[str, ...] = (), finish: str = "stop", usage: bool = False, model: str = K2
) -> list[dict[str, Any]]:
    objs = [role_chunk(model)]
    objs += [chunk({"reasoning": r}, model=model) for r in reasoning]
    objs += [chunk({"content": p}, model=model) for p in pieces]
    objs.append(chunk({}, finish, model=model))
    if usage:
        objs.append(usage_chunk(model=model))
    return objs


def k2_tool_stream(
    name: str = "get_weather", args: str = '{"city": "Tokyo"}', *, idx: int = 0, finish: str = "tool_calls"
) -> list[dict[str, Any]]:
    """The Kimi K2 engine parser's deltas: id, type, name and the first fragment, then fragments,
    the closing brace held back until the call ends."""
    cid = f"functions.{name}:{idx}"
    first, rest = args[:2], args[2:-1]
    objs = [role_chunk()]
    objs.append(
        chunk(
            {
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "index": idx,
                        "function": {"name": name, "arguments": first},
                    }
                ]
            }
        )
    )
    for i in range(0, len(rest), 5):
        objs.append(chunk({"tool_calls": [{"index": idx, "function": {"arguments": rest[i : i + 5]}}]}))
    objs.append(chunk({"tool_calls": [{"index": idx, "function": {"arguments": args[-1]}}]}))
    objs.append(chunk({}, finish, system_fingerprint=FP))
    return objs


def exchange(
    request: dict[str, Any] | bytes,
    response: dict[str, Any] | bytes | None,
    *,
    status: int = 200,
    tap: str = "engine",
    stream: bool | None = None,
    times: list[float] | None = None,
    pieces: list[bytes] | None = None,
    correlation: str | None = None,
    error: ExchangeError | None = None,
    id: str | None = None,
    content_type: str | None = None,
) -> Exchange:
    body = request if isinstance(request, bytes) else json.dumps(request).encode()
    resp = None
    if response is not None or pieces is not None:
        is_stream = (
            stream if stream is not None else isinstance(response, bytes) and not response.startswith(b"{")
        )
        ctype = content_type or ("text/event-stream" if is_stream else "application/json")
        data = (
            response
            if isinstance(response, bytes)
            else json.dumps(response).encode()
            if response is not None
            else b""
        )
        if pieces is None and is_stream:
            pieces = [data]
        chunks = None
        if pieces is not None:
            ts = times or [float(i) for i in range(len(pieces))]
            chunks = [Chunk(t, p) for t, p in zip(ts, pieces, strict=True)]
        resp = HttpResponse(
            status=status, headers=[("content-type", ctype)], body=b"" if chunks else data, chunks=chunks
        )
    return Exchange(
        id=id or f"ex-{next(_ids)}",
        tap=tap,
        request=HttpRequest("POST", "/v1/chat/completions", [("content-type", "application/json")], body),
        response=resp,
        correlation=correlation,
        error=error,
    )


def streamed(request: dict[str, Any], objs: list[Any], **kw: Any) -> Exchange:
    r = dict(request)
    r.setdefault("stream", True)
    done = kw.pop("done", True)
    return exchange(r, frames(*objs, done=done), stream=True, **kw)


def per_frame(request: dict[str, Any], objs: list[Any], gap_ms: float = 20.0, **kw: Any) -> Exchange:
    """A stream recorded one frame per chunk, ``gap_ms`` apart."""
    r = dict(request)
    r.setdefault("stream", True)
    pieces = [frames(o, done=False) for o in objs] + [b"data: [DONE]\n\n"]
    times = [i * gap_ms for i in range(len(pieces))]
    return exchange(r, None, stream=True, pieces=pieces, times=times, **kw)

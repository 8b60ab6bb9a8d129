"""/v1/chat/completions on the wire: the whole answer and the stream, as vLLM writes them.

Shapes follow vllm-wire.md: every declared field present with explicit nulls, ``tool_calls`` omitted
when empty, the role chunk first, ``"delta": {}`` on the finish chunk, the usage chunk with
``"choices": []``, ``[DONE]`` always last (also after an in-band error). /v1/responses and
/v1/messages are built on :func:`whole_body` and :func:`chat_stream`, as vLLM builds them on chat.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

from ._admission import Admitted, _Reject, endpoint
from ._parsers import Parsed, StreamEmitter
from ._reply import _Reply, record_truth
from ._tokens import detokenize

__all__ = ["chat_completions", "chat_stream", "whole_body"]


def _message(reply: _Reply, p: Parsed) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        # with calls: null for auto, "" for required and named tool_choice (real vLLM 0.32)
        "content": p.content or (None if p.calls and reply.mode not in ("required", "named") else p.content),
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
    }
    if p.calls:
        msg["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in p.calls
        ]
    msg["reasoning"] = p.reasoning
    if reply.cfg.dialect == "vllm-0.15":
        msg["reasoning_content"] = p.reasoning
    return msg


def _chunk(reply: _Reply, delta: dict[str, Any], finish: str | None = None, **top: object) -> bytes:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    if finish is not None:
        choice.update({"stop_reason": None, "token_ids": None, "weight_versions": None})
    else:
        choice["token_ids"] = None
    top.setdefault("kv_transfer_params", None)
    return _frame(reply, [choice], ensure_ascii=False, **top)


def _frame(
    reply: _Reply, choices: list[dict[str, Any]], *, ensure_ascii: bool = True, **top: object
) -> bytes:
    """One ``chat.completion.chunk`` SSE frame: the envelope every chunk shares, then ``top``."""
    obj = {
        "id": reply.id,
        "object": "chat.completion.chunk",
        "created": reply.created,
        "model": reply.cfg.model,
        "choices": choices,
        **top,
    }
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=ensure_ascii).encode() + b"\n\n"


def _error_frame(message: str) -> bytes:
    """vLLM's in-band error frame, and the [DONE] that always follows it."""
    err = {"error": {"message": message, "type": "InternalServerError", "param": None, "code": 500}}
    return b"data: " + json.dumps(err).encode() + b"\n\ndata: [DONE]\n\n"


def _role_chunk(reply: _Reply) -> bytes:
    role = {
        "index": 0,
        "delta": {"role": "assistant", "content": ""},
        "logprobs": None,
        "finish_reason": None,
    }
    return _frame(reply, [role], prompt_token_ids=None, prompt_text=None)


async def _answer(admitted: Admitted) -> Response:
    if admitted.req.get("stream"):
        return StreamingResponse(chat_stream(admitted), media_type="text/event-stream")
    return JSONResponse(await whole_body(admitted))


chat_completions = endpoint(_answer)


async def whole_body(admitted: Admitted) -> dict[str, Any]:
    """The non-streamed chat completion as a dict, its ground truth recorded (for /v1/chat/completions
    and the two APIs built on it alike); an engine error raises ``_Reject``."""
    state, reply, seqreq = admitted.state, admitted.reply, admitted.seqreq
    tokens: list[str] = []
    try:
        while True:
            kind, value = await seqreq.events.get()
            if kind == "token":
                tokens.append(value)
            elif kind == "finish":
                break
            else:
                raise _Reject(500, f"EngineCore encountered an issue: {value}", "InternalServerError")
    except asyncio.CancelledError:
        state.engine.abort(seqreq)
        raise
    p = reply.parse(detokenize(tokens))
    finish = reply.finish_reason(value, p)
    reply.count_parse(state.metrics, p, streaming=False)
    body = {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.cfg.model,
        "choices": [
            {
                "index": 0,
                "message": _message(reply, p),
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "token_ids": None,
                "routed_experts": None,
                "weight_versions": None,
            }
        ],
        "service_tier": None,
        "system_fingerprint": reply.cfg.fingerprint,
        "usage": reply.usage(len(seqreq.prompt), len(tokens), seqreq.cached, p),
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "prompt_text": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }
    record_truth(admitted.request, reply.injected(), seq=reply.seq, completion_id=reply.id)
    return body


async def chat_stream(admitted: Admitted) -> AsyncIterator[bytes]:
    """The streamed chat completion's SSE frames; ground truth is recorded when it ends."""
    state, reply, seqreq = admitted.state, admitted.reply, admitted.seqreq
    cfg = reply.cfg
    raw_opts = reply.req.get("stream_options")
    opts: dict[str, Any] = raw_opts if isinstance(raw_opts, dict) else {}
    include_usage = bool(opts.get("include_usage"))
    continuous = include_usage and bool(opts.get("continuous_usage_stats"))
    emitter = StreamEmitter(reply.stream_style(), both_reasoning_names=cfg.dialect == "vllm-0.15")
    tokens: list[str] = []
    half = max(1, len(reply.out_tokens) // 2)
    finished = recorded = False
    cut: str | None = None

    def record() -> None:
        # before the last frame: /v1/messages' converter stops reading at it, and a generator left
        # suspended there would record only when collected
        nonlocal recorded
        if not recorded:
            recorded = True
            record_truth(admitted.request, reply.injected(cut), seq=reply.seq, completion_id=reply.id)

    try:
        while True:
            kind, value = await seqreq.events.get()
            if kind == "error":
                if not tokens:
                    yield _role_chunk(reply)
                finished = True
                record()
                yield _error_frame(f"EngineCore encountered an issue: {value}")
                return
            if kind == "token":
                if not tokens:
                    yield _role_chunk(reply)
                tokens.append(value)
                if len(tokens) == half and "engine.error_mid_stream" in reply.faults:
                    cut = "engine.error_mid_stream"
                    state.engine.abort(seqreq)
                    yield _error_frame("EngineCore encountered an issue mid-stream")
                    finished = True
                    return
                if len(tokens) == half and "engine.reset_mid_stream" in reply.faults:
                    cut = "engine.reset_mid_stream"
                    state.engine.abort(seqreq)
                    finished = True
                    raise ConnectionResetError("simulated connection reset mid-stream")
                delta = emitter.step(reply.parse(detokenize(tokens)), final=False)
                if delta:
                    extra = (
                        {"usage": reply.usage(len(seqreq.prompt), len(tokens), seqreq.cached, None)}
                        if continuous
                        else {}
                    )
                    yield _chunk(reply, delta, None, **extra)
                continue
            # finish
            p = reply.parse(detokenize(tokens))
            delta = emitter.step(p, final=True)
            # continuous_usage_stats: cumulative usage on every chunk, the last ones included
            top: dict[str, object] = (
                {"usage": reply.usage(len(seqreq.prompt), len(tokens), seqreq.cached, p)}
                if continuous
                else {}
            )
            if delta:
                yield _chunk(reply, delta, None, **top)
            finish = reply.finish_reason(value, p)
            reply.count_parse(state.metrics, p, streaming=True)
            # a real vLLM 0.32 puts system_fingerprint on the finish chunk when include_usage is
            # off, and only on the usage chunk when it is on (fidelity test)
            if not include_usage:
                top["system_fingerprint"] = cfg.fingerprint
            yield _chunk(reply, {}, finish, **top)
            if include_usage:
                usage = reply.usage(len(seqreq.prompt), len(tokens), seqreq.cached, p)
                yield _frame(reply, [], usage=usage, system_fingerprint=cfg.fingerprint)
            finished = True
            record()
            yield b"data: [DONE]\n\n"
            return
    finally:
        record()
        if not finished:
            # the client went away: abort so the engine frees the KV cache, as vLLM does
            state.engine.abort(seqreq)

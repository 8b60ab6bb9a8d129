"""The simulator's HTTP surface: vLLM's OpenAI-compatible endpoints as an ASGI app (Starlette).

Shapes follow vllm-wire.md: every declared field present with explicit nulls, ``tool_calls`` omitted
when empty, the role chunk first, ``"delta": {}`` on the finish chunk, the usage chunk with
``"choices": []``, ``[DONE]`` always last (also after an in-band error), errors as
``{"error": {"message", "type", "param", "code"}}`` with 400 (never 422) for schema errors.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from wirecheck.contracts import FAMILIES

from ._agent import Plan, plan_reply, thinking_on
from ._config import SimConfig
from ._engine import Engine, EngineDead, SeqRequest
from ._families import SIM_FAMILIES
from ._metrics import SimMetrics
from ._parsers import Parsed, StreamEmitter
from ._tokens import detokenize, render_prompt, token_id, tokenize
from ._truth import CORRELATION_HEADER, GroundTruth, Injected

__all__ = ["SimState", "create_app"]


class _Reject(Exception):
    def __init__(self, status: int, message: str, type_: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param = status, message, type_, param

    def response(self) -> JSONResponse:
        return JSONResponse(
            {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.status}},
            status_code=self.status,
        )


def _bad(message: str, param: str, value: Any) -> _Reject:
    # a real vLLM 0.32 names the parameter in error.param too (issue 13, fidelity test)
    return _Reject(
        400, f"{message} (parameter={param}, value={json.dumps(value)[:80]})", "BadRequestError", param
    )


class SimState:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.metrics = SimMetrics(cfg.model)
        self.engine = Engine(cfg, self.metrics)
        self.seq = itertools.count(1)
        self.started = time.time()


def _served(cfg: SimConfig, model: Any) -> bool:
    return model is None or model == cfg.model or model == cfg.model.split("/")[-1]


def _validate(cfg: SimConfig, req: Any) -> dict[str, Any]:
    if not isinstance(req, dict):
        raise _Reject(400, "Input should be a valid dictionary", "Bad Request", "body")
    msgs = req.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _Reject(
            400,
            "Field required" if msgs is None else "Input should be a non-empty list",
            "Bad Request",
            "body.messages",
        )
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _Reject(400, "Field required", "Bad Request", f"body.messages.{i}.role")
    if not _served(cfg, req.get("model")):
        raise _Reject(404, f"The model `{req.get('model')}` does not exist.", "NotFoundError", "model")
    tools = req.get("tools")
    if tools is not None and (not isinstance(tools, list) or tools == []):
        raise _bad("tools must be a non-empty list when given", "tools", tools)
    tc = req.get("tool_choice")
    if tc not in (None, "none", "auto") and not tools:
        raise _bad("When using `tool_choice`, `tools` must be set.", "tool_choice", tc)
    if isinstance(tc, dict) and FAMILIES[cfg.family].named_choice_needs_strict:
        strict = all(isinstance(t, dict) and (t.get("function") or {}).get("strict") for t in tools or [])
        if not strict:
            raise _bad("Named tool_choice needs strict tool calling for this model", "tool_choice", tc)
    for key in ("max_tokens", "max_completion_tokens"):
        v = req.get(key)
        if v is not None and (not isinstance(v, int) or v < 1):
            raise _Reject(400, "Input should be a positive integer", "Bad Request", f"body.{key}")
        if isinstance(v, int) and v > cfg.max_model_len:
            raise _bad(f"{key} is larger than max_model_len {cfg.max_model_len}", key, v)
    if req.get("stream") not in (None, True, False):
        raise _Reject(400, "Input should be a valid boolean", "Bad Request", "body.stream")
    return req


def _faults(state: SimState, seq: int) -> set[str]:
    f = state.cfg.faults
    return {name for name in f.rates if f.fires(name, seq)}


class _Reply:
    """One chat completion in progress: the plan, the parse, and how it is shown on the wire."""

    def __init__(
        self, state: SimState, req: dict[str, Any], faults: set[str], seq: int, request_id: str
    ) -> None:
        cfg = state.cfg
        self.cfg, self.req, self.faults, self.seq = cfg, req, faults, seq
        self.family = SIM_FAMILIES[cfg.family]
        self.id = request_id
        self.created = int(time.time())
        self.thinking = thinking_on(req, cfg.thinking_default)
        self.plan: Plan = plan_reply(req, thinking=self.thinking, faults=faults, seq=seq)
        self.raw = self.family.write(self.plan)
        self.out_tokens = tokenize(self.raw) or [""]
        tc = req.get("tool_choice")
        self.mode = "named" if isinstance(tc, dict) else str(tc or ("auto" if req.get("tools") else "none"))
        self.trunc = None
        if "parser.truncated_args" in faults and self.plan.calls:
            self.trunc = max(1, len(self.plan.calls[-1].args_text) // 2)

    def parse(self, text: str) -> Parsed:
        cfg, f = self.cfg, self.faults
        tool_parser = cfg.tool_parser and bool(self.req.get("tools"))
        if "parser.markup_in_content" in f and self.plan.calls:
            if self.family.fails_to_raw_output:
                return Parsed(None, text, [])  # the K3 parser's exception path: content = model output
            tool_parser = False
        reasoning_parser = cfg.reasoning_parser_on and "parser.reasoning_in_content" not in f
        p = self.family.parse(
            text,
            thinking=self.thinking,
            tool_parser=tool_parser,
            reasoning_parser=reasoning_parser,
            id_seed=self.id,
        )
        if "parser.call_dropped" in f:
            p.calls = []
        if self.trunc is not None and p.calls:
            p.calls[-1].arguments = p.calls[-1].arguments[: self.trunc]
        return p

    def finish_reason(self, engine_reason: str, p: Parsed) -> str:
        if engine_reason == "length":
            return "length"
        had_calls = bool(p.calls) or ("parser.call_dropped" in self.faults and bool(self.plan.calls))
        if had_calls and self.mode != "named":
            return "tool_calls"
        return "stop"

    def usage(self, prompt: int, completion: int, cached: int, p: Parsed | None) -> dict[str, Any]:
        u: dict[str, Any] = {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
        }
        u["prompt_tokens_details"] = {
            "cached_tokens": cached,
            "created_cache_tokens": None,
            "multimodal_tokens": None,
        }
        if self.cfg.reasoning_parser_on:
            u["completion_tokens_details"] = {
                "reasoning_tokens": len(tokenize(p.reasoning)) if p and p.reasoning else 0
            }
        return u

    def stream_style(self) -> str:
        return self.family.stream_styles[self.cfg.dialect]

    def injected(self, cut: str | None = None) -> list[Injected]:
        """The faults this reply really put on the wire (issue 14's ground truth); ``cut`` names the
        engine fault that ended a stream half way."""
        f, calls = self.faults, bool(self.plan.calls)
        applied = set(self.plan.applied)
        if self.cfg.family != "kimi_k2":
            applied.discard("model.bad_id")  # only K2's writer puts the model's id header on the wire
        if calls:
            applied |= {"parser.markup_in_content", "parser.call_dropped"} & f
        if self.trunc is not None:
            applied.add("parser.truncated_args")
        if "parser.reasoning_in_content" in f and self.cfg.reasoning_parser_on and self.plan.reasoning:
            applied.add("parser.reasoning_in_content")
        if "engine.slow_first_token" in f:
            applied.add("engine.slow_first_token")
        if cut:
            applied.add(cut)
        out: list[Injected] = []
        for name in sorted(applied):
            why = ""
            if name == "engine.slow_first_token":
                why = (
                    "a late first token is latency, not a contract break: no rule judges one exchange's TTFT"
                )
            elif name == "model.no_tool_retry":
                why = (
                    "giving up after a failed tool result is well-formed text: no wire contract breaks; "
                    "accept's interface.tool-retry check judges it over the conversation"
                )
            elif cut and name != cut and name.split(".")[0] in ("model", "parser"):
                why = f"{cut} ended the stream half way, before the answer was complete"
            elif (
                name.startswith("model.")
                and name != "model.call_in_think"
                and applied & {"parser.markup_in_content", "parser.call_dropped"}
            ):
                why = "the parser lost the call (left in content or dropped): no tool call carries it"
            out.append(Injected(name, name.split(".")[0], observable=not why, why=why))
        return out


def _record(request: Request, faults: list[Injected], *, seq: int, completion_id: str | None) -> None:
    truth: GroundTruth | None = request.app.state.truth
    if truth is not None:
        truth.record(
            "engine",
            seq=seq,
            correlation=request.headers.get(CORRELATION_HEADER),
            completion_id=completion_id,
            faults=faults,
        )


def _message(reply: _Reply, p: Parsed) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "role": "assistant",
        # with calls: null for auto, "" for required and named tool_choice (real vLLM 0.32, issue 13)
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
    obj: dict[str, Any] = {
        "id": reply.id,
        "object": "chat.completion.chunk",
        "created": reply.created,
        "model": reply.cfg.model,
        "choices": [choice],
    }
    obj.update(top)
    obj.setdefault("kv_transfer_params", None)
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def _error_frame(message: str) -> bytes:
    """vLLM's in-band error frame, and the [DONE] that always follows it."""
    err = {"error": {"message": message, "type": "InternalServerError", "param": None, "code": 500}}
    return b"data: " + json.dumps(err).encode() + b"\n\ndata: [DONE]\n\n"


def _role_chunk(reply: _Reply) -> bytes:
    obj = {
        "id": reply.id,
        "object": "chat.completion.chunk",
        "created": reply.created,
        "model": reply.cfg.model,
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
        "prompt_token_ids": None,
        "prompt_text": None,
    }
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def unauthorized(request: Request) -> Response | None:
    cfg: SimConfig = request.app.state.sim.cfg
    if cfg.api_key is not None and request.headers.get("authorization") != f"Bearer {cfg.api_key}":
        return JSONResponse({"error": "Unauthorized"}, status_code=401)
    return None


async def read_json(request: Request) -> Any:
    """The request body as JSON, or a 400 (raised as ``_Reject``)."""
    body = await request.body()
    try:
        return json.loads(body)
    except ValueError as exc:
        raise _Reject(400, f"JSON decode error: {exc}", "Bad Request", "body") from None


async def admitted(
    request: Request, to_chat: Callable[[Any], Any] | None = None
) -> tuple[Any, dict[str, Any], _Reply, SeqRequest]:
    """Read the body, turn it into a chat request (``to_chat``: how vLLM maps /v1/responses and
    /v1/messages onto chat), validate it and queue it: the body as sent, the chat request, the reply
    and the engine's request, or ``_Reject``. The one way in for every endpoint."""
    state: SimState = request.app.state.sim
    raw = await read_json(request)
    req = _validate(state.cfg, to_chat(raw) if to_chat else raw)
    reply, seqreq = admit(state, req, request)
    return raw, req, reply, seqreq


async def chat_completions(request: Request) -> Response:
    state: SimState = request.app.state.sim
    denied = unauthorized(request)
    if denied is not None:
        return denied
    try:
        _, req, reply, seqreq = await admitted(request)
    except _Reject as rej:
        return rej.response()
    if req.get("stream"):
        return StreamingResponse(_stream(state, reply, seqreq, request), media_type="text/event-stream")
    return await _whole(state, reply, seqreq, request)


def admit(state: SimState, req: dict[str, Any], request: Request) -> tuple[_Reply, SeqRequest]:
    """Fire the faults, mint the id and queue the request on the engine (or raise ``_Reject``): shared
    by /v1/chat/completions and the endpoints vLLM builds on it (/v1/responses, /v1/messages)."""
    cfg = state.cfg
    seq = next(state.seq)
    faults = _faults(state, seq)
    if state.engine.dead:
        raise _Reject(
            500, f"EngineCore encountered an issue: {state.engine.dead_reason}", "InternalServerError"
        )
    for name in ("engine.queue_full", "engine.error_500"):
        if name in faults:  # the first of the two is the answer the caller gets (ground truth, issue 14)
            _record(request, [Injected(name, "engine")], seq=seq, completion_id=None)
            break
    if "engine.queue_full" in faults or len(state.engine.waiting) >= cfg.max_waiting:
        raise _Reject(503, "The server is at capacity: the waiting queue is full", "Service Unavailable")
    if "engine.error_500" in faults:
        raise _Reject(
            500,
            "EngineCore encountered an issue. See stack trace for the root cause.",
            "InternalServerError",
        )
    rid = request.headers.get("x-request-id")
    request_id = (
        f"chatcmpl-{rid}"
        if rid
        else "chatcmpl-" + hashlib.sha256(f"{cfg.seed}:{seq}:{time.time_ns()}".encode()).hexdigest()[:16]
    )
    reply = _Reply(state, req, faults, seq, request_id)
    prompt = [token_id(t) for t in tokenize(render_prompt(req["messages"], req.get("tools")))]
    if len(prompt) > cfg.max_model_len:
        raise _bad(
            f"The prompt ({len(prompt)} tokens) is longer than the maximum model length of {cfg.max_model_len}",
            "messages",
            len(prompt),
        )
    cap = req.get("max_completion_tokens") or req.get("max_tokens") or cfg.max_model_len
    cap = min(cap, cfg.max_model_len - len(prompt))  # prompt + max_tokens beyond the window is clamped
    seqreq = SeqRequest(rid=seq, prompt=prompt, output=reply.out_tokens, max_tokens=max(cap, 1))
    if "engine.slow_first_token" in faults:
        seqreq.not_before = time.monotonic() + cfg.slow_first_token_s * cfg.time_scale
    try:
        state.engine.submit(seqreq)
    except EngineDead as exc:
        raise _Reject(500, f"EngineCore encountered an issue: {exc}", "InternalServerError") from None
    except ValueError as exc:
        raise _bad(str(exc), "messages", len(prompt)) from None
    return reply, seqreq


async def _whole(state: SimState, reply: _Reply, seqreq: SeqRequest, request: Request) -> Response:
    body = await whole_body(state, reply, seqreq)
    if isinstance(body, _Reject):
        return body.response()
    _record(request, reply.injected(), seq=reply.seq, completion_id=reply.id)
    return JSONResponse(body)


async def whole_body(state: SimState, reply: _Reply, seqreq: SeqRequest) -> dict[str, Any] | _Reject:
    """The non-streamed chat completion as a dict, or the engine error as a ``_Reject``."""
    tokens: list[str] = []
    try:
        while True:
            kind, value = await seqreq.events.get()
            if kind == "token":
                tokens.append(value)
            elif kind == "finish":
                break
            else:
                return _Reject(500, f"EngineCore encountered an issue: {value}", "InternalServerError")
    except asyncio.CancelledError:
        state.engine.abort(seqreq)
        raise
    p = reply.parse(detokenize(tokens))
    finish = reply.finish_reason(value, p)
    state.metrics.parser.labels(
        mode=reply.mode,
        outcome="tool_call" if p.calls else "no_tool_call",
        request_type="non_stream",
        model_name=state.metrics.labels["model_name"],
    ).inc()
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
    return body


async def _stream(
    state: SimState, reply: _Reply, seqreq: SeqRequest, request: Request
) -> AsyncIterator[bytes]:
    cfg = reply.cfg
    raw_opts = reply.req.get("stream_options")
    opts: dict[str, Any] = raw_opts if isinstance(raw_opts, dict) else {}
    include_usage = bool(opts.get("include_usage"))
    continuous = include_usage and bool(opts.get("continuous_usage_stats"))
    emitter = StreamEmitter(reply.stream_style(), both_reasoning_names=cfg.dialect == "vllm-0.15")
    tokens: list[str] = []
    half = max(1, len(reply.out_tokens) // 2)
    finished = False
    cut: str | None = None
    try:
        while True:
            kind, value = await seqreq.events.get()
            if kind == "error":
                if not tokens:
                    yield _role_chunk(reply)
                yield _error_frame(f"EngineCore encountered an issue: {value}")
                finished = True
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
            state.metrics.parser.labels(
                mode=reply.mode,
                outcome="tool_call" if p.calls else "no_tool_call",
                request_type="stream",
                model_name=state.metrics.labels["model_name"],
            ).inc()
            # a real vLLM 0.32 puts system_fingerprint on the finish chunk when include_usage is
            # off, and only on the usage chunk when it is on (issue 13, fidelity test)
            if not include_usage:
                top["system_fingerprint"] = cfg.fingerprint
            yield _chunk(reply, {}, finish, **top)
            if include_usage:
                usage = reply.usage(len(seqreq.prompt), len(tokens), seqreq.cached, p)
                obj = {
                    "id": reply.id,
                    "object": "chat.completion.chunk",
                    "created": reply.created,
                    "model": cfg.model,
                    "choices": [],
                    "usage": usage,
                    "system_fingerprint": cfg.fingerprint,
                }
                yield b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
            finished = True
            return
    finally:
        _record(request, reply.injected(cut), seq=reply.seq, completion_id=reply.id)
        if not finished:
            # the client went away: abort so the engine frees the KV cache, as vLLM does
            state.engine.abort(seqreq)


async def models(request: Request) -> Response:
    cfg: SimConfig = request.app.state.sim.cfg
    card = {
        "id": cfg.model,
        "object": "model",
        "created": int(request.app.state.sim.started),
        "owned_by": "vllm",
        "root": cfg.model,
        "parent": None,
        "max_model_len": cfg.max_model_len,
        "permission": [],
    }
    return JSONResponse({"object": "list", "data": [card]})


async def health(request: Request) -> Response:
    return Response(status_code=503 if request.app.state.sim.engine.dead else 200)


async def version(request: Request) -> Response:
    return JSONResponse({"version": request.app.state.sim.cfg.version})


async def load(request: Request) -> Response:
    return JSONResponse({"server_load": request.app.state.sim.engine.load()})


async def tokenize_ep(request: Request) -> Response:
    cfg: SimConfig = request.app.state.sim.cfg
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _Reject(400, "JSON decode error", "Bad Request", "body").response()
    if not isinstance(body, dict) or ("messages" not in body and "prompt" not in body):
        return _Reject(400, "Field required", "Bad Request", "body.prompt").response()
    text = render_prompt(body["messages"], body.get("tools")) if "messages" in body else str(body["prompt"])
    toks = tokenize(text)
    return JSONResponse(
        {
            "count": len(toks),
            "max_model_len": cfg.max_model_len,
            "tokens": [token_id(t) for t in toks],
            "token_strs": toks,
        }
    )


async def detokenize_ep(request: Request) -> Response:
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _Reject(400, "JSON decode error", "Bad Request", "body").response()
    # ids do not map back in this tokenizer; token_strs (an extension) does
    strs = body.get("token_strs") if isinstance(body, dict) else None
    return JSONResponse({"prompt": detokenize(strs) if isinstance(strs, list) else ""})


async def metrics_ep(request: Request) -> Response:
    return Response(
        request.app.state.sim.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8"
    )


def create_app(cfg: SimConfig | None = None, *, truth: GroundTruth | None = None) -> Starlette:
    """The simulator as an ASGI app; ``app.state.sim`` holds its engine and metrics. With ``truth``,
    every fault that changed an answer is written there (issue 14)."""
    from ._apis import responses  # both built on this module's chat machinery
    from ._messages_api import messages

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/version", version, methods=["GET"]),
            Route("/load", load, methods=["GET"]),
            Route("/tokenize", tokenize_ep, methods=["POST"]),
            Route("/detokenize", detokenize_ep, methods=["POST"]),
            Route("/metrics", metrics_ep, methods=["GET"]),
        ]
    )
    app.state.sim = SimState(cfg or SimConfig())
    app.state.truth = truth
    return app

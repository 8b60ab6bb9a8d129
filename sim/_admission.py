"""The simulator's one way in: the key check, the body, validation, faults and the engine's queue.

/v1/chat/completions and the endpoints vLLM builds on it (/v1/responses, /v1/messages) all enter
through :func:`endpoint`, so that a request is refused the same way whichever door it came by; each
endpoint only says how its body maps onto chat and how it writes an error. Refusals follow
vllm-wire.md: ``{"error": {"message", "type", "param", "code"}}`` with 400 (never 422) for schema
errors, 404 for a model that is not served, 503 when the waiting queue is full.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ._config import SimConfig
from ._engine import Engine, EngineDead, SeqRequest
from ._metrics import SimMetrics
from ._reply import _Reply, record_truth
from ._tokens import render_prompt, token_id, tokenize
from ._truth import Injected

__all__ = ["Admitted", "SimState", "endpoint"]


class SimState:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.metrics = SimMetrics(cfg.model)
        self.engine = Engine(cfg, self.metrics)
        self.seq = itertools.count(1)
        self.started = time.time()


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
    # a real vLLM 0.32 names the parameter in error.param too (fidelity test)
    return _Reject(
        400, f"{message} (parameter={param}, value={json.dumps(value)[:80]})", "BadRequestError", param
    )


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


def admit(state: SimState, req: dict[str, Any], request: Request) -> tuple[_Reply, SeqRequest]:
    """Fire the faults, mint the id and queue the request on the engine (or raise ``_Reject``)."""
    cfg = state.cfg
    seq = next(state.seq)
    faults = _faults(state, seq)
    if state.engine.dead:
        raise _Reject(
            500, f"EngineCore encountered an issue: {state.engine.dead_reason}", "InternalServerError"
        )
    for name in ("engine.queue_full", "engine.error_500"):
        if name in faults:  # the first of the two is the answer the caller gets (ground truth)
            record_truth(request, [Injected(name, "engine")], seq=seq, completion_id=None)
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
    reply = _Reply(cfg, req, faults, seq, request_id)
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


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request the engine has queued: the body as sent, the chat request it became, the reply in
    progress and the engine's request."""

    request: Request
    state: SimState
    raw: Any
    req: dict[str, Any]
    reply: _Reply
    seqreq: SeqRequest


def endpoint(
    answer: Callable[[Admitted], Awaitable[Response]],
    *,
    to_chat: Callable[[Any], Any] | None = None,
    on_reject: Callable[[_Reject], Response] = _Reject.response,
) -> Callable[[Request], Awaitable[Response]]:
    """A route that checks the key, reads the body, turns it into a chat request (``to_chat``: how
    vLLM maps /v1/responses and /v1/messages onto chat), validates and queues it, then lets
    ``answer`` write the reply. A ``_Reject`` raised on the way in or by ``answer`` (an engine error
    before a non-streamed reply) becomes ``on_reject``'s response: the endpoint's error shape."""

    async def route(request: Request) -> Response:
        denied = unauthorized(request)
        if denied is not None:
            return denied
        state: SimState = request.app.state.sim
        try:
            raw = await read_json(request)
            req = _validate(state.cfg, to_chat(raw) if to_chat else raw)
            reply, seqreq = admit(state, req, request)
            return await answer(Admitted(request, state, raw, req, reply, seqreq))
        except _Reject as rej:
            return on_reject(rej)

    return route

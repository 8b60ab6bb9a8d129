"""The simulator's HTTP surface: vLLM's OpenAI-compatible endpoints as an ASGI app (Starlette).

The pieces: ``_admission`` (the one way in: key, body, validation, faults, the engine's queue),
``_reply`` (one completion: plan, parse, ground truth), ``_chat`` (/v1/chat/completions on the
wire), ``_apis`` and ``_messages_api`` (/v1/responses and /v1/messages, built on chat as in vLLM).
This module holds the small endpoints and the routing.
"""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ._admission import SimState, _Reject
from ._apis import responses
from ._chat import chat_completions
from ._config import SimConfig
from ._messages_api import messages
from ._tokens import detokenize, render_prompt, token_id, tokenize
from ._truth import GroundTruth

__all__ = ["SimState", "create_app"]


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
    every fault that changed an answer is written there."""
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

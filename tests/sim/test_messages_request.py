"""/v1/messages requests as vLLM 0.32 takes them (``entrypoints/anthropic/``): what its request
model refuses, and in which shape; ``output_config.format``; a named ``tool_choice`` on every family
that serves one. Each fact is held against the real server in tests/real_vllm/test_frameworks.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import apiwire as aw
from tests.support import wire
from wirecheck.contracts import CheckConfig, check_exchanges

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "summary": {"type": "string"}},
    "required": ["city", "summary"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"thinking": {"type": "enabled", "budget_tokens": 512}}, "body.thinking.enabled.budget_tokens"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1023}}, "body.thinking.enabled.budget_tokens"),
        ({"max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 4096}}, "body"),
        ({"max_tokens": None}, "body.max_tokens"),
        ({"max_tokens": 0}, "body.max_tokens"),
        ({"tool_choice": {"type": "tool"}}, "body.tool_choice"),
        ({"messages": [{"role": "bot", "content": "x"}]}, "body.messages.0.role"),
    ],
)
async def test_a_body_the_request_model_refuses_is_an_openai_shaped_400(
    sim_client: Callable[..., Any], change: dict[str, Any], param: str
) -> None:
    """FastAPI validates the body before the Messages handler runs, so vLLM's global validation
    handler answers in its own (OpenAI) shape, never the Anthropic one; and wirecheck blames the
    caller for it."""
    c = sim_client(family="kimi_k2")
    body = {
        k: v
        for k, v in {**aw.messages_req(model=c.app.state.sim.cfg.model), **change}.items()
        if v is not None
    }
    r = await c.post("/v1/messages", json=body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert set(r.json()) == {"error"} and set(err) == {"message", "type", "param", "code"}
    assert (err["type"], err["param"], err["code"]) == ("Bad Request", param, 400)
    assert err["message"].startswith("1 validation error:\n  {")
    found = check_exchanges(c.exchanges, CheckConfig(direct=True)).findings
    assert [(f.rule, str(f.fault)) for f in found] == [("http-client-error", "caller")]


async def test_the_refusal_reads_as_vllms(sim_client: Callable[..., Any]) -> None:
    """The message as vLLM 0.32 wrote it for these bodies (bytes taken from the real server)."""
    c = sim_client(family="kimi_k2")
    base = aw.messages_req(model=c.app.state.sim.cfg.model)
    small = await c.post("/v1/messages", json={**base, "thinking": {"type": "enabled", "budget_tokens": 512}})
    assert small.json()["error"]["message"] == (
        "1 validation error:\n  {'type': 'greater_than_equal', 'loc': 'body.thinking.enabled.budget_tokens', "
        "'msg': 'Input should be greater than or equal to 1024', 'input': '512', 'ctx': {'ge': 1024}}"
    )
    big = {**base, "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 4096}}
    assert (await c.post("/v1/messages", json=big)).json()["error"]["message"] == (
        "1 validation error:\n  {'type': 'value_error', 'loc': 'body', 'msg': 'Value error, "
        "thinking.budget_tokens must be less than max_tokens', 'input': '<dict of 5 items>', "
        "'ctx': {'error': ValueError('thinking.budget_tokens must be less than max_tokens')}}"
    )


async def test_a_budget_of_1024_below_max_tokens_is_served(sim_client: Callable[..., Any]) -> None:
    c = sim_client(family="kimi_k2")
    body = {**aw.messages_req(model=c.app.state.sim.cfg.model), "max_tokens": 2048}
    body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    r = await c.post("/v1/messages", json=body)
    assert r.status_code == 200 and r.json()["type"] == "message"


async def test_the_handlers_own_refusals_keep_the_anthropic_shape(sim_client: Callable[..., Any]) -> None:
    c = sim_client(family="kimi_k2")
    r = await c.post("/v1/messages", json=aw.messages_req(model="no-such-model"))
    assert r.status_code == 404
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "NotFoundError"


def _formatted(c: Any, stream: bool) -> dict[str, Any]:
    """A Messages request for the simulator's model whose answer ``output_config.format`` constrains."""
    return {
        "model": c.app.state.sim.cfg.model,
        "max_tokens": 512,
        "messages": [{"role": "user", "content": "Describe the weather in Osaka."}],
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
        "stream": stream,
    }


@pytest.mark.parametrize("stream", [False, True])
async def test_output_config_format_is_honoured(sim_client: Callable[..., Any], stream: bool) -> None:
    """``output_config.format`` (``{"type": "json_schema", "schema": ...}``, the anthropic SDK's
    wire) becomes the chat request's json_schema response format: the answer is JSON valid for it,
    and wirecheck judges it like ``response_format``."""
    c = sim_client(family="kimi_k2")
    body = _formatted(c, stream)
    r = await c.post("/v1/messages", json=body)
    assert r.status_code == 200
    if stream:
        deltas = [json.loads(f.split("\ndata: ", 1)[1]) for f in r.text.split("\n\n") if "text_delta" in f]
        text = "".join(d["delta"]["text"] for d in deltas)
    else:
        text = "".join(b["text"] for b in r.json()["content"] if b["type"] == "text")
    answer = json.loads(text)
    assert set(answer) == {"city", "summary"} and answer["city"] == "Osaka"
    assert check_exchanges(c.exchanges, CheckConfig(direct=True)).findings == []


@pytest.mark.parametrize("family", ["kimi_k2", "kimi_k3"])
async def test_a_named_tool_choice_is_served_without_strict_tools(
    sim_client: Callable[..., Any], family: str
) -> None:
    """vLLM 0.32 forces a named call through the family's structural tag whether or not the tools
    are ``strict`` (``_apply_structural_tag``; K3's parser refuses only with
    VLLM_ENFORCE_STRICT_TOOL_CALLING off), on chat and Messages alike."""
    c = sim_client(family=family)
    model = c.app.state.sim.cfg.model
    body = aw.messages_req(model=model, tool_choice={"type": "tool", "name": "get_weather"})
    r = await c.post("/v1/messages", json=body)
    assert r.status_code == 200
    assert [b["name"] for b in r.json()["content"] if b["type"] == "tool_use"] == ["get_weather"]
    chat = wire.req(
        model=model,
        tools=[wire.WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    r = await c.post("/v1/chat/completions", json=chat)
    assert r.status_code == 200
    assert [t["function"]["name"] for t in r.json()["choices"][0]["message"]["tool_calls"]] == ["get_weather"]
    assert check_exchanges(c.exchanges, CheckConfig(direct=True)).findings == []


@pytest.mark.parametrize("stream", [False, True])
async def test_output_config_format_is_judged_like_response_format(
    sim_client: Callable[..., Any], stream: bool
) -> None:
    """A fenced JSON answer under ``output_config.format`` breaks the format as it breaks
    ``response_format`` on chat: the same finding, on the engine (vLLM decodes under the format, so
    output outside it was not constrained)."""
    c = sim_client(family="kimi_k2", faults="engine.json_output_unconstrained")
    body = _formatted(c, stream)
    assert (await c.post("/v1/messages", json=body)).status_code == 200
    found = check_exchanges(c.exchanges, CheckConfig(direct=True)).findings
    assert [(f.rule, str(f.fault)) for f in found] == [("json-output-invalid", "engine")]

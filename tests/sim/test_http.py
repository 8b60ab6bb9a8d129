"""The simulator over real sockets and as vLLM answers bad requests; the openai SDK as the caller."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from tests.support import wire
from wirecheck.record import serve
from wirecheck.sim import SimConfig, create_app, parse_faults


def test_openai_sdk_streams_tool_calls_from_the_simulator() -> None:
    app = create_app(SimConfig(time_scale=0.001))
    with serve(app) as url, contextlib.ExitStack() as stack:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
        stack.callback(client.close)
        stream = client.chat.completions.create(
            model="moonshotai/Kimi-K2-Thinking",
            messages=[{"role": "user", "content": "Weather in Osaka, and search the news for Osaka"}],
            tools=[wire.WEATHER, wire.SEARCH],  # type: ignore[list-item]
            stream=True,
            stream_options={"include_usage": True},
        )
        calls: dict[int, dict[str, str]] = {}
        finish, usage = None, None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for ch in chunk.choices:
                for tc in ch.delta.tool_calls or []:
                    c = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    c["id"] += tc.id or ""
                    c["name"] += (tc.function and tc.function.name) or ""
                    c["arguments"] += (tc.function and tc.function.arguments) or ""
                finish = ch.finish_reason or finish
        assert [(c["id"], c["name"]) for c in calls.values()] == [
            ("functions.get_weather:0", "get_weather"),
            ("functions.search:1", "search"),
        ]
        assert json.loads(calls[0]["arguments"])["city"] == "Osaka"
        assert finish == "tool_calls" and usage is not None and usage.completion_tokens > 0
        # and the SDK's own helper assembles the same
        with client.chat.completions.stream(
            model="moonshotai/Kimi-K2-Thinking",
            messages=[{"role": "user", "content": "Weather in Osaka?"}],
            tools=[wire.WEATHER],
        ) as s:  # type: ignore[list-item]
            final = s.get_final_completion()
        assert json.loads(final.choices[0].message.tool_calls[0].function.arguments)["city"] == "Osaka"  # type: ignore[index,union-attr]


def test_reset_mid_stream_cuts_the_connection() -> None:
    app = create_app(SimConfig(time_scale=0.001, faults=parse_faults("engine.reset_mid_stream")))
    with (
        serve(app) as url,
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", f"{url}/v1/chat/completions", json=wire.req(stream=True)) as r,
    ):
        for _ in r.iter_raw():
            pass


ERRORS = [
    (wire.req(tools=[]), 400, "BadRequestError", "(parameter=tools, value=[])"),
    (wire.req(tool_choice="required"), 400, "BadRequestError", "(parameter=tool_choice"),
    ({"model": "moonshotai/Kimi-K2-Thinking"}, 400, "Bad Request", "Field required"),
    (wire.req(model="no/such-model"), 404, "NotFoundError", "does not exist"),
    (wire.req(max_tokens=10**7), 400, "BadRequestError", "(parameter=max_tokens"),
]


@pytest.mark.parametrize(("body", "status", "type_", "needle"), ERRORS)
async def test_errors_have_vllms_status_type_and_message(
    sim_client: Callable[..., Any], body: dict[str, Any], status: int, type_: str, needle: str
) -> None:
    c = sim_client()
    r = await c.post("/v1/chat/completions", json=body)
    assert r.status_code == status
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert (err["type"], err["code"]) == (type_, status) and needle in err["message"]


async def test_missing_messages_names_the_parameter_and_is_never_422(sim_client: Callable[..., Any]) -> None:
    r = await sim_client().post("/v1/chat/completions", json={"model": "x"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "body.messages"


async def test_named_tool_choice_is_served_without_strict_tools(sim_client: Callable[..., Any]) -> None:
    """K3 too: vLLM 0.32's structural tag forces the named call whether or not the tools are strict
    (the real K3 server answers 200; tests/real_vllm/test_frameworks.py)."""
    named = {"type": "function", "function": {"name": "get_weather"}}
    for family, model in (("kimi_k3", "moonshotai/Kimi-K3"), ("kimi_k2", "moonshotai/Kimi-K2-Thinking")):
        r = await sim_client(family=family).post(
            "/v1/chat/completions", json=wire.tool_req(model=model, tool_choice=named)
        )
        # forced named gives stop
        assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] == "stop"


async def test_wrong_api_key_gets_the_string_body(sim_client: Callable[..., Any]) -> None:
    c = sim_client(api_key="k")
    r = await c.post("/v1/chat/completions", json=wire.req())
    assert (r.status_code, r.json()) == (401, {"error": "Unauthorized"})
    assert (
        await c.post("/v1/chat/completions", json=wire.req(), headers={"authorization": "Bearer k"})
    ).status_code == 200


async def test_prompt_plus_max_tokens_beyond_the_window_is_clamped(sim_client: Callable[..., Any]) -> None:
    r = await sim_client(max_model_len=2000).post("/v1/chat/completions", json=wire.req(max_tokens=1990))
    assert r.status_code == 200


async def test_other_endpoints(sim_client: Callable[..., Any]) -> None:
    c = sim_client()
    assert (await c.get("/health")).content == b""
    assert (await c.get("/version")).json() == {"version": "0.33.0"}
    assert (await c.get("/load")).json() == {"server_load": 0}
    card = (await c.get("/v1/models")).json()["data"][0]
    assert (card["id"], card["root"], card["max_model_len"]) == (
        "moonshotai/Kimi-K2-Thinking",
        "moonshotai/Kimi-K2-Thinking",
        131072,
    )
    tok = (await c.post("/tokenize", json={"model": "x", "prompt": "Hello world"})).json()
    assert set(tok) == {"count", "max_model_len", "tokens", "token_strs"} and tok["count"] == 2
    assert (await c.post("/detokenize", json={"token_strs": tok["token_strs"]})).json() == {
        "prompt": "Hello world"
    }


async def test_response_id_follows_x_request_id_and_fingerprint_tells_version(
    sim_client: Callable[..., Any],
) -> None:
    c = sim_client()
    r = await c.post("/v1/chat/completions", json=wire.req(), headers={"x-request-id": "abc"})
    body = r.json()
    assert body["id"] == "chatcmpl-abc"
    assert body["system_fingerprint"].startswith("vllm-0.33.0-tp8-")
    msg = body["choices"][0]["message"]
    # vLLM 0.33's message keys in its order, as tests/support/wire.py writes them out (role, content,
    # refusal, annotations, audio, function_call, reasoning): no tool_calls key without calls
    assert list(msg) == list(wire.message())

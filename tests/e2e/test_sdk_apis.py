"""The openai SDK's Responses API and the anthropic SDK's Messages API through the proxy against the
simulator, over loopback sockets: each checks clean, and an invalid-arguments fault injected
in the simulator is found with the rule that finds it on chat completions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import openai
import pytest

from tests.e2e.test_proxy import proxy
from tests.proxy.test_app import recorded
from tests.support import apiwire as aw
from wirecheck.contracts import CheckConfig, Finding, check_exchanges
from wirecheck.record import Store, serve
from wirecheck.sim import SimConfig, create_app, parse_faults

MODEL = "moonshotai/Kimi-K2-Thinking"


@contextmanager
def through_proxy(store: Store, faults: str = "") -> Iterator[str]:
    sim = create_app(SimConfig(time_scale=0.001, faults=parse_faults(faults)))
    with serve(sim) as sim_url, proxy(sim_url, store) as url:
        yield url


def findings(store: Store) -> tuple[Any, list[Finding]]:
    [ex] = asyncio.run(recorded(store, 1))
    return ex, check_exchanges([ex], CheckConfig(direct=True)).findings


def responses_stream(url: str) -> list[Any]:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0) as client:
        stream = client.responses.create(
            model=MODEL,
            input="What is the weather in Osaka?",
            tools=[aw.WEATHER_FLAT],  # type: ignore[list-item]
            stream=True,
        )
        return list(stream)


def test_openai_sdk_responses_stream_checks_clean(store: Store) -> None:
    with through_proxy(store) as url:
        events = responses_stream(url)
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    [call] = [i for i in events[-1].response.output if i.type == "function_call"]
    assert (call.call_id, call.name, json.loads(call.arguments)) == (
        "functions.get_weather:0",
        "get_weather",
        {"city": "Osaka"},
    )
    ex, found = findings(store)
    # the exchange keeps its endpoint, and the stream is recorded as it came, with arrival times
    assert ex.request.path == "/v1/responses"
    assert ex.response.chunks is not None and len(ex.response.chunks) > 5
    times = [c.t_ms for c in ex.response.chunks]
    assert times == sorted(times)
    assert found == []


def test_openai_sdk_responses_invalid_arguments_fire_the_chat_rule(store: Store) -> None:
    with through_proxy(store, "model.invalid_json") as url:
        events = responses_stream(url)
    assert events[-1].type == "response.completed"
    _, found = findings(store)
    assert [(f.rule, str(f.fault)) for f in found] == [("tool-call-args-invalid-json", "model")]


def messages_stream(url: str) -> Any:
    with (
        anthropic.Anthropic(base_url=url, api_key="sk-test", max_retries=0) as client,
        client.messages.stream(
            model=MODEL,
            max_tokens=512,
            messages=[{"role": "user", "content": "What is the weather in Osaka?"}],
            tools=[aw.WEATHER_ANTHROPIC],  # type: ignore[list-item]
        ) as s,
    ):
        return s.get_final_message()


def test_anthropic_sdk_messages_stream_checks_clean(store: Store) -> None:
    with through_proxy(store) as url:
        final = messages_stream(url)
    assert final.stop_reason == "tool_use"
    [use] = [b for b in final.content if b.type == "tool_use"]
    assert (use.id, use.name, use.input) == ("functions.get_weather:0", "get_weather", {"city": "Osaka"})
    assert any(b.type == "thinking" for b in final.content)
    ex, found = findings(store)
    assert ex.request.path == "/v1/messages" and ex.response.chunks
    assert found == []


def test_anthropic_sdk_messages_invalid_arguments_fire_the_chat_rule(store: Store) -> None:
    with (
        through_proxy(store, "model.invalid_json") as url,
        pytest.raises(ValueError, match="tool parameter JSON"),
    ):
        # the SDK parses each partial_json as it comes: invalid arguments break the client itself
        messages_stream(url)
    ex, found = findings(store)
    # the SDK closes the stream as it fails; the proxy may or may not have passed the end on by then
    # (about 1 run in 7 here), and the arguments are judged either way
    assert ex.error is None or ex.error.kind == "client_abort"
    assert [(f.rule, str(f.fault)) for f in found if f.rule != "transport-error"] == [
        ("tool-call-args-invalid-json", "model")
    ]

"""The turn after a tool result is constrained as the first one is: vLLM applies ``tool_choice``
required/named (a structural tag) and ``response_format`` (a grammar) on every turn, so the model
calls or answers JSON there too. Agent frameworks send both on every turn (pydantic-ai answers
through an output tool under ``required``; openai-agents sends its ``output_type``'s schema)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import wire
from wirecheck.contracts import CheckConfig, check_exchanges

FINAL = {
    "type": "function",
    "function": {
        "name": "final_result",
        "parameters": {
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
        },
    },
}
HISTORY = wire.tool_turn("What is the weather in Tokyo?", "Sunny, 21 C")


async def answer(c: Any, body: dict[str, Any]) -> dict[str, Any]:
    r = await c.post("/v1/chat/completions", json=body)
    r.raise_for_status()
    assert check_exchanges(c.exchanges, CheckConfig(direct=True)).findings == []
    return dict(r.json()["choices"][0]["message"])


@pytest.mark.parametrize(
    ("tool_choice", "called"),
    [
        ("required", "final_result"),
        ({"type": "function", "function": {"name": "get_weather"}}, "get_weather"),
    ],
)
async def test_a_forced_tool_choice_calls_after_a_tool_result(
    sim_client: Callable[..., Any], tool_choice: Any, called: str
) -> None:
    c = sim_client(family="kimi_k2")
    body = wire.req(messages=HISTORY, tools=[wire.WEATHER, FINAL], tool_choice=tool_choice)
    msg = await answer(c, body)
    [tc] = msg["tool_calls"]
    # required: the tool that did not just answer; named: the named one. K2 ids keep counting.
    assert (tc["function"]["name"], tc["id"]) == (called, f"functions.{called}:1")


async def test_response_format_holds_after_a_tool_result(sim_client: Callable[..., Any]) -> None:
    c = sim_client(family="kimi_k2")
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    rf = {"type": "json_schema", "json_schema": {"name": "w", "schema": schema}}
    msg = await answer(c, wire.req(messages=HISTORY, tools=[wire.WEATHER], response_format=rf))
    assert "tool_calls" not in msg and json.loads(msg["content"]) == {"city": "Tokyo"}


async def test_auto_after_a_tool_result_still_answers_in_text(sim_client: Callable[..., Any]) -> None:
    c = sim_client(family="kimi_k2")
    msg = await answer(c, wire.req(messages=HISTORY, tools=[wire.WEATHER, FINAL]))
    assert "tool_calls" not in msg and "Sunny, 21 C" in msg["content"]

"""The interface phase's agent requests: a fixed set a careful caller sends, cycling through seven kinds
(a tool call, parallel calls, a tool result, a tool failure the model must retry, ``json_object`` and
``json_schema`` output, and the same request streamed and not), each in a city of its own."""

from __future__ import annotations

import json
from typing import Any

from wirecheck.generators import CITIES, function_tool

__all__ = ["KINDS", "failed_tool", "interface_requests"]

KINDS = (
    "tool-call",
    "parallel-calls",
    "tool-result",
    "tool-failure",
    "json-object",
    "json-schema",
    "stream-pair",
)

WEATHER = function_tool(
    "get_weather",
    "Current weather for a city",
    {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    ["city"],
)
SEARCH = function_tool("search_orders", "Search orders", {"query": {"type": "string"}}, ["query"])
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "summary": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["city", "summary"],
}


def _history(city: str, i: int, *, fail: bool) -> list[dict[str, Any]]:
    cid = "functions.get_weather:0"
    call = {
        "id": cid,
        "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
    }
    result = "error: upstream timeout" if fail else json.dumps({"temp_c": 18 + i % 9, "sky": "clear"})
    return [
        {"role": "user", "content": f"What is the weather in {city}?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": cid, "content": result},
    ]


def _body(kind: str, city: str, i: int) -> dict[str, Any]:
    if kind == "tool-call":
        return {
            "messages": [{"role": "user", "content": f"What is the weather in {city}?"}],
            "tools": [WEATHER, SEARCH],
        }
    if kind == "parallel-calls":
        ask = f"Weather in {city}, and search orders for {city}"
        return {"messages": [{"role": "user", "content": ask}], "tools": [WEATHER, SEARCH]}
    if kind in ("tool-result", "tool-failure"):
        return {"messages": _history(city, i, fail=kind == "tool-failure"), "tools": [WEATHER]}
    if kind == "json-object":
        ask = f"Summarise the day in {city} as JSON"
        return {"messages": [{"role": "user", "content": ask}], "response_format": {"type": "json_object"}}
    if kind == "json-schema":
        schema = {"name": "answer", "schema": ANSWER_SCHEMA, "strict": True}
        return {
            "messages": [{"role": "user", "content": f"Describe {city} as JSON."}],
            "response_format": {"type": "json_schema", "json_schema": schema},
        }
    ask = f"Please call get_weather for {city}."
    return {"messages": [{"role": "user", "content": ask}], "tools": [WEATHER], "temperature": 0}


def interface_requests(n: int, model: str | None = None) -> list[tuple[str, list[dict[str, Any]]]]:
    """``n`` agent requests as ``(kind, bodies)``; a twin pair is two bodies (streamed, then not)."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        body = _body(kind, CITIES[i % len(CITIES)], i)
        if model:
            body["model"] = model
        if kind == "stream-pair":
            streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
            out.append((kind, [streamed, {**body, "stream": False}]))
            continue
        body["stream"] = i % 2 == 0
        if body["stream"]:
            body["stream_options"] = {"include_usage": True}
        out.append((kind, [body]))
    return out


def failed_tool(body: dict[str, Any]) -> str | None:
    """The name of the tool whose (failed) result ends the history of ``body``."""
    msgs = body.get("messages") or []
    if not msgs or msgs[-1].get("role") != "tool":
        return None
    call_id = msgs[-1].get("tool_call_id")
    for m in reversed(msgs):
        for tc in m.get("tool_calls") or []:
            if tc.get("id") == call_id:
                name = (tc.get("function") or {}).get("name")
                return name if isinstance(name, str) else None
    return None

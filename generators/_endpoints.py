"""One agent turn, written for the endpoint the scenarios drive.

The agent loop keeps its conversation in chat form; each request is rewritten here into the body of
``/v1/chat/completions``, ``/v1/responses`` (OpenAI Responses: ``input`` items, flat tools,
``function_call`` / ``function_call_output``) or ``/v1/messages`` (Anthropic Messages: ``system``,
content blocks, ``tool_use`` / ``tool_result``, ``input_schema``, ``max_tokens`` required). The checker
reads all three into the same view, so the loop judges them with the same contracts.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ENDPOINT_PATHS", "endpoint_body"]

ENDPOINT_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
#: /v1/messages needs max_tokens; enough for any simulated or real tool-call turn
MESSAGES_MAX_TOKENS = 1024


def endpoint_body(endpoint: str, chat: dict[str, Any]) -> dict[str, Any]:
    """The chat-form request ``chat`` as a request of ``endpoint``."""
    if endpoint == "chat":
        return chat
    if endpoint == "responses":
        return _responses(chat)
    if endpoint == "messages":
        return _messages(chat)
    raise ValueError(f"endpoint is one of {', '.join(ENDPOINT_PATHS)}, not {endpoint!r}")


def _keep(chat: dict[str, Any], out: dict[str, Any], *keys: str) -> dict[str, Any]:
    for k in keys:
        if k in chat:
            out[k] = chat[k]
    return out


def _responses(chat: dict[str, Any]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for m in chat.get("messages", []):
        role = m.get("role")
        if role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.get("tool_call_id"), "output": m.get("content")}
            )
            continue
        if m.get("content"):
            items.append({"type": "message", "role": role, "content": m["content"]})
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": c.get("id"),
                    "name": fn.get("name"),
                    "arguments": fn.get("arguments"),
                }
            )
    out: dict[str, Any] = {"input": items}
    if chat.get("tools"):
        out["tools"] = [{"type": "function", **t["function"]} for t in chat["tools"]]
    rf = chat.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        js = rf.get("json_schema") or {}
        out["text"] = {"format": {"type": "json_schema", "name": js.get("name"), "schema": js.get("schema")}}
    elif isinstance(rf, dict):
        out["text"] = {"format": {"type": "json_object"}}
    return _keep(chat, out, "model", "stream", "temperature")


def _messages(chat: dict[str, Any]) -> dict[str, Any]:
    system: list[str] = []
    msgs: list[dict[str, Any]] = []
    for m in chat.get("messages", []):
        role = m.get("role")
        if role == "system":
            system.append(str(m.get("content") or ""))
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.get("tool_call_id"), "content": m.get("content")}
            if msgs and msgs[-1]["role"] == "user" and isinstance(msgs[-1]["content"], list):
                msgs[-1]["content"].append(block)  # results of one turn go back in one user message
            else:
                msgs.append({"role": "user", "content": [block]})
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}  # a tool_use input is an object: invalid arguments were found already
                blocks.append({"type": "tool_use", "id": c.get("id"), "name": fn.get("name"), "input": args})
            msgs.append({"role": "assistant", "content": blocks})
        else:
            msgs.append({"role": "user", "content": m.get("content") or ""})
    out: dict[str, Any] = {"messages": msgs, "max_tokens": MESSAGES_MAX_TOKENS}
    if system:
        out["system"] = "\n".join(system)
    if chat.get("tools"):
        out["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"].get("parameters") or {"type": "object"},
            }
            for t in chat["tools"]
        ]
    rf = chat.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        # output_config.format (anthropic/serving.py _handle_output_config); json_object has no form
        # here. The schema goes under "schema", the wire name of AnthropicJsonOutputFormat.json_schema
        # (an alias: a "json_schema" key is ignored, and the answer is unconstrained)
        out["output_config"] = {
            "format": {"type": "json_schema", "schema": (rf.get("json_schema") or {}).get("schema")}
        }
    return _keep(chat, out, "model", "stream", "temperature")

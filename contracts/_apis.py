"""/v1/responses and /v1/messages read into the view the chat rules judge.

The contract behind both endpoints is the chat one (vLLM builds them on its chat machinery): a tool
call names a declared tool, its arguments are JSON valid against the schema, reasoning stays out of the
answer. So a Responses or Messages exchange is normalized here into the same :class:`AssembledChoice`
(content, reasoning, calls, finish_reason) and a chat-shaped request (``messages``, ``tools``,
``tool_choice``), and every message rule runs unchanged: invalid arguments on /v1/responses fire
``tool-call-args-invalid-json`` exactly as on /v1/chat/completions. What is particular to each
endpoint (typed event order, ``sequence_number``, content block indexes, ``.done`` events that must
repeat what the deltas built) is kept as ``api-*`` anomalies for the rules in ``_rules_apis``.

Wire facts come from the vLLM 0.32 wheel: ``entrypoints/openai/responses/streaming_events.py``,
``serving.py``, ``api_router.py`` (Responses), ``entrypoints/anthropic/serving.py`` (Messages).
Finish reasons are mapped so that the chat rules read them: Responses ``completed`` is ``tool_calls``
with calls and ``stop`` without, ``incomplete`` is ``length``; Messages ``tool_use`` is ``tool_calls``,
``end_turn`` and ``stop_sequence`` are ``stop``, ``max_tokens`` is ``length``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ._assembly import AssembledCall, AssembledChoice, StreamAnomaly, _excerpt

if TYPE_CHECKING:
    from ._view import ExchangeView

__all__ = ["API_ENDPOINTS", "endpoint_of", "normalize_api_request", "take_api_body"]

#: the endpoints normalized here; "chat" is /v1/chat/completions itself
API_ENDPOINTS = ("responses", "messages")

_MESSAGES_STOP = {
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
}
_RESPONSES_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def endpoint_of(method: str, path: str) -> str | None:
    """chat | responses | messages for a POST to one of them (any mount point), else None."""
    if method != "POST":
        return None
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/chat/completions"):
        return "chat"
    if p.endswith("/responses"):
        return "responses"
    if p.endswith("/messages"):
        return "messages"
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


# --- requests --------------------------------------------------------------------------------------


def normalize_api_request(endpoint: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The chat-shaped request the rules read (messages, tools, tool_choice, ...)."""
    return _responses_request(raw) if endpoint == "responses" else _messages_request(raw)


def _copy(raw: dict[str, Any], out: dict[str, Any], pairs: tuple[tuple[str, str], ...]) -> None:
    for src, dst in pairs:
        if raw.get(src) is not None:
            out[dst] = raw[src]


def _responses_request(raw: dict[str, Any]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = []
    if isinstance(raw.get("instructions"), str):
        msgs.append({"role": "system", "content": raw["instructions"]})
    inp = raw.get("input")
    if isinstance(inp, str):
        msgs.append({"role": "user", "content": inp})
    for item in inp if isinstance(inp, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            msgs.append({"role": item.get("role"), "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")},
            }
            if msgs and msgs[-1].get("role") == "assistant" and isinstance(msgs[-1].get("tool_calls"), list):
                msgs[-1]["tool_calls"].append(call)
            else:
                msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            msgs.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": _text(item.get("output"))}
            )
    out: dict[str, Any] = {"messages": msgs}
    tools = raw.get("tools")
    if isinstance(tools, list):
        # Responses tools are flat: {"type": "function", "name", "parameters", "strict"}
        out["tools"] = [
            {
                "type": "function",
                "function": {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t},
            }
            if isinstance(t, dict) and t.get("type") == "function"
            else t
            for t in tools
        ]
    tc = raw.get("tool_choice")
    if isinstance(tc, dict) and tc.get("type") == "function":
        out["tool_choice"] = {"type": "function", "function": {"name": tc.get("name")}}
    elif tc is not None:
        out["tool_choice"] = tc
    reasoning = raw.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        out["reasoning_effort"] = reasoning["effort"]
    text = raw.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": fmt.get("name"), "schema": fmt.get("schema")},
        }
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    _copy(
        raw,
        out,
        (
            ("model", "model"),
            ("stream", "stream"),
            ("max_output_tokens", "max_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("parallel_tool_calls", "parallel_tool_calls"),
            ("chat_template_kwargs", "chat_template_kwargs"),
            ("include_reasoning", "include_reasoning"),
            ("seed", "seed"),
        ),
    )
    return out


def _messages_request(raw: dict[str, Any]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = []
    if raw.get("system") is not None:
        msgs.append({"role": "system", "content": _text(raw["system"])})
    src = raw.get("messages")
    for m in src if isinstance(src, list) else []:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if isinstance(content, str):
            msgs.append({"role": m.get("role"), "content": content})
            continue
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for b in content if isinstance(content, list) else []:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                texts.append(str(b.get("text", "")))
            elif b.get("type") == "tool_use":
                args = json.dumps(b.get("input"), ensure_ascii=False)
                calls.append(
                    {
                        "id": b.get("id"),
                        "type": "function",
                        "function": {"name": b.get("name"), "arguments": args},
                    }
                )
            elif b.get("type") == "tool_result":
                msgs.append(
                    {"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": _text(b.get("content"))}
                )
        if m.get("role") == "assistant":
            am: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                am["tool_calls"] = calls
            msgs.append(am)
        elif texts:
            msgs.append({"role": m.get("role"), "content": "".join(texts)})
    out: dict[str, Any] = {"messages": msgs}
    tools = raw.get("tools")
    if isinstance(tools, list):
        out["tools"] = [
            {"type": "function", "function": {"name": t.get("name"), "parameters": t.get("input_schema")}}
            if isinstance(t, dict) and "input_schema" in t
            else t
            for t in tools
        ]
    tc = raw.get("tool_choice")
    if isinstance(tc, dict):
        # _convert_tool_choice (anthropic/serving.py)
        kind = tc.get("type")
        if kind == "tool":
            out["tool_choice"] = {"type": "function", "function": {"name": tc.get("name")}}
        elif kind in ("auto", "any", "none"):
            out["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[str(kind)]
        if tc.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False
    oc = raw.get("output_config")
    fmt = oc.get("format") if isinstance(oc, dict) else None
    if isinstance(fmt, dict) and fmt.get("json_schema") is not None:
        out["response_format"] = {"type": "json_schema", "json_schema": {"schema": fmt["json_schema"]}}
    thinking = raw.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "disabled":
        out["reasoning_effort"] = "none"  # _handle_thinking: disabled is effort "none"
    _copy(
        raw,
        out,
        (
            ("model", "model"),
            ("stream", "stream"),
            ("max_tokens", "max_tokens"),
            ("temperature", "temperature"),
            ("top_p", "top_p"),
            ("chat_template_kwargs", "chat_template_kwargs"),
        ),
    )
    return out


# --- non-streamed bodies ---------------------------------------------------------------------------


def take_api_body(view: ExchangeView, endpoint: str) -> None:
    """Fill ``view.choices`` (one choice) from a Responses object or a Messages message."""
    body = view.body
    choice = AssembledChoice(0, role="assistant")
    choice.reasoning_fields.add("reasoning")
    # a Responses object lists its output items, a Messages message its content blocks
    key, part_name, problem, take = (
        ("output", "output item", "a response needs an object with an output list", _take_output_item)
        if endpoint == "responses"
        else ("content", "content block", "a message needs an object with a content list", _take_block)
    )
    if not isinstance(body, dict) or not isinstance(body.get(key), list):
        view.body_problem = problem
        view.kind = "other"
        return
    for i, part in enumerate(body[key]):
        if isinstance(part, dict):
            take(view, choice, part, f"/{key}/{i}")
        else:
            view.anomalies.append(
                StreamAnomaly("bad-shape", f"{part_name} is not an object", -1, f"/{key}/{i}")
            )
    if endpoint == "responses":
        choice.finish_reason = _responses_finish(body.get("status"), choice)
    else:
        sr = body.get("stop_reason")
        choice.finish_reason = _MESSAGES_STOP.get(sr, sr) if isinstance(sr, str) else None
        choice.stop_reason = body.get("stop_sequence")
    view.model = body.get("model") if isinstance(body.get("model"), str) else None
    usage = body.get("usage")
    view.usage = usage if isinstance(usage, dict) else None
    if choice.reasoning is None:
        choice.reasoning_fields.discard("reasoning")
    view.choices = [choice]


def _responses_finish(status: Any, choice: AssembledChoice) -> str | None:
    if status == "completed":
        return "tool_calls" if choice.calls else "stop"
    if status == "incomplete":
        return "length"
    return None


def _append(old: str | None, new: str) -> str:
    return new if old is None else old + new


def add_call(
    choice: AssembledChoice,
    call_id: Any,
    name: Any,
    arguments: str,
    pointer: str,
    *,
    has_arguments_key: bool = True,
    first_event: int = 0,
) -> AssembledCall:
    """Append a function call read from a Responses ``function_call`` item or a Messages ``tool_use``
    block, whole or streamed: an id or a name that is not a string counts as absent, as on the chat
    wire (tool-call-shape and tool-call-id-missing report it)."""
    call = AssembledCall(
        index=len(choice.calls),
        id=call_id if isinstance(call_id, str) else None,
        type="function",
        name=name if isinstance(name, str) else "",
        arguments=arguments,
        first_event=first_event,
        has_arguments_key=has_arguments_key,
        pointer=pointer,
    )
    choice.calls.append(call)
    return call


def _take_output_item(view: ExchangeView, choice: AssembledChoice, item: dict[str, Any], ptr: str) -> None:
    kind = item.get("type")
    if kind == "reasoning":
        text = _text(item.get("content")) or _text(item.get("summary"))
        if text:
            choice.reasoning = _append(choice.reasoning, text)
    elif kind == "message":
        choice.content = _append(choice.content, _text(item.get("content")))
    elif kind == "function_call":
        args = item.get("arguments")
        if not isinstance(args, str):
            view.anomalies.append(
                StreamAnomaly("arguments-not-string", _excerpt(args), -1, ptr + "/arguments")
            )
            args = json.dumps(args, ensure_ascii=False)
        add_call(
            choice, item.get("call_id"), item.get("name"), args, ptr, has_arguments_key="arguments" in item
        )


def _take_block(view: ExchangeView, choice: AssembledChoice, block: dict[str, Any], ptr: str) -> None:
    kind = block.get("type")
    if kind == "thinking":
        if isinstance(block.get("thinking"), str):
            choice.reasoning = _append(choice.reasoning, block["thinking"])
    elif kind == "text":
        if isinstance(block.get("text"), str):
            choice.content = _append(choice.content, block["text"])
    elif kind == "tool_use":
        inp = block.get("input")
        if not isinstance(inp, dict):
            view.anomalies.append(
                StreamAnomaly("bad-shape", f"tool_use input is {_excerpt(inp)}", -1, ptr + "/input")
            )
        args = json.dumps(inp, ensure_ascii=False)
        add_call(choice, block.get("id"), block.get("name"), args, ptr, has_arguments_key="input" in block)

"""Builders for /v1/responses and /v1/messages exchanges in vLLM's wire shapes.

Written out by hand from vLLM 0.32's ``entrypoints/openai/responses/streaming_events.py`` and
``entrypoints/anthropic/serving.py``, independent of both the checker and the simulator.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support import wire
from wirecheck.contracts import Chunk, Exchange, HttpRequest, HttpResponse

WEATHER_FLAT = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": wire.WEATHER["function"]["parameters"],
}
WEATHER_ANTHROPIC = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": wire.WEATHER["function"]["parameters"],
}
ARGS = '{"city": "Tokyo"}'
CALL_ID = "functions.get_weather:0"


def responses_req(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": wire.K2,
        "input": "What is the weather in Tokyo?",
        "tools": [WEATHER_FLAT],
    }
    body.update(kw)
    return body


def messages_req(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": wire.K2,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "What is the weather in Tokyo?"}],
        "tools": [WEATHER_ANTHROPIC],
    }
    body.update(kw)
    return body


def typed_frames(events: list[dict[str, Any]]) -> bytes:
    """``event: <type>\\ndata: <json>\\n\\n`` per event, no ``[DONE]`` (both api_routers)."""
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n".encode() for e in events
    )


def api_exchange(
    path: str, request: dict[str, Any], response: dict[str, Any] | list[dict[str, Any]]
) -> Exchange:
    """A non-streamed body (a dict) or a stream (a list of events, one chunk each, 10 ms apart)."""
    if isinstance(response, dict):
        resp = HttpResponse(200, [("content-type", "application/json")], json.dumps(response).encode())
    else:
        chunks = [Chunk(10.0 * i, typed_frames([e])) for i, e in enumerate(response)]
        resp = HttpResponse(200, [("content-type", "text/event-stream")], b"", chunks)
    return Exchange(
        id=f"ex-api-{id(resp)}",
        tap="engine",
        request=HttpRequest(
            "POST", path, [("content-type", "application/json")], json.dumps(request).encode()
        ),
        response=resp,
    )


# --- /v1/responses ---------------------------------------------------------------------------------


def response_object(output: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    return {
        "id": "resp_0123456789abcdef0123456789abcdef",
        "created_at": 1796199188,
        "incomplete_details": None,
        "model": wire.K2,
        "object": "response",
        "output": output,
        "status": status,
        "tool_choice": "auto",
        "tools": [WEATHER_FLAT],
        "usage": None
        if status == "in_progress"
        else {"input_tokens": 20, "output_tokens": 12, "total_tokens": 32},
    }


def call_item(args: str = ARGS, status: str = "completed") -> dict[str, Any]:
    return {
        "arguments": args,
        "call_id": CALL_ID,
        "name": "get_weather",
        "type": "function_call",
        "id": "fc_1",
        "status": status,
    }


def reasoning_item(text: str = "I should call the weather tool.") -> dict[str, Any]:
    return {
        "id": "rs_1",
        "summary": [],
        "type": "reasoning",
        "content": [{"text": text, "type": "reasoning_text"}],
        "status": None,
    }


def message_item(text: str) -> dict[str, Any]:
    """An assistant message output item with one output_text part."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def responses_body(args: str = ARGS) -> dict[str, Any]:
    return response_object([reasoning_item(), call_item(args)])


def _item_event(kind: str, output_index: int, item: dict[str, Any]) -> dict[str, Any]:
    """An output item's start or end, with the item as it stands then."""
    return {"type": kind, "output_index": output_index, "item": item}


def _part_event(kind: str, item_id: str, output_index: int, **fields: Any) -> dict[str, Any]:
    """An event about the first content part of an output item (its text deltas, its end), keys
    in vLLM's order."""
    return {"type": kind, "item_id": item_id, "output_index": output_index, "content_index": 0, **fields}


def responses_events(
    args_pieces: tuple[str, ...] = ('{"city": ', '"Tokyo"}'),
    reasoning: tuple[str, ...] = ("I should call ", "the weather tool."),
    content: tuple[str, ...] = (),
    *,
    message_parts: bool = True,
) -> list[dict[str, Any]]:
    """vLLM's simple streaming path: reasoning item, then a message item if any, then the call.
    ``message_parts``: the message item's content_part.added / .done events, as vLLM 0.32 sends them
    (``emit_simple_content_open``); older servers send none."""
    ev: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object([], "in_progress")},
        {"type": "response.in_progress", "response": response_object([], "in_progress")},
    ]
    out: list[dict[str, Any]] = []
    oi = 0
    if reasoning:
        text = "".join(reasoning)
        added = {"id": "rs_1", "type": "reasoning", "summary": [], "status": "in_progress"}
        ev.append(_item_event("response.output_item.added", oi, added))
        ev.append(
            {
                "type": "response.content_part.added",
                "output_index": oi,
                "item_id": "rs_1",
                "content_index": 0,
                "part": {"text": "", "type": "reasoning_text"},
            }
        )
        ev += [_part_event("response.reasoning_text.delta", "rs_1", oi, delta=d) for d in reasoning]
        ev.append(_part_event("response.reasoning_text.done", "rs_1", oi, text=text))
        part = {"text": text, "type": "reasoning_text"}
        ev.append(_part_event("response.content_part.done", "rs_1", oi, part=part))
        item = reasoning_item(text) | {"status": "completed"}
        ev.append(_item_event("response.output_item.done", oi, item))
        out.append(item)
        oi += 1
    if content:
        text = "".join(content)
        added = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "status": "in_progress",
        }
        ev.append(_item_event("response.output_item.added", oi, added))
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        if message_parts:
            ev.append(_part_event("response.content_part.added", "msg_1", oi, part=empty))
        ev += [_part_event("response.output_text.delta", "msg_1", oi, delta=d, logprobs=[]) for d in content]
        ev.append(_part_event("response.output_text.done", "msg_1", oi, text=text, logprobs=[]))
        if message_parts:
            ev.append(_part_event("response.content_part.done", "msg_1", oi, part=empty | {"text": text}))
        item = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        ev.append(_item_event("response.output_item.done", oi, item))
        out.append(item)
        oi += 1
    if args_pieces:
        args = "".join(args_pieces)
        ev.append(_item_event("response.output_item.added", oi, call_item("", "in_progress")))
        ev += [
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": oi,
                "delta": d,
            }
            for d in args_pieces
        ]
        ev.append(
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_1",
                "output_index": oi,
                "arguments": args,
                "name": "get_weather",
            }
        )
        ev.append(_item_event("response.output_item.done", oi, call_item(args)))
        out.append(call_item(args))
    ev.append({"type": "response.completed", "response": response_object(out)})
    return number(ev)


def number(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": e["type"],
            "sequence_number": i,
            **{k: v for k, v in e.items() if k not in ("type", "sequence_number")},
        }
        for i, e in enumerate(events)
    ]


# --- /v1/messages ----------------------------------------------------------------------------------


def messages_body(inp: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": wire.CID,
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I should call the weather tool.", "signature": "ab12"},
            {
                "type": "tool_use",
                "id": CALL_ID,
                "name": "get_weather",
                "input": inp if inp is not None else {"city": "Tokyo"},
            },
        ],
        "model": wire.K2,
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 20, "output_tokens": 12},
    }


def text_message(text: str) -> dict[str, Any]:
    """A non-streamed message that answers with text only (``end_turn``)."""
    out = messages_body()
    out["content"] = [{"type": "text", "text": text}]
    out["stop_reason"] = "end_turn"
    return out


def messages_events(
    args_pieces: tuple[str, ...] = ('{"city": ', '"Tokyo"}'),
    thinking: tuple[str, ...] = ("I should call ", "the weather tool."),
    text: tuple[str, ...] = (),
    stop_reason: str = "tool_use",
    stop_sequence: str | None = None,
) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": wire.CID,
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": wire.K2,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        }
    ]
    idx = 0
    if thinking:
        ev.append(
            {
                "type": "content_block_start",
                "content_block": {"type": "thinking", "thinking": ""},
                "index": idx,
            }
        )
        ev += [
            {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": t}, "index": idx}
            for t in thinking
        ]
        ev.append(
            {
                "type": "content_block_delta",
                "delta": {"type": "signature_delta", "signature": "ab12"},
                "index": idx,
            }
        )
        ev.append({"type": "content_block_stop", "index": idx})
        idx += 1
    if text:
        ev.append(
            {"type": "content_block_start", "content_block": {"type": "text", "text": ""}, "index": idx}
        )
        ev += [
            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": t}, "index": idx}
            for t in text
        ]
        ev.append({"type": "content_block_stop", "index": idx})
        idx += 1
    if args_pieces:
        ev.append(
            {
                "type": "content_block_start",
                "content_block": {"type": "tool_use", "id": CALL_ID, "name": "get_weather", "input": {}},
                "index": idx,
            }
        )
        ev += [
            {
                "type": "content_block_delta",
                "delta": {"type": "input_json_delta", "partial_json": p},
                "index": idx,
            }
            for p in args_pieces
        ]
        ev.append({"type": "content_block_stop", "index": idx})
    ev.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
            "usage": {"input_tokens": 20, "output_tokens": 12},
        }
    )
    ev.append({"type": "message_stop"})
    return ev
